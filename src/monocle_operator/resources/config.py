"""What the operator checks and hashes: Monocle's config.yaml and the Secret data the pods read.

Both functions are pure. :func:`check_config` says why a config would make
update-idents fail before any Job is started; :func:`secret_data_hash` is what
rolls the API and crawler pods when, and only when, Secret data changes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

__all__ = ["ConfigCheck", "check_config", "config_hash", "secret_data_hash", "task_target_problem"]

# Monocle stores each workspace in Elasticsearch indices named after it, so a workspace
# name must be a valid index name. This is the safe subset of Elasticsearch's rules.
_WORKSPACE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,199}$")


@dataclass(frozen=True)
class ConfigCheck:
    """The verdict on a config.yaml: a reason word for the ConfigValid condition and a message."""

    valid: bool
    reason: str
    message: str


def config_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_config(text: str | None, source: str) -> ConfigCheck:
    """Whether ``text`` is a config.yaml Monocle accepts; ``source`` names where it came from."""
    if text is None:
        return ConfigCheck(False, "ConfigMissing", f"{source} has no key config.yaml")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "not YAML"
        return ConfigCheck(
            False, "InvalidYAML", f"config.yaml in {source} is not valid YAML{where}: {problem}"
        )
    if not isinstance(document, dict) or not isinstance(document.get("workspaces"), list):
        return ConfigCheck(
            False, "InvalidConfig", f"config.yaml in {source} must be a mapping with a list 'workspaces'"
        )
    seen: set[str] = set()
    for index, workspace in enumerate(document["workspaces"]):
        name = workspace.get("name") if isinstance(workspace, dict) else None
        if not isinstance(name, str):
            return ConfigCheck(
                False, "InvalidConfig", f"config.yaml in {source}: workspace {index} has no name"
            )
        if not _WORKSPACE_NAME.match(name):
            return ConfigCheck(
                False,
                "InvalidWorkspaceName",
                f"config.yaml in {source}: workspace name {name!r} is not a valid index name; use "
                "lower-case letters, digits, '-', '_' and '.', starting with a letter or digit, "
                "at most 200 characters",
            )
        if name in seen:
            return ConfigCheck(
                False, "InvalidWorkspaceName", f"config.yaml in {source}: workspace {name!r} is named twice"
            )
        seen.add(name)
    names = ", ".join(sorted(seen)) or "none"
    return ConfigCheck(True, "Valid", f"config.yaml in {source} is valid; workspaces: {names}")


def task_target_problem(
    text: str, source: str, workspace: str | None, crawler: str | None
) -> tuple[str, str] | None:
    """Why a MonocleTask's workspace or crawler is not in a valid config.yaml (a reason word and a
    message), or None. Monocle's janitor says so in a log line and exits 0 having done nothing: the
    operator says it instead, before any Job."""
    workspaces = {item["name"]: item for item in yaml.safe_load(text)["workspaces"] if isinstance(item, dict)}
    if workspace is None:
        return None
    if workspace not in workspaces:
        known = ", ".join(sorted(workspaces)) or "none"
        return (
            "WorkspaceNotFound",
            f"workspace {workspace} is not in config.yaml of {source} (workspaces: {known})",
        )
    if crawler is None:
        return None
    crawlers = workspaces[workspace].get("crawlers") or []
    names = sorted(str(item.get("name")) for item in crawlers if isinstance(item, dict))
    if crawler not in names:
        known = ", ".join(names) or "none"
        return (
            "CrawlerNotFound",
            f"crawler {crawler} is not in workspace {workspace} of config.yaml in {source} "
            f"(crawlers: {known})",
        )
    return None


def secret_data_hash(key: bytes, *data: Mapping[str, str] | None) -> str:
    """A keyed hash of the Secrets' data (as stored, base64), for a pod-template annotation.

    Keyed with the generated crawler key, which only Secret readers know: whoever can
    read a Deployment cannot test guesses of a weak token against the annotation.
    Metadata is left out on purpose, so a label or annotation edit restarts nothing.
    """
    canonical = json.dumps([dict(d or {}) for d in data], sort_keys=True, separators=(",", ":"))
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()[:32]
