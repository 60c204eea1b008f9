"""kopf handlers of the Cluster Stack operator; importing this module registers them.

The operator is wired by the shared controller step (:mod:`operator_core.controller`),
as the other two are; its custom resources and their controllers come with their own issue.
"""

from operator_core.controller import Operator

API_GROUP = "clusterstack.x-k8s.io"

OPERATOR = Operator("cluster-stack-operator", API_GROUP)
