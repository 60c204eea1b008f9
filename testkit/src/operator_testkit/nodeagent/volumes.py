"""Volumes: which host directory backs each mount, path translation, and ConfigMap/Secret files.

A container's processes run on this machine's filesystem, so every path under
a volume mount (``/usr/share/typesense/data``, say) is translated to the host
directory that backs that mount. :func:`mount_table` and :func:`translate` are
pure; :func:`volume_files` decides the files of a ConfigMap, Secret, downward-API or
projected volume (pure), and :func:`sync_files` writes them, changing only what changed,
as the kubelet keeps such volumes in sync with their sources. A projected volume's
ServiceAccount token comes from the API server's TokenRequest (:func:`token_requests`
says which tokens a pod needs; the pod worker asks for them and hands them in).

Every volume lives under the agent's state directory: emptyDir and file
volumes under the pod's directory, persistentVolumeClaims in the directory of
their PersistentVolume (see :mod:`.storage`). A ``hostPath`` volume gets a
private directory too, so a pod can never write to this machine's real paths.
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from operator_testkit.nodeagent.env import ConfigError, PodFacts, downward_file

__all__ = [
    "Mount",
    "TokenRequest",
    "give_to_group",
    "mount_table",
    "sync_files",
    "token_requests",
    "translate",
    "translate_all",
    "volume_files",
]

Manifest = Mapping[str, Any]

_FILE_VOLUME_KINDS = ("configMap", "secret", "projected", "downwardAPI")
DEFAULT_TOKEN_SECONDS = 3600


@dataclass(frozen=True)
class TokenRequest:
    """A ServiceAccount token a projected volume asks for: its audience ("" for the API server's) and
    lifetime; the API server binds it to the pod."""

    audience: str
    expiration_seconds: int


def _token_request(source: Manifest) -> TokenRequest:
    return TokenRequest(
        audience=str(source.get("audience") or ""),
        expiration_seconds=int(source.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS),
    )


def token_requests(volumes: Sequence[Manifest]) -> set[TokenRequest]:
    """Every ServiceAccount token the pod's projected volumes hold (pure)."""
    return {
        _token_request(source["serviceAccountToken"])
        for volume in volumes
        for source in (volume.get("projected") or {}).get("sources") or []
        if "serviceAccountToken" in source
    }


def _downward_files(source: Manifest, pod: Manifest, facts: PodFacts | None) -> dict[str, bytes]:
    files = {}
    for item in source.get("items") or []:
        if "fieldRef" not in item:
            raise ConfigError(f"downwardAPI item {item.get('path')!r}: only fieldRef is supported here")
        if facts is None:
            raise ConfigError("downwardAPI files need the pod's facts")
        files[str(item["path"])] = downward_file(item["fieldRef"]["fieldPath"], pod, facts).encode()
    return files


@dataclass(frozen=True)
class Mount:
    """One volume mount: the path the container asked for, and the host directory behind it."""

    container_path: str
    host_path: Path
    read_only: bool = False


def mount_table(container: Manifest, volume_dirs: Mapping[str, Path]) -> list[Mount]:
    """The container's mounts, longest container path first (so the most specific mount wins)."""
    mounts = []
    for mount in container.get("volumeMounts") or []:
        base = volume_dirs.get(mount["name"])
        if base is None:
            raise ConfigError(f"volume {mount['name']!r} is mounted but not declared")
        sub_path = str(mount.get("subPath") or "")
        if sub_path and (PurePosixPath(sub_path).is_absolute() or ".." in PurePosixPath(sub_path).parts):
            raise ConfigError(f"subPath {sub_path!r} must be a relative path inside the volume")
        path = str(PurePosixPath(mount["mountPath"]))
        mounts.append(Mount(path, base / sub_path if sub_path else base, bool(mount.get("readOnly"))))
    return sorted(mounts, key=lambda m: len(m.container_path), reverse=True)


def _translate_path(path: str, mounts: Sequence[Mount]) -> str:
    if not path.startswith("/"):
        return path
    for mount in mounts:
        prefix = mount.container_path.rstrip("/")
        if path == prefix or path.startswith(prefix + "/"):
            rest = path[len(prefix) :].lstrip("/")
            return str(mount.host_path / rest) if rest else str(mount.host_path)
    return path


def translate(value: str, mounts: Sequence[Mount]) -> str:
    """A path (or ``--flag=path``) under a mount, rewritten to the host directory; anything else as is."""
    if value.startswith("-") and "=" in value:
        flag, _, path = value.partition("=")
        return f"{flag}={_translate_path(path, mounts)}"
    return _translate_path(value, mounts)


def translate_all(values: Sequence[str], mounts: Sequence[Mount]) -> list[str]:
    return [translate(v, mounts) for v in values]


def _source_data(kind: str, source: Manifest, objects: Mapping[str, Manifest]) -> dict[str, bytes] | None:
    name = source.get("name") or source.get("secretName") or ""
    found = objects.get(name)
    if found is None:
        if source.get("optional"):
            return None
        raise ConfigError(f'{kind} "{name}" not found')
    data = {k: base64.b64decode(v) for k, v in (found.get("binaryData") or {}).items()}
    encoded = found.get("data") or {}
    if kind == "secret":
        data.update({k: base64.b64decode(v) for k, v in encoded.items()})
    else:
        data.update({k: str(v).encode() for k, v in encoded.items()})
    items = source.get("items")
    if not items:
        return data
    chosen = {}
    for item in items:
        if item["key"] in data:
            chosen[item["path"]] = data[item["key"]]
        elif not source.get("optional"):
            raise ConfigError(f'couldn\'t find key {item["key"]} in {kind} "{name}"')
    return chosen


def volume_files(
    volume: Manifest,
    config_maps: Mapping[str, Manifest],
    secrets: Mapping[str, Manifest],
    *,
    pod: Manifest | None = None,
    facts: PodFacts | None = None,
    tokens: Mapping[TokenRequest, bytes] | None = None,
) -> dict[str, bytes] | None:
    """The files of a ConfigMap, Secret, downward-API or projected volume by relative path; None for
    other kinds. ``tokens`` holds the ServiceAccount tokens issued for the pod (see
    :func:`token_requests`); a projected token not among them is a :class:`.ConfigError`."""
    if "configMap" in volume:
        return _source_data("configmap", volume["configMap"], config_maps) or {}
    if "secret" in volume:
        return _source_data("secret", volume["secret"], secrets) or {}
    if "downwardAPI" in volume:
        return _downward_files(volume["downwardAPI"], pod or {}, facts)
    if "projected" in volume:
        files: dict[str, bytes] = {}
        for source in volume["projected"].get("sources") or []:
            if "configMap" in source:
                files.update(_source_data("configmap", source["configMap"], config_maps) or {})
            elif "secret" in source:
                files.update(_source_data("secret", source["secret"], secrets) or {})
            elif "downwardAPI" in source:
                files.update(_downward_files(source["downwardAPI"], pod or {}, facts))
            elif "serviceAccountToken" in source:
                wanted = _token_request(source["serviceAccountToken"])
                token = (tokens or {}).get(wanted)
                if token is None:
                    raise ConfigError("the ServiceAccount token is not issued yet")
                files[str(source["serviceAccountToken"]["path"])] = token
        return files
    return None


def is_file_volume(volume: Manifest) -> bool:
    return any(kind in volume for kind in _FILE_VOLUME_KINDS)


def sync_files(directory: Path, files: Mapping[str, bytes]) -> bool:
    """Make ``directory`` hold exactly ``files``; returns whether anything changed.

    Each changed file is replaced atomically (write, then rename), so a reader
    never sees half a file. Relative paths that would leave the directory are refused.
    """
    directory.mkdir(parents=True, exist_ok=True)
    changed = False
    wanted = set()
    for relative, content in files.items():
        target = (directory / relative).resolve()
        if not target.is_relative_to(directory.resolve()):
            raise ConfigError(f"volume item path {relative!r} leaves the volume")
        wanted.add(target)
        with contextlib.suppress(OSError):
            if target.read_bytes() == content:
                continue
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.tmp")
        temporary.write_bytes(content)
        os.replace(temporary, target)
        changed = True
    for existing in directory.rglob("*"):
        if existing.is_file() and existing.resolve() not in wanted:
            existing.unlink()
            changed = True
    return changed


def give_to_group(root: Path, gid: int) -> None:
    """A volume made the pod's ``fsGroup``'s, as the kubelet does for volumes that support ownership
    management (with ``fsGroupChangePolicy: OnRootMismatch``): unless its root has that group already,
    every file and folder gets the group, group read and write, and folders the setgid bit, so that what
    the pod's users create stays the group's."""
    if root.stat().st_gid == gid:
        return
    for path in (root, *root.rglob("*")):
        if path.is_symlink():
            continue
        os.chown(path, -1, gid)
        mode = path.stat().st_mode
        extra = 0o2070 if path.is_dir() else 0o060
        path.chmod((mode | extra) & 0o7777)
