"""Typesense backups: a node's snapshot moved to object storage or a volume, and back.

``manifest`` (pure) says what a backup holds and checks it; ``storage`` is the thin adapter to S3 and
to a mounted directory; ``transfer`` moves a snapshot up and a backup down, manifest last and every
checksum verified; ``command`` is ``typesense-backup``, what the backup Job and the restore run.
"""
