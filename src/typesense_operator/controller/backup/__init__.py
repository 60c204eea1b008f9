"""The TypesenseBackup controller: it owns one backup's Job (a snapshot uploaded whole, or a removal of
its data on delete) and the backup's status (:mod:`.reconcile`: its steps and finalizer)."""
