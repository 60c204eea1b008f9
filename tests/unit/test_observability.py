"""The shared /metrics and log formats: verbs as the audit log names them, reconciles counted and timed,
readiness of a standby and of a leader, and JSON lines that name their object and hide Secret values."""

from __future__ import annotations

import json
import logging

import pytest

from operator_core import errors
from operator_core.logs import JsonFormatter, about_object, configure_logging
from operator_core.metrics import REGISTRY, ReplicaState, request_verb, timed_reconcile
from operator_core.secrets import register_secret

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("method", "path", "params", "verb"),
    [
        ("GET", "/api/v1/namespaces/ns/pods", {}, "list"),
        ("GET", "/api/v1/namespaces/ns/pods", {"watch": "true"}, "watch"),
        ("GET", "/api/v1/pods", {"labelSelector": "a=b"}, "list"),
        ("GET", "/api/v1/namespaces/ns/pods/p", {}, "get"),
        ("GET", "/api/v1/namespaces/ns/pods/p/status", {}, "get"),
        ("GET", "/api/v1/namespaces/ns", {}, "get"),
        ("GET", "/api/v1/namespaces", {}, "list"),
        ("GET", "/apis/ts.opentelekomcloud.com/v1alpha1/namespaces/ns/typesenseclusters", {}, "list"),
        ("GET", "/apis/apps/v1/namespaces/ns/statefulsets/s", {}, "get"),
        ("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {"watch": "1"}, "watch"),
        ("GET", "/version", {}, "get"),
        ("PATCH", "/apis/apps/v1/namespaces/ns/statefulsets/s", {"fieldManager": "x"}, "patch"),
        ("POST", "/api/v1/namespaces/ns/events", {}, "create"),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", {}, "update"),
        ("DELETE", "/api/v1/namespaces/ns/pods/p", {}, "delete"),
        ("DELETE", "/api/v1/namespaces/ns/pods", {}, "deletecollection"),
    ],
)
def test_request_verb_names_requests_as_the_audit_log_does(
    method: str, path: str, params: dict[str, str], verb: str
) -> None:
    assert request_verb(method, path, params) == verb


def _sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_timed_reconcile_counts_each_result_and_observes_its_duration() -> None:
    kind = "TimedKind"
    with timed_reconcile(kind):
        pass
    with pytest.raises(errors.InvalidSpec), timed_reconcile(kind):
        raise errors.InvalidSpec("bad")
    with pytest.raises(RuntimeError), timed_reconcile(kind):
        raise RuntimeError("bug")
    for result in ("success", "invalid_spec", "error"):
        assert _sample("operator_reconciles_total", {"kind": kind, "result": result}) == 1
    assert _sample("operator_reconcile_duration_seconds_count", {"kind": kind}) == 3


@pytest.mark.parametrize(
    ("leading", "synced", "lease_reachable", "ready"),
    [
        (False, False, True, True),  # a standby: ready to take over
        (False, False, False, False),  # a standby that cannot read its Lease could not take over
        (True, False, True, False),  # a new leader, still listing
        (True, True, True, True),
        (True, True, False, True),  # a leader answers for its caches; its renewals have a deadline
    ],
)
def test_a_standby_is_ready_while_it_reads_its_lease_and_a_leader_once_its_caches_are_synced(
    leading: bool, synced: bool, lease_reachable: bool, ready: bool
) -> None:
    state = ReplicaState()
    state.leading(leading)
    state.caches_synced(synced)
    state.lease_reachable(lease_reachable)
    assert state.ready() is ready
    assert (state.not_ready_because() is None) is ready


def _record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("typesense-operator", logging.WARNING, __file__, 1, message, args, None)


def test_a_json_line_names_the_object_it_is_about() -> None:
    with about_object("TypesenseCluster", "search", "docs"):
        line = JsonFormatter().format(_record("quorum %s", "lost"))
    entry = json.loads(line)
    assert entry["message"] == "quorum lost"
    assert entry["level"] == "warning"
    assert (entry["kind"], entry["namespace"], entry["object"]) == ("TypesenseCluster", "search", "docs")
    outside = json.loads(JsonFormatter().format(_record("started")))
    assert "object" not in outside


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_format_lets_a_secret_value_through(log_format: str, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "s3cr3t-api-key-value"
    register_secret(secret)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("info", log_format)  # type: ignore[arg-type]
        with about_object("TypesenseCluster", "ns", "c"):
            logging.getLogger("typesense-operator").warning("the key is %s", secret)
            try:
                raise RuntimeError(f"refused {secret}")
            except RuntimeError:
                logging.getLogger("typesense-operator").exception("failed")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    written = capsys.readouterr().err
    assert secret not in written
    assert "[REDACTED]" in written
    if log_format == "json":
        lines = [json.loads(line) for line in written.splitlines()]
        assert lines[0]["object"] == "c"
        assert "exception" in lines[1]
    else:
        assert "[ns/c]" in written
