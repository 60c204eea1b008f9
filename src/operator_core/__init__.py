"""Shared machinery of the operator suite.

Only what all three operators need lives here: the Kubernetes adapter
(:mod:`operator_core.kube`), conditions, Events, CRD generation from pydantic
models, settings, the error tree, secret scrubbing, and the local test control
plane (:mod:`operator_core.testing`). Nothing here knows about Typesense,
Monocle or Cluster Stacks; import-linter holds that line.
"""

__all__: list[str] = []
