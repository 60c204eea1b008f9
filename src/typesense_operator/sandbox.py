"""What ``operator-suite sandbox up`` runs for the Typesense operator: its RBAC and the older seed sample."""

from operator_core.sandbox import SandboxEntry

SANDBOX = SandboxEntry(
    script="typesense-operator",
    rbac="deploy/rbac/typesense-operator.yaml",
    samples=("deploy/samples/ts_v1alpha1_typesensecluster_aws.yaml",),
    usage="""\
  kubectl get typesenseclusters,pods -o wide
  KEY=$(kubectl get secret cluster-1-admin-key -o jsonpath='{.data.typesense-api-key}' | base64 -d)
  IP=$(kubectl get pod cluster-1-sts-0 -o jsonpath='{.status.podIP}')
  curl -s -H "X-TYPESENSE-API-KEY: $KEY" http://$IP:8108/status""",
)
