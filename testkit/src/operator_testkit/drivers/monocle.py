"""The Monocle operator in the test kit: what ``operator-suite-dev sandbox up`` runs for it.

Its chart and the seed sample, whose search engine is a real OpenSearch built from Maven Central's jars
(:mod:`operator_testkit.nodes.opensearch`), and whose API and crawler run on the test kit's labelled
stand-in for Monocle, which cannot be had here (:mod:`operator_testkit.nodes.standins`).
"""

from operator_testkit.nodes.standins import monocle_images
from operator_testkit.sandbox import SandboxEntry

SANDBOX = SandboxEntry(
    chart="monocle-operator",
    samples=("deploy/samples/monocle_v1alpha1_monocle.yaml",),
    images=monocle_images,
    usage="""\
  kubectl get monocles,statefulsets,deployments
  (the engine is OpenSearch 2.19.6 under Elasticsearch's name; Monocle is a stand-in, its logs say
  so, which makes the workspaces' indices; config changes run update-idents Jobs:
  kubectl edit configmap monocle-sample-api)""",
)
