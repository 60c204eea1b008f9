"""API models of this operator (none yet); each kind added here also generates its CRD."""
