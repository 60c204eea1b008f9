"""The Cluster Stack operator's controller room: thin steps that read, decide, apply and report
(:mod:`.wiring` describes the operator to the shared core)."""
