"""The TypesenseScheduledBackup controller: it owns the TypesenseBackups a schedule makes on time and
prunes beyond its retention, and the schedule's status (:mod:`.reconcile`)."""
