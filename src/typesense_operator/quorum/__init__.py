"""Quorum health and recovery of a Typesense raft cluster: pure decisions, and the probe adapter."""
