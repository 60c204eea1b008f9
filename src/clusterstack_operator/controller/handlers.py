"""kopf handlers of the Cluster Stack operator; importing this module registers them."""

import kopf

from operator_core.runner import configure_kopf

API_GROUP = "clusterstack.x-k8s.io"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: object) -> None:
    configure_kopf(settings, API_GROUP)
