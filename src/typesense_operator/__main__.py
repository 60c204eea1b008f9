"""``typesense-operator``: run the Typesense operator."""

from functools import partial

from operator_core.runner import run_operator
from typesense_operator.controller.settings import TypesenseSettings

main = partial(
    run_operator,
    "typesense-operator",
    "typesense_operator.controller.wiring",
    settings=(TypesenseSettings,),
)

if __name__ == "__main__":
    main()
