"""The status view, pure: the cluster object, its pods and its Events in, one JSON-ready document out
(:func:`status_document`), and that document as text for a terminal (:func:`render`).

The document's shape is stable (``kind: TypesenseClusterStatusView``, ``version: 1``, described in
docs/typesense-status.md): fields are added, never renamed or removed, within a version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from operator_core.clock import parse_wire_time, wire_time
from operator_core.conditions import READY, condition_of
from operator_core.pods import container_status, pod_ordinal
from typesense_operator.api.reasons import ConditionType
from typesense_operator.quorum.hosts import Host
from typesense_operator.resources.core import TYPESENSE_CONTAINER

__all__ = ["DOCUMENT_KIND", "DOCUMENT_VERSION", "EVENTS_SHOWN", "render", "status_document"]

DOCUMENT_KIND = "TypesenseClusterStatusView"
DOCUMENT_VERSION = 1
EVENTS_SHOWN = 10

Manifest = Mapping[str, Any]


def _ago(moment: str | None, now: datetime) -> float | None:
    parsed = parse_wire_time(moment)
    return None if parsed is None else round((now - parsed).total_seconds(), 1)


def _pod_facts(pod: Manifest) -> dict[str, Any]:
    status = pod.get("status") or {}
    container = container_status(pod, TYPESENSE_CONTAINER)
    facts = {
        "k8sNode": (pod.get("spec") or {}).get("nodeName"),
        "ip": status.get("podIP"),
        "phase": "Terminating" if pod["metadata"].get("deletionTimestamp") else status.get("phase"),
        "restarts": container.get("restartCount"),
    }
    return {key: value for key, value in facts.items() if value is not None}


def _nodes(
    cluster: Manifest, pods: Sequence[Manifest] | None, hosts: Mapping[str, Host] | None
) -> list[dict[str, Any]]:
    """The operator's view of each node (status.nodes), with what each pod says beside it; a pod the
    operator has not seen yet, or a node without a pod, is listed too. With ``hosts`` (the Kubernetes
    nodes as read now), each node's host state is today's, and a raft view written before its host
    was lost is marked stale: the operator has not seen that member since (it may be down itself)."""
    status = cluster.get("status") or {}
    observed_at = parse_wire_time(status.get("nodesObservedAt"))
    by_index: dict[int, dict[str, Any]] = {}
    for view in status.get("nodes") or []:
        by_index[int(view["index"])] = dict(view)
    for pod in pods or ():
        index = pod_ordinal(pod["metadata"]["name"])
        if index is None:
            continue
        node = by_index.setdefault(index, {"index": index, "pod": pod["metadata"]["name"]})
        node.update(_pod_facts(pod))
    for node in by_index.values():
        host = (hosts or {}).get(str(node.get("k8sNode") or ""))
        if host is None:
            continue
        node["k8sNodeState"] = host.state.value
        if host.lost and host.since is not None:
            node["k8sNodeSince"] = wire_time(host.since)
            node["viewStale"] = bool(
                node.get("answering") and (observed_at is None or observed_at < host.since)
            )
    return [by_index[index] for index in sorted(by_index)]


def _event_time(event: Manifest) -> str:
    return str(
        event.get("lastTimestamp")
        or (event.get("series") or {}).get("lastObservedTime")
        or event.get("eventTime")
        or event["metadata"].get("creationTimestamp")
        or ""
    )


def _tls(cluster: Manifest) -> dict[str, Any] | None:
    """spec.tls as the nodes serve it: the certificate given to them, and CertificateReady's word."""
    if not (cluster.get("spec") or {}).get("tls"):
        return None
    said = condition_of(cluster, ConditionType.CERTIFICATE_READY) or {}
    return {
        **((cluster.get("status") or {}).get("tls") or {}),
        "ready": said.get("status"),
        "reason": said.get("reason"),
        "message": said.get("message"),
    }


def status_document(
    cluster: Manifest,
    pods: Sequence[Manifest] | None,
    events: Sequence[Manifest] | None,
    missing: Sequence[str],
    now: datetime,
    hosts: Mapping[str, Host] | None = None,
) -> dict[str, Any]:
    """The whole view. ``pods`` or ``events`` None: the user may not read them, and ``missing`` says
    which permission would show them. ``hosts``: the Kubernetes nodes of the pods, as read now (None:
    the user may not read Nodes)."""
    metadata, spec, status = cluster["metadata"], cluster.get("spec") or {}, cluster.get("status") or {}
    ready = condition_of(cluster, READY)
    quorum = dict(status.get("quorum") or {})
    if quorum.get("graceEndsAt"):
        ends_in = _ago(quorum["graceEndsAt"], now)
        quorum["graceEndsInSeconds"] = None if ends_in is None else -ends_in
    roll = status.get("roll") or {}
    newest_first = sorted(events or (), key=_event_time, reverse=True)[:EVENTS_SHOWN]
    return {
        "kind": DOCUMENT_KIND,
        "version": DOCUMENT_VERSION,
        "observedAt": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cluster": {
            "namespace": metadata["namespace"],
            "name": metadata["name"],
            "replicas": spec.get("replicas"),
            "image": spec.get("image"),
            "phase": status.get("phase"),
            "ready": None
            if ready is None
            else {
                "status": ready.get("status"),
                "reason": ready.get("reason"),
                "message": ready.get("message"),
                "since": ready.get("lastTransitionTime"),
            },
        },
        "quorum": quorum,
        "tls": _tls(cluster),
        "roll": {**roll, "inProgress": bool(roll.get("toDo"))} if roll else None,
        "nodes": _nodes(cluster, pods, hosts),
        "nodesObservedAt": status.get("nodesObservedAt"),
        "nodesObservedSecondsAgo": _ago(status.get("nodesObservedAt"), now),
        "events": [
            {
                "at": _event_time(event),
                "type": event.get("type"),
                "reason": event.get("reason"),
                "message": event.get("message"),
                "count": event.get("count") or 1,
            }
            for event in newest_first
        ],
        "missing": list(missing),
    }


# -- text

_COLOURS = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1"}


class _Paint:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, colour: str) -> str:
        return f"\x1b[{_COLOURS[colour]}m{text}\x1b[0m" if self.colour and text else text


def _seconds(value: float | None) -> str:
    if value is None:
        return "?"
    value = abs(value)
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.0f} h"


def _size(value: int | None) -> str:
    if value is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value = value / 1024  # type: ignore[assignment]
    return ""


def _raft(node: Mapping[str, Any], paint: _Paint) -> str:
    if node.get("viewStale"):
        return paint(f"{node.get('state') or 'unknown'}? (stale)", "yellow")
    if node.get("answering") is False:
        held = node.get("heldBack")
        return paint(f"not answering ({held})" if held else "not answering", "red")
    state = node.get("state")
    if state is None:
        return paint("unknown", "dim") if "answering" not in node else paint("no raft state", "yellow")
    colour = {"LEADER": "green", "FOLLOWER": "", "ERROR": "red"}.get(state, "yellow")
    return paint(state, colour) if colour else state


def _table(rows: list[list[str]], plain: list[list[str]]) -> list[str]:
    """Rows padded by the width of their text without colour codes."""
    widths = [max(len(row[i]) for row in plain) for i in range(len(plain[0]))]
    return [
        "  ".join(cell + " " * (widths[i] - len(plain_row[i])) for i, cell in enumerate(row)).rstrip()
        for row, plain_row in zip(rows, plain, strict=True)
    ]


def _node_rows(nodes: Sequence[Mapping[str, Any]], paint: _Paint) -> list[str]:
    header = [
        "#",
        "POD",
        "K8S NODE",
        "IP",
        "PHASE",
        "RESTARTS",
        "RAFT",
        "COMMITTED",
        "LAG",
        "REVISION",
        "DISK",
    ]
    rows, plain = [header], [header]
    for node in nodes:
        revision = {True: "current", False: "to roll"}.get(node.get("currentRevision"), "")  # type: ignore[arg-type]
        used, total = node.get("diskUsedBytes"), node.get("diskTotalBytes")
        host = str(node.get("k8sNode", ""))
        if host and node.get("k8sNodeState") not in (None, "Ready"):
            host = f"{host} ({node['k8sNodeState']})"
        cells = [
            str(node["index"]),
            str(node.get("pod", "")),
            host,
            str(node.get("ip", "")),
            str(node.get("phase", "")),
            "" if node.get("restarts") is None else str(node["restarts"]),
            _raft(node, _Paint(False)),
            "" if node.get("committedIndex") is None else str(node["committedIndex"]),
            "" if node.get("lag") is None else str(node["lag"]),
            revision,
            f"{_size(used)} of {_size(total)}" if used is not None and total else _size(used),
        ]
        plain.append(cells)
        rows.append([*cells[:6], _raft(node, paint), *cells[7:]])
    return _table(rows, plain)


def render(document: Mapping[str, Any], *, colour: bool = False) -> str:
    """The document as text: the cluster and its quorum, the nodes, the recent Events."""
    paint = _Paint(colour)
    cluster, quorum, roll = document["cluster"], document["quorum"] or {}, document["roll"]
    ready = cluster.get("ready") or {}
    lines = [
        paint(f"TypesenseCluster {cluster['namespace']}/{cluster['name']}", "bold")
        + f"  {cluster.get('replicas')} nodes  phase {cluster.get('phase') or '-'}",
    ]
    if ready:
        status = ready.get("status")
        mark = paint(str(status), "green" if status == "True" else "red" if status == "False" else "yellow")
        lines.append(f"Ready       {mark}  {ready.get('reason')}: {ready.get('message')}")
    if quorum:
        members = quorum.get("members")
        survivor = quorum.get("survivor")
        lines.append(
            f"Quorum      {quorum.get('state', '-')}  members: "
            + (", ".join(map(str, members)) if members else "every node")
            + (f"  (survivor of the last downgrade: node {survivor})" if survivor is not None else "")
        )
    if quorum.get("graceEndsAt"):
        ends_in = quorum.get("graceEndsInSeconds")
        when = f"in {_seconds(ends_in)}" if ends_in is not None and ends_in >= 0 else "now"
        lines.append(
            paint(
                f"Waiting     grace ends {quorum['graceEndsAt']} ({when}); then: {quorum.get('thenAction')}",
                "yellow",
            )
        )
    if quorum.get("lastAction"):
        lines.append(
            f"Last step   {quorum['lastAction']} at {quorum.get('lastActionAt', '?')}: "
            f"{quorum.get('lastActionMessage', '')}".rstrip(": ")
        )
    tls = document.get("tls")
    if tls:
        good = tls.get("ready") == "True" and tls.get("reason") != "ExpiresSoon"
        served = (
            f"certificate {tls['serial']} until {tls.get('notAfter')}" if tls.get("serial") else "none yet"
        )
        lines.append(
            f"TLS         {served}; "
            + paint(
                f"{tls.get('reason')}: {tls.get('message') or ''}".rstrip(": "), "green" if good else "yellow"
            )
        )
    if roll and roll.get("inProgress"):
        waiting = f", waiting since {roll['waitingSince']}" if roll.get("waitingSince") else ""
        nxt = f"; next: node {roll['next']}" if roll.get("next") is not None else ""
        lines.append(
            f"Roll        to {roll.get('updateRevision')}: done {roll.get('done') or []}, "
            f"to do {roll.get('toDo')}{nxt}{waiting}"
        )
    lines.append("")
    if document["nodes"]:
        lines.extend(_node_rows(document["nodes"], paint))
    else:
        lines.append("no nodes")
    age = document.get("nodesObservedSecondsAgo")
    if document.get("nodesObservedAt"):
        lines.append(
            paint(
                f"raft view: the operator's probes, written {document['nodesObservedAt']} "
                f"({_seconds(age)} ago) and again whenever a node changes",
                "dim",
            )
        )
    for node in document["nodes"]:
        if node.get("k8sNodeState") in (None, "Ready", "Unknown"):
            continue
        since = f" since {node['k8sNodeSince']}" if node.get("k8sNodeSince") else ""
        stale = (
            ": the raft view of this member was written before, and the operator has not seen it since"
            if node.get("viewStale")
            else ""
        )
        lines.append(
            paint(
                f"node {node['index']}: its Kubernetes node {node.get('k8sNode')} is "
                f"{node['k8sNodeState']}{since}{stale}",
                "yellow",
            )
        )
    if document["events"]:
        lines.extend(["", "Events (newest first)"])
        for event in document["events"]:
            kind = paint(str(event.get("type")), "yellow" if event.get("type") == "Warning" else "dim")
            count = f" (x{event['count']})" if event.get("count", 1) > 1 else ""
            lines.append(f"  {event.get('at')}  {kind}  {event.get('reason')}{count}: {event.get('message')}")
    for line in document["missing"]:
        lines.append(paint(f"not shown: {line}", "yellow"))
    return "\n".join(lines) + "\n"
