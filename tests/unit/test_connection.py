"""The API connection: a watch's body cut into lines wherever its chunks end; the lightkube internals
it uses."""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lightkube.config import client_adapter

from operator_core.connection import lines_of

pytestmark = pytest.mark.unit


async def chunks(body: bytes, cuts: list[int]) -> AsyncIterator[bytes]:
    start = 0
    for cut in sorted({min(c, len(body)) for c in cuts}):
        yield body[start:cut]
        start = cut
    yield body[start:]


async def lines(body: bytes, cuts: list[int]) -> list[bytes]:
    return [line async for line in lines_of(chunks(body, cuts))]


@given(
    st.lists(st.binary(min_size=0, max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    st.booleans(),
)
async def test_lines_come_whole_and_in_order_wherever_the_chunks_end(
    written: list[bytes], cuts: list[int], ends_with_newline: bool
) -> None:
    body = b"\n".join(written) + (b"\n" if ends_with_newline else b"")
    assert await lines(body, cuts) == [line for line in written if line.strip()]


async def test_a_line_longer_than_any_buffer_is_one_line() -> None:
    event = b'{"type": "ADDED", "object": {"data": "' + b"x" * (8 << 20) + b'"}}'
    cuts = list(range(0, len(event), 65536))
    assert await lines(event + b"\n" + b'{"type": "BOOKMARK"}\n', cuts) == [event, b'{"type": "BOOKMARK"}']


def test_the_lightkube_internals_the_connection_uses_are_the_pinned_ones() -> None:
    """lightkube.config.client_adapter is not lightkube's public API: the runtime pins lightkube's exact
    version, and this says what to look at when an upgrade changes what the connection calls."""
    assert importlib.metadata.version("lightkube") == "1.0.1", "pinned in pyproject.toml; read below first"
    assert list(inspect.signature(client_adapter.verify_cluster).parameters) == [
        "cluster",
        "user",
        "abs_file",
        "trust_env",
    ]
    assert list(inspect.signature(client_adapter.user_auth).parameters) == ["user"]
