"""kopf handlers of the Typesense operator; importing this module registers them."""

import kopf

from operator_core.runner import configure_kopf

API_GROUP = "ts.opentelekomcloud.com"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: object) -> None:
    configure_kopf(settings, API_GROUP)
