"""Shared machinery of the operator suite.

Only what all three operators need lives here: the Kubernetes adapter
(:mod:`operator_core.kube`), conditions, Events, CRD generation from pydantic
models, settings, the error tree and secret scrubbing. Nothing here knows about
Typesense, Monocle or Cluster Stacks, and nothing here imports the test kit
(``operator_testkit``, a distribution of its own); import-linter holds both lines.
"""

__all__: list[str] = []
