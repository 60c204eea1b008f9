"""Image names the tests agree on."""

BACKUP_JOB_IMAGE = "localhost/operator-suite:backup-jobs"
"""The image the Typesense operator's backup Jobs run in the tests (OPERATOR_SUITE_BACKUP_IMAGE): a
backup test gives the suite's image of this checkout this name too (tag_image), as the chart gives the
operator's own image."""
