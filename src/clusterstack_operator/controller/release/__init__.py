"""The ClusterStackRelease controller: it owns a release's download (its assets, checked), the
ClusterClass and provider objects its class chart renders, and the release's status (:mod:`.reconcile`)."""
