"""Settings of the Cluster Stack operator, and the release source they select.

Each setting is overridable by an ``OPERATOR_SUITE_*`` variable, like every operator's. Upstream's
own variables are read too, so that a deployment written for the Go operator works unchanged:
``GIT_PROVIDER`` (``github``), ``GIT_ORG_NAME``, ``GIT_REPOSITORY_NAME``, ``GIT_ACCESS_TOKEN``;
``OCI_REGISTRY``, ``OCI_REPOSITORY``, ``OCI_USERNAME``, ``OCI_PASSWORD``, ``OCI_ACCESS_TOKEN``.
Ours win where both are set. Credentials are read only from the environment (a Secret mounted as
variables), never kept in the settings object, so no log or error can print them.

A setting that cannot work (no repository named for the source chosen, an unknown provider, webhooks
without a usable certificate) is a :class:`~operator_core.errors.SettingsError` naming the variable,
before the operator connects.
"""

from __future__ import annotations

import dataclasses
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from clusterstack_operator.sources.base import ReleaseSource
from clusterstack_operator.sources.github import GitHubReleases
from clusterstack_operator.sources.local import LocalDirectory
from clusterstack_operator.sources.oci import OciRegistry, OciSettings
from operator_core.admission import serving_context
from operator_core.errors import SettingsError
from operator_core.settings import from_env

__all__ = [
    "ClusterStackSettings",
    "WebhookFiles",
    "check_release_source",
    "release_source",
    "settings_from_environment",
    "webhook_files",
]


@dataclass(frozen=True)
class ClusterStackSettings:
    """Where releases come from, where they are kept, and how they are rendered."""

    release_source: Literal["github", "oci", "local"] = "github"
    """github (a repository's releases), oci (one registry repository, a tag per release) or local (a
    directory of releases, for providers testing their own stacks)."""
    release_dir: Path = Path(os.environ.get("TMPDIR") or "/tmp") / "cluster-stack-operator" / "releases"  # noqa: S108
    """Where downloaded releases are kept, one directory each (and helm's cache, in ``helm/``). A cache:
    under the temporary directory by default, never the home directory, which a pod's user may not
    have. The chart mounts a volume for it (``releaseStorage``: an emptyDir, or a claim of the user's)
    and names it here."""
    local_releases: Path = Path("/releases")
    """With the local source: the directory holding one sub-directory per release tag."""
    github_organisation: str = ""
    """The GitHub organisation of the release repository (upstream: GIT_ORG_NAME)."""
    github_repository: str = ""
    """The repository whose releases are the stacks (upstream: GIT_REPOSITORY_NAME)."""
    github_api_url: str = ""
    """GitHub's API base URL; empty for api.github.com (GitHub Enterprise, or a test's fake)."""
    oci_repository: str = ""
    """host[:port]/path of the repository that holds every release (upstream: OCI_REPOSITORY)."""
    oci_plain_http: bool = False
    """Speak plain HTTP to the registry (a local registry); HTTPS otherwise."""
    oci_ca_bundle: str = ""
    """A CA bundle to trust for the registry's certificate, besides the system's."""
    helm: str = "helm"
    """The helm binary (a path, or a name on PATH)."""
    poll_seconds: float = 300.0
    """How often a ClusterStack with autoSubscribe looks for new releases."""
    addon_check_seconds: float = 60.0
    """How often a ClusterAddon looks at its objects in the workload cluster, and restores one that was
    deleted or changed there (a look reads them from the workload cluster's API server, not ours)."""
    webhook: bool = False
    """Serve the admission webhooks (docs/clusterstack.md, "Admission webhooks"): a ClusterStack or
    ClusterStackRelease a Cluster uses cannot be deleted, a ClusterStack's providerRef must name a
    template kind the API server serves, a ClusterAddon stays with its Cluster. Off by default."""
    webhook_host: str = "0.0.0.0"  # noqa: S104 (in a pod, the API server reaches it on the pod's address)
    """The address the webhooks listen on."""
    webhook_port: int = 9443
    """The port the webhooks listen on (HTTPS only)."""
    webhook_cert_dir: str = ""
    """A directory holding tls.crt and tls.key, and ca.crt to register by URL: a cert-manager
    Certificate's Secret, mounted. Read again when its files change."""
    webhook_url: str = ""
    """The base URL (https://host:port) by which the API server calls the webhooks. Set, the operator
    registers its ValidatingWebhookConfiguration at start, trusting ca.crt, and removes it when it
    stops; empty, a manifest registers them (with cert-manager's CA injection, say)."""
    webhook_failure_policy: Literal["Fail", "Ignore"] = "Fail"
    """What the API server does when the webhooks do not answer: Fail refuses the request (nothing a
    webhook guards gets past it while the operator is down), Ignore lets it through."""


def settings_from_environment(environ: Mapping[str, str] | None = None) -> ClusterStackSettings:
    """Our OPERATOR_SUITE_* variables, with upstream's variables where ours are not set."""
    source = os.environ if environ is None else environ
    settings = from_env(ClusterStackSettings, source)
    ours = {name for name in source if name.startswith("OPERATOR_SUITE_")}
    upstream: dict[str, object] = {}
    provider = source.get("GIT_PROVIDER")
    if provider is not None and provider != "github":
        raise SettingsError(f"GIT_PROVIDER={provider!r} is not a valid value: allowed values: github")
    if "OPERATOR_SUITE_RELEASE_SOURCE" not in ours:
        if provider:
            upstream["release_source"] = "github"
        elif source.get("OCI_REPOSITORY"):
            upstream["release_source"] = "oci"
    for variable, field in (
        ("GIT_ORG_NAME", "github_organisation"),
        ("GIT_REPOSITORY_NAME", "github_repository"),
        ("OCI_REPOSITORY", "oci_repository"),
    ):
        if source.get(variable) and f"OPERATOR_SUITE_{field.upper()}" not in ours:
            upstream[field] = source[variable]
    settings = dataclasses.replace(settings, **upstream)  # type: ignore[arg-type]
    if settings.webhook:
        webhook_files(settings)
    return settings


@dataclass(frozen=True)
class WebhookFiles:
    """The webhooks' certificate files, checked."""

    certificate: Path
    key: Path
    ca: Path | None
    """The CA the API server is told to trust when the operator registers the webhooks; else None."""


def webhook_files(settings: ClusterStackSettings) -> WebhookFiles:
    """The files the webhooks serve with, once checked: a :class:`SettingsError` names the variable
    that cannot work (no directory, files that are not a certificate and its key, a URL the API
    server could not call over TLS)."""
    variable = "OPERATOR_SUITE_WEBHOOK_CERT_DIR"
    directory = Path(
        _required(
            settings.webhook_cert_dir,
            variable,
            "the webhooks are served over TLS only: name a directory with tls.crt and tls.key "
            "(a cert-manager Certificate's Secret, mounted)",
        )
    )
    certificate, key, ca = directory / "tls.crt", directory / "tls.key", directory / "ca.crt"
    for path in (certificate, key):
        if not path.is_file():
            raise SettingsError(f"{variable}={str(directory)!r} has no {path.name}")
    try:
        serving_context(certificate, key)
    except ssl.SSLError as error:  # an OSError too: caught first
        raise SettingsError(
            f"{variable}={str(directory)!r}: tls.crt and tls.key there are not a certificate and its key "
            f"({error.reason or error})"
        ) from None
    except OSError as error:  # ssl names no file: either may be the unreadable one
        raise SettingsError(
            f"{variable}={str(directory)!r}: cannot read tls.crt or tls.key: {error.strerror or error}"
        ) from None
    if not 0 < settings.webhook_port < 65536:
        raise SettingsError(f"OPERATOR_SUITE_WEBHOOK_PORT={settings.webhook_port} is not a TCP port")
    if not settings.webhook_url:
        return WebhookFiles(certificate, key, None)
    url = urlsplit(settings.webhook_url)
    if url.scheme != "https" or not url.hostname or url.query or url.fragment:
        raise SettingsError(
            f"OPERATOR_SUITE_WEBHOOK_URL={settings.webhook_url!r} is not a valid value: expected "
            "https://host:port (the API server calls webhooks over TLS only)"
        )
    if not ca.is_file():
        raise SettingsError(
            f"{variable}={str(directory)!r} has no ca.crt: registering the webhooks by URL tells the "
            "API server which CA signed tls.crt"
        )
    return WebhookFiles(certificate, key, ca)


def _required(value: str, variable: str, why: str) -> str:
    if not value:
        raise SettingsError(f"{variable} is not set: {why}")
    return value


def check_release_source(environ: Mapping[str, str] | None = None) -> None:
    """Refuse (:class:`SettingsError`) settings that select a source they do not describe, before the
    operator connects: the same checks :func:`release_source` makes, without building a client."""
    _source_parameters(settings_from_environment(environ), environ)


def release_source(settings: ClusterStackSettings, environ: Mapping[str, str] | None = None) -> ReleaseSource:
    """The source the settings select, with its credentials from the environment."""
    kind, parameters = _source_parameters(settings, environ)
    if kind == "local":
        return LocalDirectory(**parameters)
    if kind == "github":
        return GitHubReleases(**parameters)
    return OciRegistry(OciSettings(**parameters))


def _source_parameters(
    settings: ClusterStackSettings, environ: Mapping[str, str] | None
) -> tuple[str, dict[str, Any]]:
    """Which source the settings select, and what it is made with (its credentials from the environment)."""
    source = os.environ if environ is None else environ
    if settings.release_source == "local":
        return "local", {"root": settings.local_releases}
    if settings.release_source == "github":
        organisation = _required(
            settings.github_organisation,
            "OPERATOR_SUITE_GITHUB_ORGANISATION (or GIT_ORG_NAME)",
            "the GitHub source needs the organisation of the release repository",
        )
        repository = _required(
            settings.github_repository,
            "OPERATOR_SUITE_GITHUB_REPOSITORY (or GIT_REPOSITORY_NAME)",
            "the GitHub source needs the repository whose releases are the stacks",
        )
        token = source.get("OPERATOR_SUITE_GITHUB_TOKEN") or source.get("GIT_ACCESS_TOKEN") or None
        return "github", {
            "organisation": organisation,
            "repository": repository,
            "token": token,
            "base_url": settings.github_api_url or None,
        }
    repository = _required(
        settings.oci_repository,
        "OPERATOR_SUITE_OCI_REPOSITORY (or OCI_REPOSITORY)",
        "the OCI source needs host[:port]/path of the repository that holds the releases",
    )
    if "/" not in repository:
        raise SettingsError(
            f"OCI repository {repository!r} names no repository after the host: use host/path"
        )
    return "oci", {
        "repository": repository,
        "username": source.get("OPERATOR_SUITE_OCI_USERNAME") or source.get("OCI_USERNAME") or None,
        "password": source.get("OPERATOR_SUITE_OCI_PASSWORD") or source.get("OCI_PASSWORD") or None,
        "access_token": source.get("OPERATOR_SUITE_OCI_ACCESS_TOKEN")
        or source.get("OCI_ACCESS_TOKEN")
        or None,
        "plain_http": settings.oci_plain_http,
        "ca_bundle": Path(settings.oci_ca_bundle) if settings.oci_ca_bundle else None,
    }
