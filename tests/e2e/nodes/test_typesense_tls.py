"""Typesense over TLS on real nodes, one 3-node cluster of the real typesense-server through its life:
turned to HTTPS by a roll under writes, checked by curl and by the operator on every node, a renewed
certificate served with no restart under writes, broken certificates refused with their reason while
the nodes keep serving the good one, two of three nodes killed and recovered over HTTPS, and back to
plain HTTP by a roll; nothing acknowledged lost. The nginx proxy in front of it follows, verifying the
nodes while they serve HTTPS. One cluster for all of it: each one costs CI minutes."""

from __future__ import annotations

import asyncio
import datetime
import functools
import json
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from operator_core.kube import Kube
from operator_testkit.assertions import condition
from operator_testkit.drivers.typesense import (
    TypesenseCluster,
    Writer,
    certificate_names,
    certificate_secret,
    lose_two_of_three,
    roll_under_writes,
    rolled_by_the_operator,
)
from operator_testkit.fixtures import wait_until
from operator_testkit.nodes.faults import NodeFaults
from operator_testkit.operators import OperatorProcess
from operator_testkit.pki import CertificateAuthority, ServerCertificate

API = "ts.opentelekomcloud.com/v1alpha1"
REFRESH_SECONDS = 5
TLS = {"certificateSecret": {"name": "cluster-1-certificate"}, "refreshIntervalSeconds": REFRESH_SECONDS}
INGRESS = {"host": "search.example.com", "ingressClassName": "nginx"}
"""The nginx proxy in front of the nodes: plain HTTP to them, then HTTPS verified with their CA."""
SERVED_WITHIN_SECONDS = 60.0
"""A renewed certificate reaches every node within the kubelet's update of the files (hurried by the
operator's annotation: seconds) and typesense-server's refresh interval (5 s here)."""


def names(namespace: str) -> list[str]:
    return certificate_names("cluster-1", namespace)


def server_name(pod: str, namespace: str) -> str:
    return f"{pod}.cluster-1-sts-svc.{namespace}.svc"


async def curl(*arguments: str) -> tuple[int, str, str]:
    """curl's exit code, output and errors (at most 5 s)."""
    process = await asyncio.create_subprocess_exec(
        "curl",
        "-sS",
        "--max-time",
        "5",
        *arguments,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def served_serial(ip: str, name: str, ca: bytes) -> str | None:
    """The serial of the certificate the node at ``ip`` serves, verified for ``name`` with ``ca``."""
    context = ssl.create_default_context(cadata=ca.decode())
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(ip, 8108, ssl=context, server_hostname=name), timeout=3
        )
    except (OSError, TimeoutError, ssl.SSLError):
        return None
    served = writer.get_extra_info("ssl_object").getpeercert()
    writer.transport.abort()  # no TLS goodbye to wait for: the socket is closed at once
    return str(served["serialNumber"]).lower()


async def serials(cluster: TypesenseCluster, namespace: str, ca: bytes) -> dict[str, str | None]:
    ips = await cluster.pod_ips()
    found = await asyncio.gather(
        *(served_serial(ip, server_name(pod, namespace), ca) for pod, ip in ips.items())
    )
    return dict(zip(ips, found, strict=True))


async def pods_and_restarts(kube: Kube, namespace: str) -> dict[str, tuple[str, int]]:
    pods = await kube.list("v1", "Pod", namespace, labels={"app.kubernetes.io/instance": "cluster-1"})
    return {
        p["metadata"]["name"]: (
            p["metadata"]["uid"],
            sum(s.get("restartCount", 0) for s in (p.get("status") or {}).get("containerStatuses") or []),
        )
        for p in pods
    }


async def certificate_condition(
    cluster: TypesenseCluster, reason: str, timeout: float = 30
) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def said() -> bool:
        found.clear()
        found.update(condition(await cluster.get(), "CertificateReady") or {})
        return found.get("reason") == reason

    await wait_until(said, timeout=timeout, interval=0.5, what=f"CertificateReady {reason} (now {found})")
    return found


async def a_new_cluster_waits_for_its_certificate(kube: Kube, namespace: str) -> None:
    """No pod of a new cluster starts in plain HTTP, or at all, before its certificate is there."""
    waiting = TypesenseCluster(kube, namespace, name="waiting")
    await waiting.create(replicas=3, tls={"certificateSecret": {"name": "not-made-yet"}})
    said = await certificate_condition(waiting, "SecretNotFound")
    assert "no node is given a certificate" in said["message"], said
    assert await kube.get("apps/v1", "StatefulSet", "waiting-sts", namespace) is None
    await kube.delete(API, "TypesenseCluster", "waiting", namespace)
    await waiting.aclose()


async def every_node_serves_https_verified_and_refuses_plain_http(
    cluster: TypesenseCluster, namespace: str, authority: CertificateAuthority, tmp_path: Path
) -> None:
    """curl, as a user would: verified over HTTPS for each node's name; plain HTTP gets no answer."""
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(authority.pem)
    for pod, ip in (await cluster.pod_ips()).items():
        name = server_name(pod, namespace)
        code, out, err = await curl(
            "--cacert", str(ca_file), "--resolve", f"{name}:8108:{ip}", f"https://{name}:8108/health"
        )
        assert code == 0, err
        assert "ok" in json.loads(out), out  # a node may still catch up: the answer is what counts
        code, out, _ = await curl(f"http://{ip}:8108/health")
        assert code != 0, f"{pod} answered plain HTTP: {out}"


async def a_renewal_is_served_without_a_restart(
    cluster: TypesenseCluster, kube: Kube, namespace: str, authority: CertificateAuthority
) -> ServerCertificate:
    """A renewed certificate in the Secret, under writes: served by every node, no pod restarted."""
    before = await pods_and_restarts(kube, namespace)
    renewed = authority.issue(*names(namespace))
    await kube.apply(certificate_secret("cluster-1-certificate", namespace, renewed, authority.pem))

    async def renewed_everywhere() -> bool:
        return set((await serials(cluster, namespace, authority.pem)).values()) == {renewed.serial}

    await wait_until(
        renewed_everywhere,
        timeout=SERVED_WITHIN_SECONDS,
        interval=1,
        what="the renewed certificate on every node",
    )

    async def seen_by_the_operator() -> bool:
        status = (await cluster.get())["status"]
        return status["tls"]["serial"] == renewed.serial and all(
            node.get("certificateSerial") == renewed.serial for node in status["nodes"]
        )

    await wait_until(seen_by_the_operator, timeout=30, interval=1, what="status.tls and status.nodes")
    assert await pods_and_restarts(kube, namespace) == before, "no pod restarted or replaced"
    return renewed


async def broken_certificates_are_refused_and_nothing_rolls(
    cluster: TypesenseCluster,
    kube: Kube,
    namespace: str,
    authority: CertificateAuthority,
    served: ServerCertificate,
) -> None:
    """Each refused with its reason; the nodes keep serving ``served``; no pod replaced or restarted."""
    before = await pods_and_restarts(kube, namespace)
    sts = await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace)
    assert sts is not None
    revision = sts["status"]["updateRevision"]
    stranger = CertificateAuthority.create("someone-else")
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    broken = {
        "KeyMismatch": ServerCertificate(served.cert, authority.issue(*names(namespace)).key, served.serial),
        "CertificateExpired": authority.issue(
            *names(namespace), not_before=past, not_after=past + datetime.timedelta(days=1)
        ),
        "CertificateUntrusted": stranger.issue(*names(namespace)),
        "NamesNotCovered": authority.issue("somewhere.else"),
    }
    for reason, certificate in broken.items():
        await kube.apply(certificate_secret("cluster-1-certificate", namespace, certificate, authority.pem))
        said = await certificate_condition(cluster, reason)
        assert said["status"] == "False", said
        assert "keep serving" in said["message"], said
    await kube.apply(certificate_secret("cluster-1-opaque", namespace, served, authority.pem, "Opaque"))
    await cluster.create(
        replicas=3, tls={**TLS, "certificateSecret": {"name": "cluster-1-opaque"}}, ingress=INGRESS
    )
    await certificate_condition(cluster, "WrongSecretType")
    await asyncio.sleep(REFRESH_SECONDS * 2)
    assert set((await serials(cluster, namespace, authority.pem)).values()) == {served.serial}
    sts = await kube.get("apps/v1", "StatefulSet", "cluster-1-sts", namespace)
    assert sts is not None
    assert sts["status"]["updateRevision"] == revision, "nothing is rolled onto a refused certificate"
    assert await pods_and_restarts(kube, namespace) == before, "no pod restarted or replaced"
    refused = [
        e for e in await cluster.events("CertificateRefused") if e["involvedObject"]["name"] == "cluster-1"
    ]
    assert refused, "a Warning Event says so"


async def the_proxy_reaches_the_nodes(cluster: TypesenseCluster, scheme: str) -> None:
    """Debian's nginx in the proxy pod gets a search through to the nodes, in ``scheme``: with TLS,
    verifying them with the CA of the ConfigMap <cluster>-tls-ca for the client Service's name."""
    config_map = await cluster.kube.get(
        "v1", "ConfigMap", "cluster-1-reverse-proxy-config", cluster.namespace
    )
    assert config_map is not None
    config = config_map["data"]["nginx.conf"]
    assert f"proxy_pass {scheme}://cluster-1-svc.{cluster.namespace}.svc:8108;" in config
    assert ("proxy_ssl_verify on;" in config) == (scheme == "https")

    async def answers() -> bool:
        ip = await cluster.proxy_ip()
        if ip is None:
            return False
        async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
            try:
                answer = await http.get(f"http://{ip}/collections", headers=cluster.headers)
            except httpx.HTTPError:
                return False
        return answer.status_code == 200

    await wait_until(answers, timeout=90, interval=1, what=f"the proxy to reach the nodes in {scheme}")


@pytest.mark.timeout(1200)
async def test_a_cluster_through_its_life_over_https_loses_nothing_and_restarts_nothing_for_a_renewal(
    kube: Kube, namespace: str, typesense_operator: OperatorProcess, faults: NodeFaults, tmp_path: Path
) -> None:
    await a_new_cluster_waits_for_its_certificate(kube, namespace)
    authority = CertificateAuthority.create("typesense-test-ca")
    first = authority.issue(*names(namespace))
    await kube.apply(certificate_secret("cluster-1-certificate", namespace, first, authority.pem))
    cluster = TypesenseCluster(kube, namespace)
    await cluster.use_tls(authority.pem)
    try:
        await cluster.create(replicas=3, ingress=INGRESS)
        await cluster.wait_ready()
        await cluster.create_collection()
        await the_proxy_reaches_the_nodes(cluster, "http")

        async def turn_on() -> None:
            await cluster.create(replicas=3, tls=TLS, ingress=INGRESS)

        on = await roll_under_writes(cluster, turn_on, timeout=300)
        await rolled_by_the_operator(cluster, on.revision)
        print(f"TLS on: {on.seconds:.1f} s, longest write gap {on.longest_write_gap:.2f} s")
        assert on.fewest_caught_up >= 2, on.writes
        await cluster.assert_nothing_lost(on.acknowledged)
        obj = await cluster.get()
        assert condition(obj, "CertificateReady")["reason"] == "Served", condition(obj, "CertificateReady")
        assert obj["status"]["tls"]["serial"] == first.serial
        assert set((await serials(cluster, namespace, authority.pem)).values()) == {first.serial}
        await every_node_serves_https_verified_and_refuses_plain_http(cluster, namespace, authority, tmp_path)
        await the_proxy_reaches_the_nodes(cluster, "https")

        writer = Writer(cluster)
        writer.start("certificates")
        await writer.warmed_up()
        renewed = await a_renewal_is_served_without_a_restart(cluster, kube, namespace, authority)
        await broken_certificates_are_refused_and_nothing_rolls(cluster, kube, namespace, authority, renewed)
        await writer.stop()
        assert writer.failed(0) == 0, writer.story(0)
        await cluster.assert_nothing_lost(writer.acknowledged)

        # With the certificate refused still, the nodes' copy is what recovery speaks HTTPS with.
        _lost, recovery = await lose_two_of_three(cluster, functools.partial(faults.down, namespace))
        print(f"two of three killed over HTTPS: Ready {recovery.seconds_to_ready:.1f} s after the fault")
        assert recovery.seconds_to_first_write is not None, (
            f"the survivor must take writes: {recovery.writes}"
        )
        assert len(await cluster.events("QuorumMemberFenced")) == 2
        await cluster.assert_nothing_lost(recovery.acknowledged)

        async def turn_off() -> None:
            await cluster.create(replicas=3, ingress=INGRESS)  # the same field manager: spec.tls goes

        off = await roll_under_writes(cluster, turn_off, timeout=300)
        await rolled_by_the_operator(cluster, off.revision)
        print(f"TLS off: {off.seconds:.1f} s, longest write gap {off.longest_write_gap:.2f} s")
        await cluster.assert_nothing_lost(off.acknowledged)
        for pod, ip in (await cluster.pod_ips()).items():
            code, _out, err = await curl(f"http://{ip}:8108/health")
            assert code == 0, f"{pod} in plain HTTP again: {err}"
        assert condition(await cluster.get(), "CertificateReady")["reason"] == "NotRequested"
        await the_proxy_reaches_the_nodes(cluster, "http")
        log = typesense_operator.log()
        assert "Traceback" not in log
        assert first.key.decode() not in log
        assert renewed.key.decode() not in log
    finally:
        await cluster.aclose()
