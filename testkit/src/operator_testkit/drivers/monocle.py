"""The Monocle operator in the test kit: what ``operator-suite-dev sandbox up`` runs for it.

Its chart only, for now: no instance is created until Monocle's stand-in images (Elasticsearch, the
API, the crawler) are loaded onto the nodes; the operator waits for one.
"""

from operator_testkit.sandbox import SandboxEntry

SANDBOX = SandboxEntry(
    chart="monocle-operator",
    samples=(),
    usage="""\
  The monocle-operator runs, with no instance (Monocle's images are not on these nodes):
  kubectl apply -f deploy/samples/monocle_v1alpha1_monocle.yaml && kubectl get monocles""",
)
