"""``typesense-operator``: run the Typesense operator."""

from functools import partial

from operator_core.runner import run_operator

main = partial(run_operator, "typesense-operator", "typesense_operator.controller.handlers")

if __name__ == "__main__":
    main()
