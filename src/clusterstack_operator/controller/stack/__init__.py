"""The ClusterStack controller: it owns the ClusterStackReleases a stack lists (made, kept, let go
once no Cluster uses them), the stack's release source, and its status (:mod:`.reconcile`)."""
