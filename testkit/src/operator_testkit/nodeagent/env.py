"""Container environment, resolved as the kubelet resolves it (pure).

Sources, in the kubelet's order: ``envFrom`` (ConfigMaps and Secrets, with an
optional prefix), then ``env`` (literal values with ``$(VAR)`` expansion, and
``valueFrom`` Secret keys, ConfigMap keys, the downward API and container
resources). A missing, non-optional reference is a :class:`ConfigError`, which
the pod worker reports as ``CreateContainerConfigError`` and retries, as the
kubelet does.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ConfigError",
    "PodFacts",
    "ResolvedEnv",
    "downward_file",
    "expand",
    "field_value",
    "master_service_env",
    "resolve_env",
    "service_links",
]

Manifest = Mapping[str, Any]

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_FIELD_INDEX = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class ConfigError(Exception):
    """A reference the container needs cannot be resolved (yet)."""


@dataclass(frozen=True)
class PodFacts:
    """What the downward API can tell a container about its pod, beyond the pod manifest."""

    pod_ip: str
    host_ip: str
    node_name: str


@dataclass
class ResolvedEnv:
    """The container's environment, and which of its values came from Secrets (to keep out of logs)."""

    values: dict[str, str] = field(default_factory=dict)
    secret_values: set[str] = field(default_factory=set)


def expand(text: str, variables: Mapping[str, str]) -> str:
    """Expand ``$(VAR)`` from ``variables``; ``$$`` is a literal ``$``; unknown references stay as written."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return variables.get(name, match.group(0))

    return _REFERENCE.sub(replace, text)


def _decoded_secret(secret: Manifest) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode(errors="replace") for k, v in (secret.get("data") or {}).items()}
    data.update({k: str(v) for k, v in (secret.get("stringData") or {}).items()})
    return data


def _config_map_data(config_map: Manifest) -> dict[str, str]:
    data = {k: str(v) for k, v in (config_map.get("data") or {}).items()}
    for key, value in (config_map.get("binaryData") or {}).items():
        data[key] = base64.b64decode(value).decode(errors="replace")
    return data


def field_value(path: str, pod: Manifest, facts: PodFacts) -> str:
    """One downward-API field of the pod, as an env value (``fieldRef.fieldPath``)."""
    metadata = pod.get("metadata", {})
    spec = pod.get("spec", {})
    simple = {
        "metadata.name": metadata.get("name", ""),
        "metadata.namespace": metadata.get("namespace", ""),
        "metadata.uid": metadata.get("uid", ""),
        "spec.nodeName": spec.get("nodeName") or facts.node_name,
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": facts.pod_ip,
        "status.podIPs": facts.pod_ip,
        "status.hostIP": facts.host_ip,
        "status.hostIPs": facts.host_ip,
    }
    if path in simple:
        return str(simple[path])
    indexed = _FIELD_INDEX.match(path)
    if indexed:
        return str((metadata.get(indexed.group(1)) or {}).get(indexed.group(2), ""))
    raise ConfigError(f"unsupported fieldRef {path!r}")


def downward_file(path: str, pod: Manifest, facts: PodFacts) -> str:
    """One downward-API field as a volume file holds it: all labels or annotations are ``key="value"``
    lines, sorted (the kubelet's format); anything else as :func:`field_value` gives it."""
    if path in ("metadata.labels", "metadata.annotations"):
        entries = (pod.get("metadata", {}).get(path.split(".", 1)[1]) or {}).items()
        return "\n".join(f"{key}={json.dumps(str(value))}" for key, value in sorted(entries))
    return field_value(path, pod, facts)


def _links(service: Manifest) -> dict[str, str]:
    """One Service's Docker-link variables, as the kubelet writes them (none for a headless Service)."""
    metadata, spec = service.get("metadata", {}), service.get("spec", {})
    host = spec.get("clusterIP")
    ports = [p for p in spec.get("ports") or [] if p.get("protocol", "TCP") == "TCP"]
    if not host or host == "None" or not ports:
        return {}
    name = str(metadata.get("name", "")).upper().replace("-", "_")
    env = {f"{name}_SERVICE_HOST": str(host), f"{name}_SERVICE_PORT": str(ports[0]["port"])}
    env[f"{name}_PORT"] = f"tcp://{host}:{ports[0]['port']}"
    for port in ports:
        number = port["port"]
        if port.get("name"):
            env[f"{name}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(number)
        prefix = f"{name}_PORT_{number}_TCP"
        env.update(
            {
                prefix: f"tcp://{host}:{number}",
                f"{prefix}_PROTO": "tcp",
                f"{prefix}_PORT": str(number),
                f"{prefix}_ADDR": str(host),
            }
        )
    return env


def _is(service: Manifest, namespace: str, name: str | None = None) -> bool:
    metadata = service.get("metadata", {})
    return metadata.get("namespace") == namespace and (name is None or metadata.get("name") == name)


def master_service_env(services: Iterable[Manifest]) -> dict[str, str]:
    """The env every container gets for the API server's ``default/kubernetes`` Service (the kubelet
    adds it whatever ``enableServiceLinks`` says): how an in-cluster client finds the API server.

    The other Services' links are left out: ``TYPESENSE_PORT=tcp://…`` from a Service named
    ``typesense`` would be read as a server setting, and nothing here relies on them; a container run
    from its image's root gets them all (:func:`service_links`).
    """
    for service in services:
        if _is(service, "default", "kubernetes"):
            return _links(service)
    return {}


def service_links(services: Iterable[Manifest], namespace: str, enabled: bool = True) -> dict[str, str]:
    """Every variable the kubelet gives a container for Services: the links of each Service of the
    pod's namespace (``enableServiceLinks``, on by default), then the API server's (pure)."""
    every = list(services)
    env: dict[str, str] = {}
    if enabled:
        for service in sorted(every, key=lambda s: str(s.get("metadata", {}).get("name", ""))):
            if _is(service, namespace):
                env.update(_links(service))
    env.update(master_service_env(every))
    return env


def _resource_value(reference: Manifest, container: Manifest) -> str:
    """A container's request or limit, as its raw quantity (the kubelet would also round by divisor)."""
    kind, _, resource = str(reference.get("resource", "")).partition(".")
    resources = container.get("resources") or {}
    return str((resources.get(kind) or {}).get(resource, "0"))


class _Lookup:
    def __init__(self, config_maps: Mapping[str, Manifest], secrets: Mapping[str, Manifest]) -> None:
        self.config_maps = config_maps
        self.secrets = secrets

    def config_map(self, name: str, optional: bool) -> dict[str, str] | None:
        if name not in self.config_maps:
            if optional:
                return None
            raise ConfigError(f'configmap "{name}" not found')
        return _config_map_data(self.config_maps[name])

    def secret(self, name: str, optional: bool) -> dict[str, str] | None:
        if name not in self.secrets:
            if optional:
                return None
            raise ConfigError(f'secret "{name}" not found')
        return _decoded_secret(self.secrets[name])


def resolve_env(
    pod: Manifest,
    container: Manifest,
    facts: PodFacts,
    config_maps: Mapping[str, Manifest],
    secrets: Mapping[str, Manifest],
) -> ResolvedEnv:
    """The environment of one container; ``config_maps`` and ``secrets`` are the namespace's, by name."""
    lookup = _Lookup(config_maps, secrets)
    resolved = ResolvedEnv()
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            ref = source["configMapRef"]
            data = lookup.config_map(ref["name"], bool(ref.get("optional")))
            from_secret = False
        else:
            ref = source["secretRef"]
            data = lookup.secret(ref["name"], bool(ref.get("optional")))
            from_secret = True
        for key, text in (data or {}).items():
            resolved.values[prefix + key] = text
            if from_secret:
                resolved.secret_values.add(text)
    for variable in container.get("env") or []:
        name: str = variable["name"]
        if "valueFrom" not in variable:
            resolved.values[name] = expand(str(variable.get("value", "")), resolved.values)
            continue
        source = variable["valueFrom"]
        value: str | None = None
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            data = lookup.secret(ref["name"], bool(ref.get("optional")))
            value = _keyed(data, ref, "secret")
            if value is not None:
                resolved.secret_values.add(value)
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            value = _keyed(lookup.config_map(ref["name"], bool(ref.get("optional"))), ref, "configmap")
        elif "fieldRef" in source:
            value = field_value(source["fieldRef"]["fieldPath"], pod, facts)
        elif "resourceFieldRef" in source:
            value = _resource_value(source["resourceFieldRef"], container)
        else:
            raise ConfigError(f"env {name}: unsupported valueFrom {sorted(source)}")
        if value is not None:
            resolved.values[name] = value
    return resolved


def _keyed(data: Mapping[str, str] | None, ref: Manifest, what: str) -> str | None:
    if data is None:
        return None
    key = ref["key"]
    if key not in data:
        if ref.get("optional"):
            return None
        raise ConfigError(f'couldn\'t find key {key} in {what} "{ref["name"]}"')
    return data[key]
