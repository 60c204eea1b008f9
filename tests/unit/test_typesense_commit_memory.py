"""The operator's memory of each cluster's furthest commit: per cluster, per uid, and gone with it."""

from __future__ import annotations

from typesense_operator.controller.nodes import CommitMemory


def test_a_commit_is_recalled_for_the_same_cluster_only() -> None:
    memory = CommitMemory()
    memory.keep("ns", "search", "uid-1", (4, 90))
    assert memory.recall("ns", "search", "uid-1") == (4, 90)
    assert memory.recall("ns", "other", "uid-1") is None
    assert memory.recall("elsewhere", "search", "uid-1") is None


def test_a_cluster_made_again_under_the_same_name_starts_afresh() -> None:
    """Its nodes are new: the old commit would keep every downgrade waiting for a log no node has."""
    memory = CommitMemory()
    memory.keep("ns", "search", "uid-1", (4, 90))
    assert memory.recall("ns", "search", "uid-2") is None
    memory.keep("ns", "search", "uid-2", (1, 3))
    assert memory.recall("ns", "search", "uid-2") == (1, 3)


def test_a_deleted_cluster_is_forgotten() -> None:
    memory = CommitMemory()
    memory.keep("ns", "search", "uid-1", (4, 90))
    memory.forget("ns", "search")
    memory.forget("ns", "never-seen")
    assert memory.recall("ns", "search", "uid-1") is None
