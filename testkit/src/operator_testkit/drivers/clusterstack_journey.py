"""The Cluster Stack operator's whole user journey, step by step: ``operator-suite-dev sandbox journey``.

It starts a management cluster on a real node (a kubelet, containerd and runc: :mod:`.nodes`) with
Cluster API's CRDs, and a workload cluster's control plane (what a Cluster object stands for) where
the node's pods reach it; publishes three releases of one stack to an OCI registry there too (v2 with
the same cluster addons as v1, v3 with new ones); installs the cluster-stack-operator with ``helm
install`` of its chart and the suite's image, as users do (its webhooks through the chart's Service
and certificate); and then walks the journey while it prints what happens and how long each step
took:

1. a ClusterStack lists v1, v2 and v3: their releases become ready and their ClusterClasses appear;
2. a Cluster on v1 (with the kubeconfig Secret Cluster API would write): its ClusterAddon appears,
   and the addons appear in the workload cluster;
3. deleting the v1 release while the Cluster uses it: the webhook refuses, and says why;
4. an addon object deleted in the workload cluster comes back;
5. the Cluster moves to v2 (same addons): nothing is applied again;
6. the Cluster moves to v3 (new addons): they are applied, and what only v1's had is removed;
7. the Cluster is deleted: its ClusterAddon goes, and the stack can let v1 and v2 go.

No Cluster API controller runs: the journey writes what they would (the Cluster, its kubeconfig
Secret, naming the workload control plane by the address the operator's pod reaches). Everything
it starts stops when it ends, fails or is interrupted (Ctrl-C); ``--pause`` keeps it all running
until Enter is pressed, to look around with kubectl.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from operator_core import errors
from operator_core.kube import Kube
from operator_testkit.assertions import events_for
from operator_testkit.binaries import find_hack_dir
from operator_testkit.charts import install_chart
from operator_testkit.clusterstack_tools import ensure_clusterstack_tools
from operator_testkit.controlplane import ControlPlane
from operator_testkit.drivers.clusterstack import (
    capi_cluster,
    kubeconfig_secret,
    publish_release,
    push_release,
)
from operator_testkit.image import image_of_sources
from operator_testkit.nodes.cluster import LocalCluster
from operator_testkit.nodes.images import NodeImage
from operator_testkit.registry import running_registry

__all__ = ["run_journey"]

API = "clusterstack.x-k8s.io/v1alpha1"
CLUSTER_API = "cluster.x-k8s.io/v1beta2"
NAMESPACE = "journey"
STACK = "docker-journey-1-30"
REPOSITORY = "journey/cluster-stacks"
ADDON = f"cluster-addon-{NAMESPACE}"
T = TypeVar("T")


class JourneyError(Exception):
    """A step did not come about in time: the journey says which, and stops everything."""


class _Narrator:
    def __init__(self) -> None:
        self.began = time.monotonic()
        self.timings: list[tuple[str, float]] = []
        self.interrupted = False
        """Ctrl-C was pressed: the journey stops at the next step, should its cancel have been lost."""

    def stop_if_interrupted(self) -> None:
        # A cancel can be swallowed by a library in the middle of a request (it happened: the journey
        # walked on to its end after a Ctrl-C); a step never starts after one.
        if self.interrupted:
            raise asyncio.CancelledError

    def say(self, message: str) -> None:
        self.stop_if_interrupted()
        print(f"[{time.monotonic() - self.began:6.1f} s] {message}", flush=True)

    def show(self, message: str) -> None:
        print(f"           {message}", flush=True)

    async def until(
        self, what: str, probe: Callable[[], Awaitable[T | None]], timeout: float = 90.0
    ) -> tuple[T, float]:
        """``probe()``'s first truthy answer and the seconds it took; JourneyError after ``timeout``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            self.stop_if_interrupted()
            found = await probe()
            if found:
                took = time.monotonic() - started
                self.timings.append((what, took))
                return found, took
            await asyncio.sleep(0.1)
        raise JourneyError(f"timed out after {timeout:.0f} s waiting for {what}")


def run_journey(directory: Path, *, pause: bool = False) -> int:
    """Walk the journey in ``directory``; 0 once every step came about, else 1 (or 130 on Ctrl-C)."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    narrator = _Narrator()
    try:
        asyncio.run(_journey(directory, narrator, pause))
    except (KeyboardInterrupt, asyncio.CancelledError):
        narrator.interrupted = True
    except (JourneyError, errors.OperatorError, OSError) as error:
        if not narrator.interrupted:
            print(f"the journey failed: {error}", file=sys.stderr)
            print(f"everything it started is stopped; its logs are in {directory}", file=sys.stderr)
            return 1
    if narrator.interrupted:
        print("\ninterrupted: everything the journey started is stopped", file=sys.stderr)
        return 130
    print("\nHow long each step took:")
    for what, took in narrator.timings:
        print(f"  {took:6.2f} s  {what}")
    return 0


def _stop_on_ctrl_c(narrator: _Narrator) -> None:
    """The first Ctrl-C cancels the journey, which stops what it started; a later one is ignored, so that
    stopping is never cut short."""
    journey = asyncio.current_task()
    assert journey is not None

    def interrupt() -> None:
        if not narrator.interrupted:
            narrator.interrupted = True
            journey.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, interrupt)


async def _journey(directory: Path, narrator: _Narrator, pause: bool) -> None:
    _stop_on_ctrl_c(narrator)
    root = find_hack_dir().parent
    narrator.say("building or reusing helm, the registry, Cluster API's CRDs and the suite's image")
    tools = await asyncio.to_thread(ensure_clusterstack_tools)
    image = await asyncio.to_thread(image_of_sources, root)
    narrator.say("starting the management cluster: a control plane and a real node")
    nodes = LocalCluster(directory / "mgmt", count=1, extra_images=[NodeImage(image.name, (image.name,))])
    await asyncio.to_thread(nodes.start)
    try:
        assert nodes.control_plane is not None
        assert nodes.plan is not None
        management, address = nodes.control_plane, str(nodes.plan.api_address)
        narrator.say(f"starting the workload cluster's control plane on {address}, where the pods reach it")
        with (
            ControlPlane(directory / "workload", bind_address=address) as workload,
            running_registry(directory / "registry", binary=tools.registry, address=address) as registry,
        ):
            for crds in (tools.capi_crds, tools.capd_crds):
                await asyncio.to_thread(management.kubectl, "apply", "--server-side", "-f", str(crds))
            await asyncio.to_thread(
                management.kubectl, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"
            )
            published = directory / "releases"
            narrator.say(
                f"publishing {STACK}-v1, -v2 (the same cluster addons) and -v3 (new ones) to {registry.host}"
            )
            for version, addon_version in (("v1", "v1"), ("v2", "v1"), ("v3", "v2")):
                tag = f"{STACK}-{version}"
                if not (published / tag).exists():
                    publish_release(published, tag, addon_version=addon_version, helm=tools.helm)
                await asyncio.to_thread(push_release, registry, published / tag, REPOSITORY)
            values = directory / "values.json"
            repository, tag = image.name.rsplit(":", 1)
            settings = {
                "OPERATOR_SUITE_RELEASE_SOURCE": "oci",
                "OPERATOR_SUITE_OCI_REPOSITORY": f"{registry.host}/{REPOSITORY}",
                "OPERATOR_SUITE_OCI_PLAIN_HTTP": "true",
                "OPERATOR_SUITE_ADDON_CHECK_SECONDS": "5",
            }
            values.write_text(json.dumps({  # JSON is YAML
                "image": {"repository": repository, "tag": tag},
                "env": [{"name": name, "value": value} for name, value in settings.items()],
            }))  # fmt: skip
            narrator.say(
                "helm install cluster-stack-operator charts/cluster-stack-operator (its webhooks too)"
            )
            await asyncio.to_thread(
                install_chart, directory / "helm", management.kubeconfig, "cso", "cluster-stack-operator",
                "cso-system", ["-f", str(values)],
            )  # fmt: skip
            async with (
                Kube.connect(management.kubeconfig) as kube,
                Kube.connect(workload.kubeconfig) as there,
            ):
                await _walk(kube, there, workload, narrator)
            if pause:
                _show_how_to_look(management, workload)
                await asyncio.to_thread(input, "Press Enter to stop everything. ")
    finally:
        await asyncio.to_thread(nodes.stop)


def _show_how_to_look(management: ControlPlane, workload: ControlPlane) -> None:
    kubectl = management.binaries.kubectl
    print("\nLook around (in another terminal):")
    print(f"  {kubectl} --kubeconfig {management.kubeconfig} get clusterstacks,cskr,clusterclasses -A")
    print(f"  {kubectl} --kubeconfig {workload.kubeconfig} get configmaps -A -l app.kubernetes.io/managed-by")


async def _walk(kube: Kube, there: Kube, workload: ControlPlane, narrator: _Narrator) -> None:
    await kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

    async def addon() -> dict[str, Any] | None:
        return await kube.get(API, "ClusterAddon", ADDON, NAMESPACE)

    async def addon_ready(version: str) -> dict[str, Any] | None:
        found = await addon()
        ready = found and (found.get("status") or {}).get("ready") and found["spec"].get("version") == version
        return found if ready else None

    narrator.say("1. a ClusterStack lists v1, v2 and v3")
    await kube.apply(
        {
            "apiVersion": API,
            "kind": "ClusterStack",
            "metadata": {"name": "journey", "namespace": NAMESPACE},
            "spec": {
                "provider": "docker",
                "name": "journey",
                "kubernetesVersion": "1.30",
                "autoSubscribe": False,
                "noProvider": True,
                "versions": ["v1", "v2", "v3"],
            },
        }
    )

    async def classes() -> list[str] | None:
        names = [f"{STACK}-{v}" for v in ("v1", "v2", "v3")]
        for name in names:
            release = await kube.get(API, "ClusterStackRelease", name, NAMESPACE)
            if not (release and (release.get("status") or {}).get("ready")):
                return None
            if await kube.get(CLUSTER_API, "ClusterClass", name, NAMESPACE) is None:
                return None
        return names

    names, took = await narrator.until("releases ready, ClusterClasses applied", classes)
    narrator.show(f"ready in {took:.2f} s: ClusterClasses {', '.join(names)}")

    narrator.say(f"2. a Cluster on {STACK}-v1, and the kubeconfig Secret Cluster API would write")
    await kube.apply(capi_cluster(NAMESPACE, NAMESPACE, f"{STACK}-v1", endpoint_port=6443))
    await kube.apply(kubeconfig_secret(NAMESPACE, NAMESPACE, workload))
    applied, took = await narrator.until("Cluster created -> its addons Ready", lambda: addon_ready("v1"))
    narrator.show(f"ClusterAddon {ADDON} Ready in {took:.2f} s; in the workload cluster:")
    for resource in applied["status"]["resources"]:
        where = f"{resource['namespace']}/{resource['name']}"
        narrator.show(f"  {resource['kind']} {where}: {resource['status']}")

    narrator.say(f"3. deleting ClusterStackRelease {STACK}-v1 while the Cluster uses it")
    try:
        await kube.delete(API, "ClusterStackRelease", f"{STACK}-v1", NAMESPACE)
        raise JourneyError("the release was deleted although a Cluster uses it: the webhook did not refuse")
    except errors.Forbidden as refused:
        narrator.show(f"refused: {refused}")

    narrator.say("4. ConfigMap kube-system/addon-info deleted in the workload cluster by hand")
    await there.delete("v1", "ConfigMap", "addon-info", "kube-system")
    _, took = await narrator.until(
        "addon object deleted -> restored", lambda: there.get("v1", "ConfigMap", "addon-info", "kube-system")
    )
    narrator.show(f"restored in {took:.2f} s (the operator looks at the workload cluster every 5 s here)")
    before = await there.get("v1", "ConfigMap", "addon-info", "kube-system")

    narrator.say(f"5. the Cluster moves to {STACK}-v2, whose cluster addons are the same (v1)")
    await kube.apply(capi_cluster(NAMESPACE, NAMESPACE, f"{STACK}-v2", endpoint_port=6443))

    async def told() -> str | None:
        notes = [e.get("message", "") for e in await events_for(kube, NAMESPACE, "ClusterAddonApplied")]
        return next((n for n in notes if "the same cluster addons" in n), None)

    note, took = await narrator.until("class change, same addons -> recorded", told)
    after = await there.get("v1", "ConfigMap", "addon-info", "kube-system")
    unchanged = _version(before) == _version(after)
    narrator.show(f"in {took:.2f} s, Event ClusterAddonApplied: {note}")
    narrator.show(f"addon-info {'untouched' if unchanged else 'WRITTEN AGAIN'} in the workload cluster")

    narrator.say(f"6. the Cluster moves to {STACK}-v3, with new cluster addons (v2)")
    await kube.apply(capi_cluster(NAMESPACE, NAMESPACE, f"{STACK}-v3", endpoint_port=6443))
    _, took = await narrator.until("class change, new addons -> applied", lambda: addon_ready("v2"))
    gone = await there.get("v1", "ConfigMap", "only-in-v1", "addon-system") is None
    narrator.show(
        f"applied in {took:.2f} s; ConfigMap addon-system/only-in-v2 is there, only-in-v1 "
        + ("removed" if gone else "STILL THERE")
    )

    narrator.say("7. the Cluster is deleted; then the stack keeps only v3")
    await kube.delete(CLUSTER_API, "Cluster", NAMESPACE, NAMESPACE)

    async def collected() -> bool:
        return await addon() is None

    _, took = await narrator.until("Cluster deleted -> ClusterAddon collected", collected)
    narrator.show(f"ClusterAddon collected in {took:.2f} s (it is owned by the Cluster)")
    await kube.patch(API, "ClusterStack", "journey", NAMESPACE, {"spec": {"versions": ["v3"]}})

    async def old_releases_gone() -> bool:
        for version in ("v1", "v2"):
            if await kube.get(API, "ClusterStackRelease", f"{STACK}-{version}", NAMESPACE) is not None:
                return False
        return True

    _, took = await narrator.until("versions [v3] -> v1 and v2 released", old_releases_gone)
    narrator.show(f"{STACK}-v1 and -v2 deleted in {took:.2f} s, with their ClusterClasses")


def _version(obj: dict[str, Any] | None) -> str | None:
    version = (obj or {}).get("metadata", {}).get("resourceVersion")
    return str(version) if version is not None else None
