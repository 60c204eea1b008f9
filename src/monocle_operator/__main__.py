"""``monocle-operator``: run the Monocle operator."""

from functools import partial

from operator_core.runner import run_operator

main = partial(run_operator, "monocle-operator", "monocle_operator.controller.wiring")

if __name__ == "__main__":
    main()
