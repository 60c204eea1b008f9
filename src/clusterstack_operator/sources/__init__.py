"""Where releases come from: a GitHub repository's releases, an OCI registry, or a local directory,
behind one small interface (:class:`~clusterstack_operator.sources.base.ReleaseSource`), and the store
that keeps each downloaded release whole or not at all (:mod:`~clusterstack_operator.sources.store`)."""
