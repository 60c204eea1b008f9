"""The node agent, second round, pure parts: size limits, logs, the service table, nginx, the CLI."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from operator_testkit.nodeagent.cli import add_agent_commands, agent_dir
from operator_testkit.nodeagent.disks import SIZE_LIMITED_ANNOTATION, parse_quantity, size_limit
from operator_testkit.nodeagent.kubelet import choose_log, tail
from operator_testkit.nodeagent.nginxconf import listen_address, parse, render, rewrite
from operator_testkit.nodeagent.nodes import NodeIdentity, node_status
from operator_testkit.nodeagent.runners import LaunchContext, NginxRunner, nginx_main_config, runner_for
from operator_testkit.nodeagent.serviceproxy import service_backends
from operator_testkit.nodeagent.storage import SIZE_LIMIT_ANNOTATION, volume_for_claim
from operator_testkit.nodeagent.volumes import Mount

# ---------------------------------------------------------------- size-limited volumes


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1Gi", 2**30), ("8Mi", 8 * 2**20), ("500M", 500 * 10**6), ("1e3", 1000), ("1.5Ki", 1536), ("12", 12)],
)
def test_parse_quantity(text: str, expected: int) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "1GB", "Gi", "1e3Mi", "-1Gi"])
def test_parse_quantity_refuses_what_is_not_a_storage_quantity(text: str) -> None:
    with pytest.raises(ValueError, match="not a storage quantity"):
        parse_quantity(text)


def claim(storage_class: str | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {"requests": {"storage": "64Mi"}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    metadata = {"name": "data", "namespace": "ns", "uid": "u-1", "annotations": annotations or {}}
    return {"metadata": metadata, "spec": spec}


def test_only_claims_that_ask_are_size_limited_and_their_volume_records_the_limit() -> None:
    assert size_limit(claim("standard")) is None
    assert size_limit(claim()) is None
    assert size_limit(claim("nodeagent-size-limited")) == 64 * 2**20
    assert size_limit(claim("gp2", {SIZE_LIMITED_ANNOTATION: "true"})) == 64 * 2**20
    volume = volume_for_claim(claim("nodeagent-size-limited"), Path("/state/volumes"))
    assert volume["metadata"]["annotations"][SIZE_LIMIT_ANNOTATION] == str(64 * 2**20)
    assert SIZE_LIMIT_ANNOTATION not in volume_for_claim(claim(), Path("/v"))["metadata"]["annotations"]


# ---------------------------------------------------------------- nodes and logs


def test_node_status_advertises_the_kubelet_port_and_only_its_internal_ip() -> None:
    node = NodeIdentity("agent-node-0", "zone-a", "127.49.0.1")
    status = node_status(node, datetime(2026, 1, 1, tzinfo=UTC), kubelet_port=41234)
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 41234}}
    # A Hostname address would make the API server look the node's name up in DNS.
    assert status["addresses"] == [{"type": "InternalIP", "address": "127.49.0.1"}]


def test_choose_log_takes_the_newest_run_or_the_one_before() -> None:
    files = [Path("c/0.log"), Path("c/10.log"), Path("c/2.log"), Path("c/notes.txt")]
    assert choose_log(files, previous=False) == Path("c/10.log")
    assert choose_log(files, previous=True) == Path("c/2.log")
    assert choose_log([Path("c/0.log")], previous=True) is None
    assert choose_log([], previous=False) is None


def test_tail_counts_lines_as_kubectl_does() -> None:
    data = b"one\ntwo\nthree\npartial"
    assert tail(data, None) == data
    assert tail(data, 2) == b"three\npartial"
    assert tail(data, 10) == data
    assert tail(data, 0) == b""


# ---------------------------------------------------------------- the service table


def pod(name: str, ip: str, *, ready: bool = True, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels or {"app": "web"}},
        "spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def svc(cluster_ip: str, target: int | str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {
            "clusterIP": cluster_ip,
            "selector": {"app": "web"},
            "ports": [{"port": 80, "targetPort": target}],
            **spec,
        },
    }


def test_service_backends_are_the_ready_pods_with_named_target_ports_resolved() -> None:
    pods = [
        pod("b", "127.50.0.2"),
        pod("a", "127.50.0.1"),
        pod("unready", "127.50.0.3", ready=False),
        pod("other", "127.50.0.4", labels={"app": "db"}),
    ]
    assert service_backends([svc("127.102.0.10", "http")], pods) == {
        ("127.102.0.10", 80): [("127.50.0.1", 8080), ("127.50.0.2", 8080)]
    }
    published = svc("127.102.0.10", 9000, publishNotReadyAddresses=True)
    assert len(service_backends([published], pods)[("127.102.0.10", 80)]) == 3


def test_service_backends_never_listen_or_forward_off_loopback() -> None:
    assert service_backends([svc("10.96.0.10", 8080)], [pod("a", "127.50.0.1")]) == {}
    assert service_backends([svc("None", 8080)], [pod("a", "127.50.0.1")]) == {}
    assert service_backends([svc("127.102.0.10", 8080)], [pod("a", "10.0.0.5")]) == {("127.102.0.10", 80): []}


# ---------------------------------------------------------------- nginx


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("80", "127.50.0.7:80"),
        ("*:8080", "127.50.0.7:8080"),
        ("0.0.0.0:443", "127.50.0.7:443"),
        ("127.0.0.1:81", "127.50.0.7:81"),
        ("localhost", "127.50.0.7:80"),
        ("[::]:80", None),
        ("unix:/run/nginx.sock", "unix:/host/run/nginx.sock"),
    ],
)
def test_listen_address_binds_the_pod_address(given: str, expected: str | None) -> None:
    assert listen_address(given, "127.50.0.7", lambda p: "/host" + p) == expected


def test_parse_and_render_keep_quotes_regexes_and_variables() -> None:
    text = r"""
    # a comment
    location ~ \.php$ { return 200 "a;b"; }
    set $x '${y}z';
    """
    rendered = render(parse(text))
    assert rendered == "location ~ '\\\\.php$' {\n    return 200 'a;b';\n}\nset $x '${y}z';\n"
    assert parse(rendered)[0].args == ["~", r"\.php$"]


def test_parse_refuses_unbalanced_braces() -> None:
    with pytest.raises(ValueError, match="unbalanced"):
        parse("http { } }")
    with pytest.raises(ValueError, match="unterminated"):
        parse("http { server {")


def test_rewrite_makes_a_pods_nginx_config_safe_on_this_machine() -> None:
    includes: list[tuple[str, str]] = []

    def include(pattern: str, context: str) -> str:
        includes.append((pattern, context))
        return "/copies/" + pattern.rsplit("/", 1)[-1]

    config = """
    user nginx; pid /var/run/nginx.pid; daemon on; error_log /var/log/nginx/error.log warn;
    events {}
    http {
        resolver 10.96.0.10;
        proxy_temp_path /var/cache/proxy;
        include conf.d/*.conf;
        server { listen 80 default_server; listen [::]:80 ipv6only=on; root /usr/share/nginx/html; }
        server { listen [::]:8080; access_log /data/access.log; }
    }
    """
    out = rewrite(
        config,
        pod_ip="127.50.0.7",
        translate=lambda p: p.replace("/usr/share/nginx/html", "/vol/html").replace("/data", "/vol/data"),
        include=include,
        scratch="/pod/runner",
        main=True,
    )
    lines = [line.strip() for line in out.splitlines()]
    assert lines[0] == "user root;"
    assert "error_log stderr warn;" in lines
    for gone in ("pid", "daemon", "resolver", "user nginx"):
        assert not any(line.startswith(gone) for line in lines if line != "user root;")
    assert "proxy_temp_path /pod/runner/proxy;" in lines
    assert "access_log /dev/stdout;" in lines  # the configuration names none: nginx's default is a file
    assert "include /copies/*.conf;" in lines
    assert includes == [("conf.d/*.conf", "http")]
    assert "listen 127.50.0.7:80 default_server;" in lines
    assert "root /vol/html;" in lines
    assert "access_log /vol/data/access.log;" in lines
    # the second server only listened on IPv6: it gets the pod's port 80, never nginx's default *:80
    assert lines.count("listen 127.50.0.7:80;") == 1
    assert not any("[::]" in line or "ipv6only" in line for line in lines)


def test_nginx_main_config_honours_dash_c() -> None:
    assert nginx_main_config(["nginx", "-g", "daemon off;"], []) == "/etc/nginx/nginx.conf"
    assert nginx_main_config([], ["-c", "/config/nginx.conf"]) == "/config/nginx.conf"


def test_nginx_runner_rewrites_the_mounted_config_and_its_includes(tmp_path: Path) -> None:
    config_dir = tmp_path / "volume"
    (config_dir / "conf.d").mkdir(parents=True)
    (config_dir / "nginx.conf").write_text("events {} http { include /etc/nginx/conf.d/*.conf; }")
    (config_dir / "conf.d" / "site.conf").write_text("server { listen 8080; }")
    context = LaunchContext(
        container={"name": "web", "image": "nginx:1.27"},
        pod_ip="127.50.0.9",
        command=[],
        args=[],
        env={},
        mounts=[Mount("/etc/nginx", config_dir)],
        runs_to_completion=False,
        redact=lambda text: text,
        scratch=tmp_path / "scratch",
    )
    assert isinstance(runner_for("docker.io/library/nginx:1.27"), NginxRunner)
    launch = NginxRunner(binary="/bin/sh").launch(context)  # any existing file: nothing is run here
    assert launch.stand_in is False
    assert launch.argv[launch.argv.index("-c") + 1] == str(tmp_path / "scratch" / "conf" / "nginx.conf")
    main = (tmp_path / "scratch" / "conf" / "nginx.conf").read_text()
    assert "include " + str(tmp_path / "scratch" / "conf" / "include-0" / "*.conf") in main
    site = (tmp_path / "scratch" / "conf" / "include-0" / "site.conf").read_text()
    assert "listen 127.50.0.9:8080;" in site


# ---------------------------------------------------------------- the CLI wiring


def test_agent_commands_parse_into_runnable_faults(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser(prog="operator-suite")
    add_agent_commands(parser.add_subparsers(dest="command", required=True))
    kill = parser.parse_args(["agent", "kill", "ts-0", "-n", "search", "-c", "typesense", "--dir", "/x"])
    assert (kill.action, kill.pod, kill.namespace, kill.container, kill.signal) == (
        "kill",
        "ts-0",
        "search",
        "typesense",
        "KILL",
    )
    assert callable(kill.run)
    for argv in (
        ["agent", "freeze", "p"],
        ["agent", "thaw", "p"],
        ["agent", "delete-pod", "p", "--grace-period", "0", "--no-wait"],
        ["agent", "restart-statefulset", "ts"],
        ["agent", "wipe", "data-ts-0"],
        ["agent", "fill", "data-ts-0"],
        ["agent", "free", "data-ts-0"],
    ):
        assert callable(parser.parse_args(argv).run)
    # A sandbox directory leads to the agent inside it.
    (tmp_path / "nodeagent").mkdir()
    (tmp_path / "nodeagent" / "agent.json").write_text("{}")
    assert agent_dir(tmp_path) == tmp_path / "nodeagent"
    assert agent_dir(tmp_path / "nodeagent") == tmp_path / "nodeagent"
