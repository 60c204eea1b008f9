"""``cluster-stack-operator``: run the Cluster Stack operator."""

from functools import partial

from clusterstack_operator.controller.settings import check_release_source
from operator_core.runner import run_operator

# A release source the settings do not describe is refused before the operator connects.
main = partial(
    run_operator,
    "cluster-stack-operator",
    "clusterstack_operator.controller.wiring",
    checks=(check_release_source,),
)

if __name__ == "__main__":
    main()
