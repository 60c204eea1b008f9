"""The distribution registry's two ways of asking for credentials, set up as a registry's users set them
up: an htpasswd file (Basic), and a token service (Bearer) that the registry trusts by its key.

- :func:`htpasswd_auth` writes the file (bcrypt, the only hash the registry accepts) and returns the
  config's ``auth`` section for :func:`operator_testkit.registry.running_registry`.
- :class:`TokenService` is the token service of the Docker token specification, on loopback: it takes
  Basic credentials (or none, where anonymous pulls are allowed), and issues ES256 JWTs that name the
  repository and actions granted, with a lifetime of the test's choice. The registry verifies them by
  the key in a JWKS file (its ``auth.token.jwks`` option), by ``kid``. :meth:`TokenService.auth` is the
  registry's ``auth`` section. It records each token it issues, and can issue a token the registry will
  refuse (expired beyond the registry's 60 s leeway while ``expires_in`` says otherwise), to test that
  a client buys another.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
from aiohttp import web
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from operator_testkit.controlplane import free_port

__all__ = ["IssuedToken", "TokenService", "htpasswd_auth", "token_service"]

ISSUER = "operator-suite-test-token-service"
SERVICE = "operator-suite-test-registry"
_REGISTRY_LEEWAY_SECONDS = 60  # distribution's registry/auth/token/token.go (Leeway)


def htpasswd_auth(directory: Path, users: dict[str, str]) -> dict[str, Any]:
    """The ``auth`` section of a registry that asks for one of ``users`` (name to password), Basic."""
    path = directory / "htpasswd"
    directory.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            f"{name}:{bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds=4)).decode()}\n"
            for name, pw in users.items()
        )
    )
    return {"htpasswd": {"realm": "operator-suite-test", "path": str(path)}}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass(frozen=True)
class IssuedToken:
    account: str | None
    """Who asked (None: anonymous)."""
    scope: str
    refused_by_registry: bool
    """Issued expired on purpose (:attr:`TokenService.next_token_expired`)."""


@dataclass
class TokenService:
    """A Docker token service for one registry; :func:`token_service` runs it."""

    users: dict[str, str]
    lifetime_seconds: int = 300
    anonymous_pull: bool = False
    url: str = ""
    next_token_expired: bool = False
    """Issue the next token already expired (the registry refuses it), then good ones again."""
    issued: list[IssuedToken] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Why each refused request was refused."""
    _key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    _kid: str = field(default_factory=lambda: secrets.token_hex(8))

    def auth(self, directory: Path) -> dict[str, Any]:
        """The registry's ``auth`` section: this service's realm, and its public key as a JWKS file."""
        numbers = self._key.public_key().public_numbers()
        jwk = {
            "kty": "EC",
            "crv": "P-256",
            "x": _b64(numbers.x.to_bytes(32, "big")),
            "y": _b64(numbers.y.to_bytes(32, "big")),
            "kid": self._kid,
            "use": "sig",
            "alg": "ES256",
        }
        directory.mkdir(parents=True, exist_ok=True)
        jwks = directory / "jwks.json"
        jwks.write_text(json.dumps({"keys": [jwk]}))
        return {
            "token": {
                "realm": f"{self.url}/token",
                "service": SERVICE,
                "issuer": ISSUER,
                "jwks": str(jwks),
                "signingalgorithms": ["ES256"],
            }
        }

    def _token(self, account: str | None, scopes: list[str], expired: bool) -> str:
        now = int(time.time())
        access = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            allowed = [a for a in actions.split(",") if a and (account is not None or a == "pull")]
            access.append({"type": kind, "name": name, "actions": allowed})
        expiry = now - 2 * _REGISTRY_LEEWAY_SECONDS if expired else now + self.lifetime_seconds
        claims = {
            "iss": ISSUER,
            "sub": account or "",
            "aud": SERVICE,
            "exp": expiry,
            "nbf": now - 1,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        header = {"typ": "JWT", "alg": "ES256", "kid": self._kid}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    async def _answer(self, request: web.Request) -> web.Response:
        account = None
        given = request.headers.get("Authorization", "")
        if given.startswith("Basic "):
            name, _, password = base64.b64decode(given[6:]).decode().partition(":")
            if self.users.get(name) != password:
                self.refused.append(f"wrong password for {name}")
                return web.json_response({"details": "incorrect username or password"}, status=401)
            account = name
        elif not self.anonymous_pull:
            self.refused.append("anonymous")
            return web.json_response({"details": "authentication required"}, status=401)
        if request.query.get("service") != SERVICE:
            return web.json_response({"details": "unknown service"}, status=400)
        scopes = request.query.getall("scope", [])
        expired, self.next_token_expired = self.next_token_expired, False
        token = self._token(account, scopes, expired)
        self.issued.append(IssuedToken(account, " ".join(scopes), expired))
        return web.json_response(
            {
                "token": token,
                "expires_in": self.lifetime_seconds,
                "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )


@asynccontextmanager
async def token_service(
    users: dict[str, str], *, lifetime_seconds: int = 300, anonymous_pull: bool = False
) -> AsyncIterator[TokenService]:
    """A :class:`TokenService` on a free loopback port for as long as the context lasts."""
    service = TokenService(users, lifetime_seconds=lifetime_seconds, anonymous_pull=anonymous_pull)
    app = web.Application()
    app.router.add_get("/token", service._answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    service.url = f"http://127.0.0.1:{port}"
    try:
        yield service
    finally:
        await runner.cleanup()
