"""The Monocle operator's controller room: thin kopf handlers that read, diff, apply and report.

:mod:`.handlers` registers the kopf handlers, :mod:`.reconcile` holds the
ordered steps of one reconcile, and :mod:`.status` the pure status decisions.
"""
