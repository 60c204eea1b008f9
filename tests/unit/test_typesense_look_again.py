"""When a TypesenseCluster is looked at again: the pure rule over what its reconcile found."""

from __future__ import annotations

import pytest

from operator_core.reconciling import WAIT_FOR_CHANGE
from typesense_operator.controller.cluster.scope import (
    CRD_RECHECK_SECONDS,
    ROLL_LOOK_SECONDS,
    look_again_after,
)

QUORUM = 7.0
"""A lost majority's grace runs out in 7 s: the look the quorum asks for."""


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ({}, QUORUM),
        ({"restore_look": 3.0}, 3.0),
        ({"rolling": True}, ROLL_LOOK_SECONDS),
        ({"stopped_for_user": True}, WAIT_FOR_CHANGE),
        ({"waiting_for_crd": True}, QUORUM),
        ({"waiting_for_crd": True, "quorum_look": 300.0}, CRD_RECHECK_SECONDS),
        ({"rolling": True, "stopped_for_user": True}, ROLL_LOOK_SECONDS),
    ],
    ids=[
        "the quorum's pace",
        "a restore waiting for its Job",
        "a roll",
        "stopped before the nodes, for the user",
        "a missing CRD, sooner quorum",
        "a missing CRD looked for",
        "a roll goes on",
    ],
)
def test_the_next_look(found: dict[str, object], expected: float) -> None:
    arguments: dict[str, object] = {
        "restore_look": None,
        "rolling": False,
        "stopped_for_user": False,
        "waiting_for_crd": False,
        "quorum_look": QUORUM,
    }
    assert look_again_after(**{**arguments, **found}) == expected  # type: ignore[arg-type]
