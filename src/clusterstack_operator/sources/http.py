"""What the GitHub and OCI release sources share over HTTP: one aiohttp session each, pages followed by
their ``Link`` header, and a file streamed to disk with its SHA-256 computed on the way.

The operator's other requests go over aiohttp too (decisions 21 and 26): no second HTTP library.
Nothing here knows a source's API; every failure is a :class:`SourceError` whose text was scrubbed of
the credentials the suite registered.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import ssl
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import aiohttp

from clusterstack_operator.sources.base import SourceError
from operator_core.secrets import scrub

__all__ = [
    "CHUNK_BYTES",
    "HttpFailure",
    "failed",
    "next_page",
    "open_session",
    "released",
    "stream_to_file",
    "trusting",
]

CHUNK_BYTES = 1 << 20
"""A download is read and written this much at a time: a release's size never sits in memory."""
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')

HttpFailure = (aiohttp.ClientError, asyncio.TimeoutError, OSError)
"""What a request can raise besides an answer: no connection, a dropped body, a timeout."""


def trusting(ca_bundle: Path | None = None, ca_data: str | None = None) -> ssl.SSLContext:
    """A client context that trusts the system's CAs and, besides them, those of ``ca_bundle`` (a file)
    or ``ca_data`` (PEM text, from a Secret): ``create_default_context(cafile=...)`` alone would trust
    the bundle instead."""
    context = ssl.create_default_context()
    if ca_bundle is not None:
        context.load_verify_locations(cafile=str(ca_bundle))
    if ca_data is not None:
        context.load_verify_locations(cadata=ca_data)
    return context


def open_session(timeout: float, headers: Mapping[str, str] | None = None) -> aiohttp.ClientSession:
    """A session for one source: the proxy variables ignored (its address is the user's setting), a
    time limit per request, and no cookies kept."""
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
        headers=dict(headers or {}),
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )


def next_page(response: aiohttp.ClientResponse) -> str | None:
    """The URL of the next page of a paged list, as its ``Link`` header names it (GitHub, OCI)."""
    found = _NEXT.search(response.headers.get("Link", ""))
    return found.group(1) if found else None


def failed(description: str, what: str, error: BaseException) -> SourceError:
    """A request that got no answer, said with the source and what was being done."""
    detail = str(error) or ("no answer in time" if isinstance(error, asyncio.TimeoutError) else "no detail")
    return SourceError(scrub(f"{description}: {what}: {type(error).__name__}: {detail}"))


async def stream_to_file(
    response: aiohttp.ClientResponse, target: Path, sha256: str | None, *, description: str, what: str
) -> None:
    """Write ``response``'s body to ``target``, a chunk at a time, checking it against ``sha256`` (hex)
    when given. A body that breaks off, or does not match, leaves no file, and is a
    :class:`SourceError` that says so with the source's ``description`` and ``what`` was being done."""
    digest = hashlib.sha256()
    out = await asyncio.to_thread(target.open, "wb")
    try:
        with out:
            async for chunk in response.content.iter_chunked(CHUNK_BYTES):
                digest.update(chunk)
                await asyncio.to_thread(out.write, chunk)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise SourceError(
                f"{description}: {what}: {target.name} does not match its digest sha256:{sha256}"
            )
    except BaseException as error:
        await asyncio.to_thread(target.unlink, missing_ok=True)
        if isinstance(error, HttpFailure):
            raise failed(description, what, error) from error
        raise


@contextlib.asynccontextmanager
async def released(response: aiohttp.ClientResponse) -> AsyncIterator[aiohttp.ClientResponse]:
    """``response``, given back to the pool when the block ends."""
    try:
        yield response
    finally:
        response.release()
