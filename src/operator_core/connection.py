"""The HTTP connection to one API server (aiohttp), with a kubeconfig's TLS settings and credentials.

:class:`operator_core.kube.Kube` sends every request through a :class:`Connection`. lightkube's own
client (httpx2) spent 0.5-0.9 ms of CPU on each request against the local API server, the largest part
of an operator's CPU at scale; aiohttp, which the operators' other clients and servers use too, spends
0.2-0.35 ms (decision 21).

lightkube still reads the kubeconfig and makes the TLS context (the cluster's CA, a client
certificate) and the credentials: a token; a token file, read again after a 401 because the kubelet
rotates it; an exec plugin, run again after a 401; a user name and password. The connection asks
those credentials only for the ``Authorization`` header, once, and once more when an answer is 401.

Answers of any status are returned as they came (:class:`Answer`); no answer at all (refused, reset,
timed out, a failed TLS handshake) raises :class:`NoAnswer` with the transport's own words.
:mod:`operator_core.kube` turns both into the suite's errors.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx2
import msgspec
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import SingleConfig
from lightkube.config.models import User

__all__ = ["Answer", "AnswerCounter", "Connection", "NoAnswer", "Streamed", "decode_json", "lines_of"]

CONNECTIONS = 100
"""Requests in flight at once, each on its own keep-alive connection (HTTP/1.1, as client-go by default)."""

AnswerCounter = Callable[[str, str, Mapping[str, Any], int], None]
"""Told of one answered request (a watch: when its stream opens): its method, path, query parameters,
and its answer's status."""


def decode_json(data: bytes) -> Any:
    """An answer's JSON as Python values, by msgspec (lightkube's own dependency): twice as fast as the
    standard library's parser, and it keeps one copy of each field name for every answer, where the
    standard one made new strings for each (``"metadata"``, ``"app.kubernetes.io/name"``), thousands of
    copies in the watch caches. Malformed JSON raises a ValueError, as ``json.loads`` does."""
    return _JSON.decode(data)


_JSON = msgspec.json.Decoder()


class NoAnswer(Exception):
    """The API server gave no answer: the connection was refused or lost, timed out, or TLS failed.
    ``reason`` names the transport's error (``ClientConnectorError``, ``ServerTimeoutError``...)."""

    def __init__(self, error: BaseException) -> None:
        self.reason = type(error).__name__
        super().__init__(f"{self.reason}: {error}" if str(error) else self.reason)


@dataclass(frozen=True)
class Answer:
    """An answer as it came: its HTTP status and its body."""

    status: int
    body: bytes

    def json(self) -> Any:
        return decode_json(self.body)


class Streamed:
    """An answer whose body is read as it comes: a watch, one JSON event per line."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status

    async def body(self) -> bytes:
        return await self._response.read()

    def lines(self) -> AsyncIterator[bytes]:
        return lines_of(self._response.content.iter_any())


async def lines_of(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The non-empty lines of a body that comes in ``chunks``, however long (an object of several MiB
    is one line of a watch), each whole; a line that spans several chunks is joined once, at its end."""
    partial: list[bytes] = []
    async for chunk in chunks:
        *complete, rest = chunk.split(b"\n")
        if complete:
            complete[0] = b"".join([*partial, complete[0]])
            partial = []
            for line in complete:
                if line.strip():
                    yield line
        if rest:
            partial.append(rest)
    tail = b"".join(partial)
    if tail.strip():
        yield tail


class _Credentials:
    """The ``Authorization`` header that lightkube's credentials for the kubeconfig's user give.

    lightkube's credentials are httpx2 authentication flows: each sets the header on a request,
    and some try again after a 401 answer (a token file read again, an exec plugin run again).
    They are driven here on a stand-in request, so that our requests need not be httpx2's.
    """

    def __init__(self, auth: httpx2.Auth | None, server: str) -> None:
        self._auth = auth
        self._server = server
        self._header: str | None = None
        self._lock = asyncio.Lock()

    async def header(self) -> str | None:
        if self._auth is not None and self._header is None:
            async with self._lock:
                if self._header is None:
                    self._header = await self._ask(after_refusal=False)
        return self._header

    async def renewed(self, refused: str | None) -> str | None:
        """A header to try again with, after ``refused`` got a 401; None when there is no other."""
        if self._auth is None:
            return None
        async with self._lock:
            if self._header != refused:  # another request renewed it meanwhile
                return self._header
            fresh = await self._ask(after_refusal=True)
            if fresh is None or fresh == refused:
                return None
            self._header = fresh
            return fresh

    async def _ask(self, *, after_refusal: bool) -> str | None:
        assert self._auth is not None
        flow = self._auth.async_auth_flow(httpx2.Request("GET", self._server))
        try:
            request = await anext(flow)
            if after_refusal:
                request = await flow.asend(httpx2.Response(401, request=request))
        except StopAsyncIteration:  # a flow that does not try again after a 401
            return None
        finally:
            await flow.aclose()
        return request.headers.get("Authorization")


class Connection:
    """Keep-alive connections to the API server a kubeconfig names, opened on first use (in the event
    loop that uses them)."""

    def __init__(
        self,
        config: SingleConfig,
        *,
        timeout: float,
        user_agent: str,
        on_answer: AnswerCounter | None = None,
    ) -> None:
        self.config = config
        self._server = config.cluster.server.rstrip("/")
        user = config.user or User()  # a context without a user: no credentials, no client certificate
        self._tls = client_adapter.verify_cluster(config.cluster, user, config.abs_file, trust_env=False)
        self._credentials = _Credentials(client_adapter.user_auth(user), self._server)
        self.timeout = timeout
        """Seconds to wait for a connection, and then for each piece of an answer."""
        self._timeout = aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=timeout)
        self._headers = {"User-Agent": user_agent}
        self._on_answer = on_answer
        self._session: aiohttp.ClientSession | None = None

    def _opened(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._tls, limit=CONNECTIONS),
                timeout=self._timeout,
                headers=self._headers,
                trust_env=False,  # no proxy from the environment: the kubeconfig names the server
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Answer:
        """One request, its whole answer read. ``timeout``: for the whole exchange, instead of the
        connection's connect and read time-outs."""
        limit = aiohttp.ClientTimeout(total=timeout) if timeout is not None else None
        async with self._exchange(method, path, params, body, headers, limit) as response:
            return Answer(response.status, await response.read())

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str], read_timeout: float
    ) -> AsyncIterator[Streamed]:
        """A GET whose answer is read as it comes; ``read_timeout`` is the longest wait between two
        pieces of it."""
        limit = aiohttp.ClientTimeout(total=None, connect=self.timeout, sock_read=read_timeout)
        async with self._exchange("GET", path, params, None, None, limit) as response:
            yield Streamed(response)

    @contextlib.asynccontextmanager
    async def _exchange(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        body: bytes | None,
        headers: Mapping[str, str] | None,
        timeout: aiohttp.ClientTimeout | None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """Send, with the credentials' header and once more with a renewed one after a 401; the answer
        is counted and released when the caller is done with it."""
        session = self._opened()
        sent = dict(headers or {})
        authorization = await self._credentials.header()
        try:
            for tries_left in (1, 0):  # once more after a 401, never more: a plugin may mint tokens forever
                if authorization is not None:
                    sent["Authorization"] = authorization
                response = await session.request(
                    method,
                    self._server + path,
                    params=params,
                    data=body,
                    headers=sent,
                    timeout=timeout if timeout is not None else self._timeout,
                )
                if response.status != 401 or authorization is None or not tries_left:
                    break
                renewed = await self._credentials.renewed(authorization)
                if renewed is None:
                    break
                response.release()
                authorization = renewed
            if self._on_answer is not None:
                self._on_answer(method, path, params or {}, response.status)
            async with response:
                yield response
        except (aiohttp.ClientError, TimeoutError) as error:
            raise NoAnswer(error) from error
