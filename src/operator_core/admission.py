"""Validating admission webhooks served by an operator itself, over HTTPS, and their registration by URL.

An operator describes each webhook once (:class:`ValidatingWebhook`): the resource and operations the
API server asks it about, and the ``check`` that answers an :class:`AdmissionRequest` with a
:class:`Verdict`. :class:`AdmissionServer` serves them all on one port (aiohttp, the operators' client
library already), with the certificate and key files it is given (a cert-manager Certificate's Secret,
mounted; a test's own CA), loaded again when they change. :func:`webhook_configuration` is the
ValidatingWebhookConfiguration that points the API server at them by URL, for an operator that
registers itself.

What the server promises its checks and the API server:

- a check that raises, or takes longer than :data:`DECIDE_WITHIN_SECONDS`, is a denial whose message
  says so and asks to try again: an answer the user can read, before the API server's own timeout
  turns it into a bare "context deadline exceeded";
- messages pass through :func:`operator_core.secrets.scrub`, so a registered secret never reaches a
  user or a log through them.

Why a server of our own, in the core: docs/decisions.md, decision 16.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aiohttp import web

from operator_core.secrets import scrub

__all__ = [
    "DECIDE_WITHIN_SECONDS",
    "AdmissionRequest",
    "AdmissionServer",
    "Check",
    "ValidatingWebhook",
    "Verdict",
    "review_response",
    "serving_context",
    "webhook_configuration",
]

DECIDE_WITHIN_SECONDS = 8.0
"""How long a check may take before the server answers a denial itself: under
:data:`TIMEOUT_SECONDS`, so that the user reads our reason and not the API server's timeout."""
TIMEOUT_SECONDS = 10
"""How long the API server waits for an answer (its ``timeoutSeconds``; Kubernetes' default)."""
CERTIFICATE_RECHECK_SECONDS = 30.0
"""How often the server looks whether its certificate files changed (cert-manager renews them)."""
_MAX_REVIEW_BYTES = 16 * 1024 * 1024
"""A review carries the object and its old version, each up to the API server's 3 MiB limit (and
JSON may grow them): aiohttp's default of 1 MiB would refuse large objects' reviews."""
_REVIEW_API_VERSION = "admission.k8s.io/v1"

_log = logging.getLogger(__name__)

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
FailurePolicy = Literal["Fail", "Ignore"]


@dataclass(frozen=True)
class AdmissionRequest:
    """What the API server asks about: one operation on one object (the part of an AdmissionReview a
    check needs)."""

    uid: str
    operation: str
    namespace: str
    name: str
    new_object: Mapping[str, Any] | None
    """The object as it would be written; None for DELETE."""
    old_object: Mapping[str, Any] | None
    """The object as it is now; None for CREATE."""
    dry_run: bool = False

    @property
    def subject(self) -> Mapping[str, Any]:
        """The object the request is about: the new one, or the one being deleted."""
        return self.new_object if self.new_object is not None else (self.old_object or {})

    @classmethod
    def from_review(cls, review: object) -> AdmissionRequest:
        """Read an AdmissionReview's request; :class:`ValueError` when it is not one."""
        request = review.get("request") if isinstance(review, Mapping) else None
        if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
            raise ValueError("not an AdmissionReview with a request and its uid")
        new, old = request.get("object"), request.get("oldObject")
        return cls(
            uid=request["uid"],
            operation=str(request.get("operation") or ""),
            namespace=str(request.get("namespace") or ""),
            name=str(request.get("name") or ""),
            new_object=new if isinstance(new, Mapping) else None,
            old_object=old if isinstance(old, Mapping) else None,
            dry_run=bool(request.get("dryRun")),
        )


@dataclass(frozen=True)
class Verdict:
    """A check's answer: allowed, or denied with a message for the user; either with warnings, which
    the API server passes on to the client (kubectl prints each as "Warning: ...")."""

    allowed: bool
    message: str = ""
    warnings: tuple[str, ...] = ()

    @classmethod
    def allow(cls, *warnings: str) -> Verdict:
        return cls(True, warnings=warnings)

    @classmethod
    def deny(cls, message: str) -> Verdict:
        return cls(False, message)


Check = Callable[[AdmissionRequest], Awaitable[Verdict]]


@dataclass(frozen=True)
class ValidatingWebhook:
    """One webhook: which requests the API server sends it, and the check that answers them."""

    name: str
    """Its name in the configuration, fully qualified (``clusterstacks.clusterstack.x-k8s.io``): the
    API server quotes it in every denial."""
    group: str
    version: str
    resource: str
    """The plural, as in the resource's URL (``clusterstacks``); its subresources (status) are not sent."""
    operations: tuple[Operation, ...]
    check: Check

    @property
    def path(self) -> str:
        """Where the server answers it."""
        return f"/validate/{self.name}"


def review_response(uid: str, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview that answers request ``uid``."""
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": scrub(verdict.message)}
    if verdict.warnings:
        response["warnings"] = [scrub(warning) for warning in verdict.warnings]
    return {"apiVersion": _REVIEW_API_VERSION, "kind": "AdmissionReview", "response": response}


def serving_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A TLS server context with the certificate (its chain after it) and key of these files.

    Raises :class:`OSError` when a file cannot be read and :class:`ssl.SSLError` when they do not
    hold a certificate and its key.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def _modified(*paths: Path) -> tuple[float, ...]:
    # stat follows symlinks: a mounted Secret is renewed by swapping the link its files point through.
    return tuple(os.stat(path).st_mtime for path in paths)


class AdmissionServer:
    """The webhooks, served over HTTPS on one address until :meth:`stop`."""

    def __init__(
        self,
        webhooks: Sequence[ValidatingWebhook],
        *,
        cert_file: Path,
        key_file: Path,
        host: str,
        port: int,
        decide_within: float = DECIDE_WITHIN_SECONDS,
    ) -> None:
        self.webhooks = tuple(webhooks)
        self._cert_file, self._key_file = cert_file, key_file
        self._host, self._port = host, port
        self._decide_within = decide_within
        self._runner: web.AppRunner | None = None
        self._renewals: asyncio.Task[None] | None = None
        self.port = port
        """The port it listens on (the one chosen by the system when asked for port 0)."""

    async def start(self) -> None:
        """Listen; raises :class:`OSError` when the address is taken, and the errors of
        :func:`serving_context` when the certificate files are not usable."""
        context = serving_context(self._cert_file, self._key_file)
        application = web.Application(client_max_size=_MAX_REVIEW_BYTES)
        for webhook in self.webhooks:
            application.router.add_post(webhook.path, self._answerer(webhook))
        runner = web.AppRunner(application, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._port, ssl_context=context)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        if runner.addresses:
            self.port = int(runner.addresses[0][1])
        self._renewals = asyncio.create_task(self._follow_renewals(context), name="webhook certificate")
        _log.info("admission webhooks served on %s:%d", self._host, self.port)

    async def stop(self) -> None:
        if self._renewals is not None:
            self._renewals.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewals
            self._renewals = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _follow_renewals(self, context: ssl.SSLContext) -> None:
        """Load the files again when they change: new connections get the renewed certificate."""
        files = (self._cert_file, self._key_file)
        seen = _modified(*files)
        while True:
            await asyncio.sleep(CERTIFICATE_RECHECK_SECONDS)
            try:
                now = _modified(*files)
                if now != seen:
                    context.load_cert_chain(*files)
                    seen = now
                    _log.info("admission webhook certificate loaded again from %s", self._cert_file)
            except (OSError, ssl.SSLError) as error:
                # Half-written files during a renewal: keep serving the old certificate, look again.
                _log.warning("admission webhook certificate not reloaded: %s", error)

    def _answerer(self, webhook: ValidatingWebhook) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def answer(http_request: web.Request) -> web.Response:
            try:
                request = AdmissionRequest.from_review(await http_request.json())
            except ValueError as error:  # JSONDecodeError is one
                return web.json_response({"error": str(error)}, status=400)
            verdict = await self._decide(webhook, request)
            if not verdict.allowed:
                _log.info(
                    "%s denied %s of %s/%s: %s",
                    webhook.name,
                    request.operation,
                    request.namespace,
                    request.name,
                    scrub(verdict.message),
                )
            return web.json_response(review_response(request.uid, verdict))

        return answer

    async def _decide(self, webhook: ValidatingWebhook, request: AdmissionRequest) -> Verdict:
        try:
            return await asyncio.wait_for(webhook.check(request), self._decide_within)
        except TimeoutError:
            return Verdict.deny(
                f"could not decide within {self._decide_within:g} s whether to allow this "
                f"{request.operation.lower()}: try again"
            )
        except Exception as error:
            _log.warning("%s failed on %s/%s: %s", webhook.name, request.namespace, request.name, error)
            return Verdict.deny(
                f"could not decide whether to allow this {request.operation.lower()} "
                f"({type(error).__name__}: {error}): try again"
            )


def webhook_configuration(
    name: str,
    webhooks: Sequence[ValidatingWebhook],
    *,
    base_url: str,
    ca_bundle: bytes,
    failure_policy: FailurePolicy,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration that sends the webhooks' requests to ``base_url`` + each path,
    trusting ``ca_bundle`` (PEM) for the server's certificate."""
    root = base_url.rstrip("/")
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "webhooks": [
            {
                "name": webhook.name,
                "clientConfig": {
                    "url": f"{root}{webhook.path}",
                    "caBundle": base64.b64encode(ca_bundle).decode(),
                },
                "rules": [
                    {
                        "apiGroups": [webhook.group],
                        "apiVersions": [webhook.version],
                        "resources": [webhook.resource],
                        "operations": list(webhook.operations),
                        "scope": "Namespaced",
                    }
                ],
                "failurePolicy": failure_policy,
                # Equivalent: a request through another version of the resource is sent too.
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": TIMEOUT_SECONDS,
            }
            for webhook in webhooks
        ],
    }
