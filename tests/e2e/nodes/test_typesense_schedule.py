"""A TypesenseScheduledBackup of a real 3-node Typesense cluster (on real nodes) to a real S3
server (versitygw over HTTPS): its immediate backup completes; at the next minute the schedule fires
and a second one completes, and the first, beyond the retention (keep: 1), is deleted with its data
in the bucket, though the schedule is suspended by then; suspended, it makes no backup when the next
minute comes."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from operator_core.kube import Kube
from operator_testkit.assertions import wait_for_events
from operator_testkit.drivers.typesense_backups import (
    API,
    backup_ended,
    cluster_manifest,
    ready_cluster,
    s3_destination,
    store_s3_secrets,
)
from operator_testkit.fixtures import wait_until
from operator_testkit.operators import OperatorProcess
from operator_testkit.s3 import RunningS3

SCHEDULE = "nightly"
BACKUP_SECONDS = 15
"""Well over what a backup of this cluster takes here (3 s): a schedule made later in a minute is made
just after the next one starts, so that its immediate backup has ended when the schedule next fires
(else that time is skipped, and the test waits a minute more)."""


async def _early_in_a_minute() -> None:
    """Return at once if this minute has BACKUP_SECONDS left, else just after the next minute starts."""
    into = time.time() % 60
    if into > 60 - BACKUP_SECONDS:
        await asyncio.sleep(60 - into + 1)


async def _last_backup(kube: Kube, namespace: str, other_than: str | None, timeout: float) -> str:
    """The schedule's status.lastBackup once it names a backup other than ``other_than``."""

    async def made() -> str | None:
        found = await kube.get(API, "TypesenseScheduledBackup", SCHEDULE, namespace)
        last = ((found or {}).get("status") or {}).get("lastBackup")
        return last if last and last != other_than else None

    name: str = await wait_until(made, timeout=timeout, interval=0.5, what=f"a backup after {other_than}")  # type: ignore[assignment]
    return name


async def _completed(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    done = await backup_ended(kube, namespace, name)
    assert done["status"]["phase"] == "Completed", done["status"]
    return done


async def _names(kube: Kube, namespace: str) -> list[str]:
    labels = {"ts.opentelekomcloud.com/schedule": SCHEDULE}
    return sorted(
        b["metadata"]["name"] for b in await kube.list(API, "TypesenseBackup", namespace, labels=labels)
    )


def _files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()] if folder.exists() else []


@pytest.mark.timeout(480)
async def test_a_schedule_backs_up_on_time_prunes_beyond_its_retention_and_rests_while_suspended(
    kube: Kube,
    namespace: str,
    typesense_operator: OperatorProcess,
    backup_job_image: str,
    s3_server: RunningS3,
    bucket: str,
) -> None:
    await kube.create(cluster_manifest("search", namespace))
    await store_s3_secrets(kube, namespace, s3_server)
    await ready_cluster(kube, namespace, "search")
    await _early_in_a_minute()
    made = await kube.create(
        {
            "apiVersion": API,
            "kind": "TypesenseScheduledBackup",
            "metadata": {"name": SCHEDULE, "namespace": namespace},
            "spec": {
                "cluster": {"name": "search"},
                "schedule": "* * * * *",
                "immediate": True,
                "retention": {"keep": 1},
                "destination": s3_destination(s3_server, bucket),
            },
        }
    )
    created = datetime.fromisoformat(made["metadata"]["creationTimestamp"].replace("Z", "+00:00"))

    first = await _last_backup(kube, namespace, None, timeout=30)
    assert first == f"{SCHEDULE}-{created:%Y%m%d%H%M%S}", "the immediate backup is named by the creation time"
    stored = s3_server.storage / bucket / "typesense" / namespace / "search"
    assert (await _completed(kube, namespace, first))["status"]["location"].endswith(f"/search/{first}")
    assert (stored / first / "manifest.json").exists()

    second = await _last_backup(kube, namespace, first, timeout=150)
    assert second.endswith("00"), "made for the minute the schedule fired"
    # Suspended at once: the retention still prunes the first backup once the second is Completed.
    await kube.patch(API, "TypesenseScheduledBackup", SCHEDULE, namespace, {"spec": {"suspend": True}})

    async def suspended() -> datetime | None:
        found = await kube.get(API, "TypesenseScheduledBackup", SCHEDULE, namespace)
        for condition in ((found or {}).get("status") or {}).get("conditions") or []:
            if (condition["type"], condition["status"]) == ("Suspended", "True"):
                return datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00"))
        return None

    since: datetime = await wait_until(suspended, timeout=30, interval=0.5, what="the schedule suspended")  # type: ignore[assignment]
    await _completed(kube, namespace, second)

    async def first_pruned() -> bool:
        return await _names(kube, namespace) == [second] and not _files(stored / first)

    await wait_until(first_pruned, timeout=90, interval=1, what=f"{first} and its data pruned")
    (pruned,) = await wait_for_events(kube, namespace, "BackupPruned")
    assert pruned["message"] == f"deleted TypesenseBackup {first}: beyond the retention"
    assert (stored / second / "manifest.json").exists()

    # The next minute after the suspension, and a few seconds for a schedule that would have fired.
    next_minute = since.replace(second=0).timestamp() + 60
    await asyncio.sleep(max(0.0, next_minute - time.time()) + 5)
    assert datetime.now(UTC).timestamp() > next_minute
    assert await _names(kube, namespace) == [second], "suspended: no new backup"
    assert len(await wait_for_events(kube, namespace, "BackupScheduled")) == 2
