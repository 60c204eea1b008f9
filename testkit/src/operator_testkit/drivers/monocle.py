"""The Monocle operator in the test kit: what ``operator-suite-dev sandbox up`` runs for it (no samples).

Monocle's images cannot run on the node agent (it runs stand-ins, not
containers), so no instance is created: the operator waits for one.
"""

from operator_testkit.sandbox import SandboxEntry

SANDBOX = SandboxEntry(
    script="monocle-operator",
    rbac="charts/monocle-operator/files/rbac-rules.yaml",
    samples=(),
    usage="""\
  The monocle-operator runs, with no instance (Monocle's images run only as stand-ins here):
  kubectl apply -f deploy/samples/monocle_v1alpha1_monocle.yaml && kubectl get monocles""",
)
