"""The Monocle operator in the test kit: what ``operator-suite-dev sandbox up`` runs for it.

Its chart and the seed sample, whose Elasticsearch, API and crawler run on the test kit's labelled
stand-ins for images that cannot be had here (:mod:`operator_testkit.nodes.standins`).
"""

from operator_testkit.nodes.standins import monocle_standins
from operator_testkit.sandbox import SandboxEntry

SANDBOX = SandboxEntry(
    chart="monocle-operator",
    samples=("deploy/samples/monocle_v1alpha1_monocle.yaml",),
    images=monocle_standins,
    usage="""\
  kubectl get monocles,statefulsets,deployments
  (Elasticsearch and Monocle are stand-ins here: their logs say so; config changes still run
  update-idents Jobs: kubectl edit configmap monocle-sample-api)""",
)
