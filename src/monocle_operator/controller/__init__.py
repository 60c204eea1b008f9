"""The Monocle operator's controller room: thin steps that read, decide, apply and report.

:mod:`.wiring` describes the operator to the shared core, :mod:`.reconcile` holds the
ordered steps of one reconcile, and :mod:`.status` the pure status decisions.
"""
