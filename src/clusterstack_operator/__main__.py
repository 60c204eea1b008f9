"""``cluster-stack-operator``: run the Cluster Stack operator."""

from functools import partial

from operator_core.runner import run_operator

main = partial(run_operator, "cluster-stack-operator", "clusterstack_operator.controller.handlers")

if __name__ == "__main__":
    main()
