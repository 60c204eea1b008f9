"""The ClusterAddon controller: it owns a Cluster's addons in its workload cluster (the release's
addon chart, or its stages in order: :mod:`.stages`), their Helm hooks, the chart's delete hooks at its
finalizer (:mod:`.uninstall`), and the addon's status (:mod:`.reconcile`: its steps)."""
