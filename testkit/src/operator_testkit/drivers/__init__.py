"""What the test kit knows of each operator of the suite: its sandbox entry and its test helpers.

One module per operator. Each holds a ``SANDBOX`` entry (registered in the kit's
``operator_suite.sandbox`` entry points) and whatever drives the objects that
operator makes in end-to-end tests and benchmarks. The operators' own packages
know nothing of these modules.
"""
