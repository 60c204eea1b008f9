"""The TypesenseCluster controller: it owns the cluster's children (the key Secret, the nodes list,
Services, the StatefulSet, its PDB, Ingress, routes, the PodMonitor, the served TLS copy), its raft quorum
(recovery, rolls, a member lost with its node) and its status. :mod:`.reconcile` holds its steps and
finalizer, :mod:`.scope` what the steps share, :mod:`.status` the status it writes (pure)."""
