"""The Cluster Stack operator's admission webhooks: the rules that need more than the object written.

CEL in the CRDs is the first line: immutable fields, formats, providerRef required unless noProvider,
a ClusterAddon's clusterRef immutable. The API server runs it before any webhook, and without the
operator. These webhooks add what CEL cannot see, because it needs other objects:

- **In use.** A ClusterStackRelease cannot be deleted while a Cluster of its namespace uses its
  ClusterClass, nor a ClusterStack while a Cluster uses the ClusterClass of any of its releases. The
  release's finalizer waits for those Clusters anyway (decision 12); the webhook says so at once, to
  the one who asked, instead of leaving a release stuck in deletion.
- **Provider template.** A ClusterStack's providerRef must name a kind that ends in Template and that
  the API server serves, when it is set or changed (an unrelated update, a finalizer removed, is never
  refused for a template kind that went away since).
- **ClusterAddon.** Its clusterRef must name a Cluster of its own namespace (CEL cannot read
  metadata.namespace), and cannot change: CEL refuses that first; this is the second line, for a CRD
  installed without its rules. Setting spec.hook (upstream's hook server's field, which nothing here
  reads) is allowed, with a warning that says so.

Each decision is a pure function ``why_..._is_refused`` over what was observed: None allows, a sentence
says why not. The checks around them read the Clusters of the namespace through the API server, not
from the watch cache: even a synced cache lags behind by the events in flight, and a delete must be
refused for the Cluster created a moment before (one LIST per delete of a stack or release, which are
rare). A read that fails denies with a message to try again (upstream lets such a delete through with
a warning, and a Cluster can lose its ClusterClass that way).

:func:`serving_webhooks` serves them (:mod:`operator_core.admission`) in every replica and, given a
URL, registers them; the chart registers them through its Service (decision 29).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from clusterstack_operator.api.v1alpha1 import CLUSTER_ADDON, CLUSTER_STACK, CLUSTER_STACK_RELEASE
from clusterstack_operator.controller.clusters import clusters_using
from clusterstack_operator.controller.settings import settings_from_environment, webhook_files
from clusterstack_operator.releases.decide import (
    StackIdentity,
    class_namespace_of,
    cluster_class_of,
    cluster_in,
)
from clusterstack_operator.releases.versions import InvalidVersion, ReleaseName
from clusterstack_operator.resources import MANAGED_BY, TEMPLATE_SUFFIX
from operator_core import errors
from operator_core.admission import (
    AdmissionRequest,
    AdmissionServer,
    ValidatingWebhook,
    Verdict,
    webhook_configuration,
)
from operator_core.children import MANAGED_BY_LABEL
from operator_core.crdgen import CustomResource
from operator_core.kube import ApiOutages, Kube
from operator_core.reconciling import connect_client

__all__ = [
    "CONFIGURATION_NAME",
    "AdmissionChecks",
    "ClusterUse",
    "cluster_stack_webhooks",
    "provider_template_to_check",
    "serving_webhooks",
    "uses_of",
    "why_cluster_ref_is_refused",
    "why_provider_ref_is_refused",
    "why_release_deletion_is_refused",
    "why_stack_deletion_is_refused",
]

CONFIGURATION_NAME = "cluster-stack-operator.clusterstack.x-k8s.io"
"""The ValidatingWebhookConfiguration the operator registers (and removes) when given a URL."""
_NAMED_AT_MOST = 10
"""Clusters named in one message; more are counted (a message is read, not scrolled)."""

_log = logging.getLogger(__name__)


# -- the decisions (pure)


@dataclass(frozen=True)
class ClusterUse:
    """A Cluster, and the ClusterClass of a cluster stack release its topology names."""

    cluster: str
    release: ReleaseName
    cluster_class: str
    deleting: bool = False
    """Being deleted: it still uses the class until it is gone (its machines are torn down from it)."""


def uses_of(clusters: Iterable[Mapping[str, Any]], namespace: str = "") -> list[ClusterUse]:
    """The Clusters whose topology names the ClusterClass of a release (by name, in either spelling);
    one outside ``namespace`` (a tenant's) as ``namespace/name``."""
    uses = []
    for cluster in clusters:
        class_name = cluster_class_of(cluster)
        if class_name is None:
            continue
        try:
            release = ReleaseName.parse(class_name)
        except InvalidVersion:
            continue  # a ClusterClass of no cluster stack
        metadata = cluster.get("metadata") or {}
        name = cluster_in(cluster, namespace) if namespace else str(metadata.get("name", ""))
        uses.append(ClusterUse(name, release, class_name, bool(metadata.get("deletionTimestamp"))))
    return sorted(uses, key=lambda use: use.cluster)


def _clusters_phrase(uses: Sequence[ClusterUse]) -> str:
    """``Cluster a`` or ``Clusters a, b (being deleted) and 3 more``."""
    names = [f"{use.cluster} (being deleted)" if use.deleting else use.cluster for use in uses]
    shown, hidden = names[:_NAMED_AT_MOST], len(names) - _NAMED_AT_MOST
    if hidden > 0:
        shown.append(f"{hidden} more")
    listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
    return f"{'Cluster' if len(uses) == 1 else 'Clusters'} {listed}"


def _uses_phrase(uses: Sequence[ClusterUse]) -> str:
    """Which Clusters use which ClusterClass: ``Cluster a uses ClusterClass x; Clusters b and c use y``."""
    by_class: dict[str, list[ClusterUse]] = {}
    for use in uses:
        by_class.setdefault(use.cluster_class, []).append(use)
    return "; ".join(
        f"{_clusters_phrase(users)} {'uses' if len(users) == 1 else 'use'} ClusterClass {class_name}"
        for class_name, users in sorted(by_class.items())
    )


_WHAT_TO_DO = "Move them to another ClusterClass or delete them, then delete the {kind} again."


def why_release_deletion_is_refused(
    release: str, namespace: str, clusters: Iterable[Mapping[str, Any]]
) -> str | None:
    """Why ClusterStackRelease ``release`` may not be deleted while these Clusters use the classes of its
    namespace (its own, and tenants')."""
    try:
        wanted = ReleaseName.parse(release)
    except InvalidVersion:
        return None  # not a release's name: no ClusterClass is its own
    users = [use for use in uses_of(clusters, namespace) if use.release == wanted]
    if not users:
        return None
    return (
        f"ClusterStackRelease {release} is still in use in namespace {namespace}: {_uses_phrase(users)}. "
        + _WHAT_TO_DO.format(kind="ClusterStackRelease")
    )


def why_stack_deletion_is_refused(
    stack: Mapping[str, Any], clusters: Iterable[Mapping[str, Any]]
) -> str | None:
    """Why ClusterStack ``stack`` may not be deleted while these Clusters use the classes of its namespace:
    one uses the ClusterClass of one of its releases (any version, any channel)."""
    spec = stack.get("spec") or {}
    metadata = stack.get("metadata") or {}
    identity = StackIdentity(
        str(spec.get("provider", "")), str(spec.get("name", "")), str(spec.get("kubernetesVersion", ""))
    )
    try:
        users = [
            use for use in uses_of(clusters, str(metadata.get("namespace", ""))) if identity.owns(use.release)
        ]
    except InvalidVersion:
        return None  # no valid kubernetesVersion (CEL refuses one): no release is the stack's
    if not users:
        return None
    return (
        f"ClusterStack {metadata.get('name')} is still in use in namespace {metadata.get('namespace')}: "
        f"{_uses_phrase(users)}, a release of this stack. " + _WHAT_TO_DO.format(kind="ClusterStack")
    )


def provider_template_to_check(
    stack: Mapping[str, Any], old: Mapping[str, Any] | None
) -> tuple[str, str] | None:
    """The (apiVersion, kind) a ClusterStack's providerRef names, when it must be checked: set on a
    create, or changed by an update. None otherwise, and with noProvider."""
    spec = stack.get("spec") or {}
    reference = spec.get("providerRef") or {}
    if spec.get("noProvider") or not reference:
        return None
    wanted = (str(reference.get("apiVersion", "")), str(reference.get("kind", "")))
    if old is not None:
        old_spec = old.get("spec") or {}
        old_reference = old_spec.get("providerRef") or {}
        was = (str(old_reference.get("apiVersion", "")), str(old_reference.get("kind", "")))
        if not old_spec.get("noProvider") and was == wanted:
            return None
    return wanted


def why_provider_ref_is_refused(api_version: str, kind: str, *, served: bool) -> str | None:
    """Why a providerRef to ``kind`` of ``api_version`` cannot work (``served``: whether the API server
    serves that kind)."""
    if not kind.endswith(TEMPLATE_SUFFIX) or kind == TEMPLATE_SUFFIX:
        return (
            f"spec.providerRef.kind {kind} does not end in {TEMPLATE_SUFFIX}: name the provider's "
            "ProviderClusterStackReleaseTemplate kind (each release's provider object is of that kind "
            f"without {TEMPLATE_SUFFIX})"
        )
    if not served:
        return (
            f"spec.providerRef names kind {kind} of {api_version}, which this API server does not serve: "
            "install the provider's CRDs first, or correct apiVersion and kind (a CRD installed in "
            "the last few seconds may not be seen yet: then try again)"
        )
    return None


def why_cluster_ref_is_refused(
    addon: Mapping[str, Any], old: Mapping[str, Any] | None, namespace: str
) -> str | None:
    """Why ClusterAddon ``addon`` (``old``: as it is now, for an update) may not be written so."""
    reference = (addon.get("spec") or {}).get("clusterRef") or {}
    name = (addon.get("metadata") or {}).get("name")
    if old is not None:
        before = (old.get("spec") or {}).get("clusterRef") or {}
        changed = sorted(key for key in {*before, *reference} if before.get(key) != reference.get(key))
        if changed:
            was = ", ".join(f"{key} {before.get(key)!r} to {reference.get(key)!r}" for key in changed)
            return (
                f"spec.clusterRef of ClusterAddon {name} cannot change (here: {was}): a ClusterAddon "
                f"belongs to Cluster {before.get('name')} for its whole life. Delete it instead: the "
                "operator makes one for every Cluster of a cluster stack"
            )
    cluster_namespace = reference.get("namespace")
    if cluster_namespace and cluster_namespace != namespace:
        return (
            f"spec.clusterRef.namespace of ClusterAddon {name} is {cluster_namespace}, but a ClusterAddon "
            f"lives beside its Cluster: name a Cluster of namespace {namespace}, or leave namespace out"
        )
    return None


def hook_warning(addon: Mapping[str, Any], old: Mapping[str, Any] | None) -> str | None:
    """What to tell whoever sets a ClusterAddon's spec.hook (or changes it): nothing reads it here."""
    hook = (addon.get("spec") or {}).get("hook")
    if not hook or hook == ((old or {}).get("spec") or {}).get("hook"):
        return None
    return (
        f"spec.hook ({hook}) is ignored: upstream's hook server sets it to start a hook's stages; this "
        "operator starts them itself from the Cluster's state and shows the running hook in status.hook"
    )


@dataclass(frozen=True)
class ClusterVerdict:
    """What the Cluster webhook says: a refusal (None: allowed) and warnings."""

    refused: str | None = None
    warnings: tuple[str, ...] = ()


def release_of_cluster(cluster: Mapping[str, Any]) -> ReleaseName | None:
    """The cluster stack release whose ClusterClass a Cluster's topology names (None: no such class)."""
    try:
        return ReleaseName.parse(cluster_class_of(cluster) or "")
    except InvalidVersion:
        return None


def judge_cluster(
    cluster: Mapping[str, Any], old: Mapping[str, Any] | None, release_kubernetes: str | None
) -> ClusterVerdict:
    """Upstream's Cluster webhook (cluster_webhook.go), for a Cluster on a cluster stack's ClusterClass:
    ``spec.topology.version`` must be the Kubernetes version its release was built for
    (``release_kubernetes``, its ClusterStackRelease's ``status.kubernetesVersion``; None when it has
    none yet, or there is no such release: then a warning, not a refusal, as upstream), and a change
    of class keeps the provider and the stack, and moves Kubernetes one minor version up at most.
    A Cluster on any other class (or none) is not this operator's to judge: upstream refuses one
    without a topology; this one lets it be."""
    release = release_of_cluster(cluster)
    if release is None:
        return ClusterVerdict()
    class_name = cluster_class_of(cluster)
    version = ((cluster.get("spec") or {}).get("topology") or {}).get("version")
    previous = release_of_cluster(old) if old is not None else None
    if previous is not None and previous != release:
        if (previous.provider, previous.name) != (release.provider, release.name):
            return ClusterVerdict(
                f"spec.topology: ClusterClass {class_name} is of cluster stack "
                f"{release.provider}-{release.name}, but this Cluster's is {previous.provider}-"
                f"{previous.name}: a Cluster stays on its provider and stack, and moves between their "
                "releases only"
            )
        step = release.kubernetes_minor - previous.kubernetes_minor
        if release.kubernetes_major != previous.kubernetes_major or step not in (0, 1):
            was = f"{previous.kubernetes_major}.{previous.kubernetes_minor}"
            return ClusterVerdict(
                f"spec.topology: ClusterClass {class_name} is for Kubernetes "
                f"{release.kubernetes_major}.{release.kubernetes_minor}, and this Cluster's is for {was}: "
                f"Kubernetes moves one minor version at a time (to {previous.kubernetes_major}."
                f"{previous.kubernetes_minor + 1} at most), as Cluster API upgrades a control plane"
            )
    if not release_kubernetes:
        return ClusterVerdict(
            warnings=(
                f"spec.topology.version is not checked: ClusterStackRelease {release.tag} does not exist or "
                "has not read its Kubernetes version yet (status.kubernetesVersion)",
            )
        )
    if version != release_kubernetes:
        return ClusterVerdict(
            f"spec.topology.version is {version}, but ClusterClass {class_name} is built for Kubernetes "
            f"{release_kubernetes} (its ClusterStackRelease's status.kubernetesVersion): set that version"
        )
    return ClusterVerdict()


# -- the checks (reads around the decisions)


class AdmissionChecks:
    """The webhooks' checks, reading through a client without a watch cache (see the module's docstring)."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube

    async def stack(self, request: AdmissionRequest) -> Verdict:
        if request.operation == "DELETE":
            clusters = await clusters_using(self._kube, request.namespace)
            refused = why_stack_deletion_is_refused(request.subject, clusters)
        else:
            wanted = provider_template_to_check(request.subject, request.old_object)
            if wanted is None:
                return Verdict.allow()
            refused = why_provider_ref_is_refused(*wanted, served=await self._kube.serves(*wanted))
        return Verdict.allow() if refused is None else Verdict.deny(refused)

    async def release(self, request: AdmissionRequest) -> Verdict:
        if request.operation != "DELETE":
            return Verdict.allow()
        clusters = await clusters_using(self._kube, request.namespace)
        refused = why_release_deletion_is_refused(request.name, request.namespace, clusters)
        return Verdict.allow() if refused is None else Verdict.deny(refused)

    async def addon(self, request: AdmissionRequest) -> Verdict:
        if request.new_object is None:
            return Verdict.allow()
        refused = why_cluster_ref_is_refused(request.new_object, request.old_object, request.namespace)
        if refused is not None:
            return Verdict.deny(refused)
        warning = hook_warning(request.new_object, request.old_object)
        return Verdict.allow(*([warning] if warning else []))

    async def cluster(self, request: AdmissionRequest) -> Verdict:
        if request.new_object is None:
            return Verdict.allow()
        release = release_of_cluster(request.new_object)
        kubernetes = None
        if release is not None:
            found = await self._kube.get_live(
                CLUSTER_STACK_RELEASE.api_version,
                CLUSTER_STACK_RELEASE.kind,
                release.tag,
                # A Cluster's own namespace when its topology names none (a create may leave it out).
                class_namespace_of(request.new_object) or request.namespace,
            )
            kubernetes = ((found or {}).get("status") or {}).get("kubernetesVersion")
        verdict = judge_cluster(request.new_object, request.old_object, kubernetes)
        if verdict.refused is not None:
            return Verdict.deny(verdict.refused)
        return Verdict.allow(*verdict.warnings)


def _webhook(resource: CustomResource, operations: tuple[Any, ...], check: Any) -> ValidatingWebhook:
    return ValidatingWebhook(
        name=resource.crd_name,
        group=resource.group,
        version=resource.version,
        resource=resource.plural,
        operations=operations,
        check=check,
    )


def cluster_stack_webhooks(kube: Kube) -> list[ValidatingWebhook]:
    """The four webhooks, each asked only about the operations it has a rule for."""
    checks = AdmissionChecks(kube)
    return [
        _webhook(CLUSTER_STACK, ("CREATE", "UPDATE", "DELETE"), checks.stack),
        _webhook(CLUSTER_STACK_RELEASE, ("DELETE",), checks.release),
        _webhook(CLUSTER_ADDON, ("CREATE", "UPDATE"), checks.addon),
        # Cluster API's current version; a request in v1beta1 comes converted (matchPolicy Equivalent).
        ValidatingWebhook(
            "clusters.clusterstack.x-k8s.io",
            "cluster.x-k8s.io",
            "v1beta2",
            "clusters",
            ("CREATE", "UPDATE"),
            checks.cluster,
        ),
    ]


# -- serving and registering


@asynccontextmanager
async def serving_webhooks(outages: ApiOutages) -> AsyncIterator[None]:
    """Serve the webhooks for as long as the block lasts, when the settings turn them on; with
    ``webhook_url``, registered for that time (replacing what a previous run left). Every replica serves
    them, leader or standby: a Service sends the API server's calls to any ready pod, and a check needs
    no leadership (it reads what is current and writes nothing)."""
    settings = settings_from_environment()
    if not settings.webhook:
        yield
        return
    files = webhook_files(settings)
    # Without the watch cache: the checks read what is current (module docstring), and the removal of
    # the registration at exit must not wait for a watch that is reconnecting. A kubeconfig that cannot
    # be read is the runner's one line (StartFailed), as for the operator's own client.
    client = connect_client(outages)
    server = AdmissionServer(
        cluster_stack_webhooks(client),
        cert_file=files.certificate,
        key_file=files.key,
        host=settings.webhook_host,
        port=settings.webhook_port,
    )
    registered = False
    try:
        try:
            await server.start()
        except OSError as error:  # the port is taken, or the address is not this machine's
            raise errors.StartFailed(
                f"the admission webhooks cannot listen on {settings.webhook_host}:{settings.webhook_port}: "
                f"{error.strerror or error}"
            ) from error
        if settings.webhook_url and files.ca is not None:
            configuration = webhook_configuration(
                CONFIGURATION_NAME,
                server.webhooks,
                base_url=settings.webhook_url,
                ca_bundle=files.ca.read_bytes(),
                failure_policy=settings.webhook_failure_policy,
                labels={MANAGED_BY_LABEL: MANAGED_BY},
            )
            registered = True
            await client.apply(configuration)
            _log.info("admission webhooks registered as %s at %s", CONFIGURATION_NAME, settings.webhook_url)
        yield
    finally:
        try:
            # The registration goes first: no request may wait for a server that is gone.
            if registered:
                try:
                    await client.delete(
                        "admissionregistration.k8s.io/v1",
                        "ValidatingWebhookConfiguration",
                        CONFIGURATION_NAME,
                    )
                except errors.KubeError as error:
                    _log.warning("admission webhooks stay registered as %s: %s", CONFIGURATION_NAME, error)
        finally:
            await server.stop()
            await client.close()
