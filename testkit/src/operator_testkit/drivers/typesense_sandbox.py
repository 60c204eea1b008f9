"""The Typesense operator's sandbox entry: what ``operator-suite-dev sandbox up`` runs for it.

Its chart, the older seed sample (a 3-node cluster), and what makes backups work there out of the
box: an S3 server (versitygw) where the nodes' pods reach this machine, its credentials in a Secret,
and a sample ``TypesenseScheduledBackup`` whose immediate backup ``up`` waits for.
"""

from __future__ import annotations

from operator_testkit.drivers.typesense_backups import API, secret
from operator_testkit.s3 import start_detached_s3
from operator_testkit.sandbox import SAMPLES_NAMESPACE, Awaited, Prepared, SandboxEntry, SandboxSite

__all__ = ["SANDBOX", "SCHEDULE"]

SCHEDULE = "sample-backups"
BUCKET = "backups"
CLUSTER = "cluster-1"  # the seed sample's


def _prepare_sandbox(site: SandboxSite) -> Prepared:
    s3 = start_detached_s3(site.home / "s3", site.address)
    s3.create_bucket(BUCKET)
    credentials = {"ACCESS_KEY_ID": s3.access_key, "SECRET_ACCESS_KEY": s3.secret_key}
    schedule = {
        "apiVersion": API,
        "kind": "TypesenseScheduledBackup",
        "metadata": {"name": SCHEDULE},
        "spec": {
            "cluster": {"name": CLUSTER},
            "schedule": "0 * * * *",
            "immediate": True,
            "retention": {"keep": 3},
            "destination": {
                "s3": {
                    "bucket": BUCKET,
                    "prefix": "typesense",
                    "endpoint": s3.endpoint,
                    "region": s3.region,
                    "credentials": {
                        "accessKeyId": {"name": "s3-user", "key": "ACCESS_KEY_ID"},
                        "secretAccessKey": {"name": "s3-user", "key": "SECRET_ACCESS_KEY"},
                    },
                }
            },
        },
    }
    first_backup = Awaited(
        f"the first backup of TypesenseScheduledBackup {SCHEDULE}",
        f"typesensebackups.{API.split('/')[0]}",
        f"{API.split('/')[0]}/schedule={SCHEDULE}",
    )
    return Prepared(
        manifests=(secret("s3-user", SAMPLES_NAMESPACE, credentials), schedule),
        awaited=(first_backup,),
        notes=(
            f"  S3 (versitygw) at {s3.endpoint}, bucket {BUCKET}: its files are under {s3.storage / BUCKET}",
            "  kubectl get typesensescheduledbackups,typesensebackups",
            f"  kubectl typesense status {CLUSTER}   (the plugin: PATH has kubectl-typesense)",
        ),
    )


SANDBOX = SandboxEntry(
    chart="typesense-operator",
    samples=("deploy/samples/ts_v1alpha1_typesensecluster_aws.yaml",),
    prepare=_prepare_sandbox,
    usage="""\
  kubectl get typesenseclusters,pods -o wide
  KEY=$(kubectl get secret cluster-1-admin-key -o jsonpath='{.data.typesense-api-key}' | base64 -d)
  IP=$(kubectl get pod cluster-1-sts-0 -o jsonpath='{.status.podIP}')
  curl -s -H "X-TYPESENSE-API-KEY: $KEY" http://$IP:8108/status   (this machine routes to the pods)""",
)
