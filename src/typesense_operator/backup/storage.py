"""Where backups are kept: an S3-compatible bucket (through aiobotocore) or a mounted directory (a
PVC), behind one small interface. Thin adapters: no decisions here.

Every failure is a :class:`StorageError` that names the storage, the object and what the server
said, never a credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

__all__ = [
    "PART_SIZE",
    "DirectoryStorage",
    "S3Settings",
    "S3Storage",
    "Storage",
    "StorageError",
    "open_storage",
]

PART_SIZE = 64 * 1024 * 1024
"""Files larger than this go up in parts of this size (S3 takes up to 5 GiB in one request; parts
keep memory flat and let a failed part be retried alone)."""
_CHUNK = 1024 * 1024
T = TypeVar("T")


class StorageError(Exception):
    """Storage refused or could not be reached; the message says which and why."""


class Storage(Protocol):
    """Objects under keys (``a/b/c``), relative to the backup location's root."""

    description: str
    """Where this is, for messages: ``s3://bucket/prefix`` or the directory."""

    async def put_file(self, key: str, path: Path) -> tuple[int, str]:
        """Write the file at ``path`` as ``key``; the size and sha256 of what was sent (each file is
        read once: its checksum comes from the bytes that went up)."""
        ...

    async def put_bytes(self, key: str, data: bytes) -> None: ...
    async def get_file(self, key: str, path: Path) -> tuple[int, str]:
        """Write the object to ``path``; its size and sha256."""
        ...

    async def get_bytes(self, key: str) -> bytes | None:
        """The object, or None if there is none."""
        ...

    async def keys(self, prefix: str = "") -> list[str]: ...
    async def delete(self, keys: list[str]) -> None: ...
    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class S3Settings:
    """An S3-compatible endpoint and the credentials it takes (from the environment, never logged)."""

    endpoint: str | None
    """``https://host:port``; None for AWS itself."""
    region: str
    access_key: str
    secret_key: str
    ca_bundle: Path | None = None
    """Trusted besides the system's CAs (a private endpoint's)."""
    path_style: bool = True
    """Bucket in the path (``endpoint/bucket/key``), as most S3-compatible servers want."""


def _s3_message(error: Exception, what: str) -> str:
    """botocore's error, as a line: the code and HTTP status the server answered, or why it could
    not be reached. botocore never puts credentials in these."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = (response.get("Error") or {}).get("Code") or "error"
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        message = (response.get("Error") or {}).get("Message") or ""
        return f"{what}: {code} (HTTP {status}){': ' + message if message else ''}"
    return f"{what}: {error}"


class S3Storage:
    """A bucket and a prefix on an S3-compatible endpoint."""

    def __init__(self, settings: S3Settings, bucket: str, prefix: str) -> None:
        self.settings, self.bucket = settings, bucket
        self.prefix = prefix.strip("/")
        where = settings.endpoint or "AWS"
        self.description = f"s3://{bucket}/{self.prefix} at {where}"
        self.part_size = PART_SIZE
        self._client: Any = None
        self._stack = contextlib.AsyncExitStack()

    async def _open(self) -> Any:
        if self._client is None:
            # Imported here: only the backup command loads botocore, never an operator's process.
            from aiobotocore.session import get_session
            from botocore.config import Config

            verify: bool | str = True
            if self.settings.ca_bundle is not None:
                scratch = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="typesense-backup-"))
                try:
                    verify = str(_with_system_cas(self.settings.ca_bundle, Path(scratch)))
                except OSError as error:
                    bundle = self.settings.ca_bundle
                    raise StorageError(f"reading the CA bundle {bundle}: {error.strerror or error}") from None
            config = Config(
                s3={"addressing_style": "path" if self.settings.path_style else "auto"},
                retries={"max_attempts": 3, "mode": "standard"},
                connect_timeout=5,
                read_timeout=60,
            )
            creator = get_session().create_client(
                "s3",
                endpoint_url=self.settings.endpoint,
                region_name=self.settings.region,
                aws_access_key_id=self.settings.access_key,
                aws_secret_access_key=self.settings.secret_key,
                verify=verify,
                config=config,
            )
            self._client = await self._stack.enter_async_context(creator)
        return self._client

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    @contextlib.asynccontextmanager
    async def _call(self, what: str) -> AsyncIterator[None]:
        try:
            yield
        except StorageError:
            raise
        except Exception as error:  # botocore's and aiohttp's errors, in one message
            raise StorageError(_s3_message(error, f"{what} ({self.description})")) from None

    async def put_file(self, key: str, path: Path) -> tuple[int, str]:
        client = await self._open()
        target = self._key(key)
        size = (await asyncio.to_thread(path.stat)).st_size
        digest = hashlib.sha256()
        async with self._call(f"uploading {target}"):
            if size <= self.part_size:
                data = await asyncio.to_thread(path.read_bytes)
                digest.update(data)
                await client.put_object(Bucket=self.bucket, Key=target, Body=data)
                return len(data), digest.hexdigest()
            upload = await client.create_multipart_upload(Bucket=self.bucket, Key=target)
            upload_id = upload["UploadId"]
            try:
                parts, sent = [], 0
                with path.open("rb") as source:
                    number = 1
                    while chunk := source.read(self.part_size):
                        digest.update(chunk)
                        sent += len(chunk)
                        answer = await client.upload_part(
                            Bucket=self.bucket, Key=target, UploadId=upload_id, PartNumber=number, Body=chunk
                        )
                        parts.append({"PartNumber": number, "ETag": answer["ETag"]})
                        number += 1
                await client.complete_multipart_upload(
                    Bucket=self.bucket, Key=target, UploadId=upload_id, MultipartUpload={"Parts": parts}
                )
            except BaseException:
                with contextlib.suppress(Exception):
                    await client.abort_multipart_upload(Bucket=self.bucket, Key=target, UploadId=upload_id)
                raise
        return sent, digest.hexdigest()

    async def put_bytes(self, key: str, data: bytes) -> None:
        client = await self._open()
        async with self._call(f"uploading {self._key(key)}"):
            await client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    async def get_file(self, key: str, path: Path) -> tuple[int, str]:
        client = await self._open()
        digest, size = hashlib.sha256(), 0
        async with self._call(f"downloading {self._key(key)}"):
            answer = await client.get_object(Bucket=self.bucket, Key=self._key(key))
            async with answer["Body"] as body:
                with path.open("wb") as target:
                    while chunk := await body.read(_CHUNK):
                        target.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
        return size, digest.hexdigest()

    async def get_bytes(self, key: str) -> bytes | None:
        client = await self._open()
        async with self._call(f"downloading {self._key(key)}"):
            try:
                answer = await client.get_object(Bucket=self.bucket, Key=self._key(key))
            except client.exceptions.NoSuchKey:
                return None
            async with answer["Body"] as body:
                data: bytes = await body.read()
                return data

    async def keys(self, prefix: str = "") -> list[str]:
        client = await self._open()
        keys: list[str] = []
        start = self._key(prefix)
        strip = len(self.prefix) + 1 if self.prefix else 0
        async with self._call(f"listing {start or '/'}"):
            paginator = client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=self.bucket, Prefix=start):
                keys.extend(item["Key"][strip:] for item in page.get("Contents") or [])
        return sorted(keys)

    async def delete(self, keys: list[str]) -> None:
        client = await self._open()
        for start in range(0, len(keys), 1000):  # DeleteObjects takes 1000 keys at most
            batch = [{"Key": self._key(key)} for key in keys[start : start + 1000]]
            async with self._call(f"deleting {len(batch)} objects"):
                answer = await client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                )
            failed = answer.get("Errors") or []
            if failed:
                first = failed[0]
                said = f"{first.get('Code')}: {first.get('Message')}"
                raise StorageError(f"deleting {first.get('Key')} ({self.description}): {said}")

    async def aclose(self) -> None:
        await self._stack.aclose()
        self._client = None


def _with_system_cas(bundle: Path, into: Path) -> Path:
    """``bundle`` and the system's CAs in one file in ``into``: botocore takes one file, and a private
    CA is trusted besides the system's, not instead of them. Not beside the bundle: that is a mounted
    Secret, read-only."""
    import ssl

    paths = ssl.get_default_verify_paths()
    system = paths.cafile or paths.openssl_cafile
    parts = [bundle.read_bytes()]
    if system and os.path.exists(system):
        parts.append(Path(system).read_bytes())
    combined = into / "ca-bundle.pem"
    combined.write_bytes(b"\n".join(parts))
    return combined


def _copy_hashing(source: Path, target: Path) -> tuple[int, str]:
    """Copy ``source`` to ``target``; the size and sha256 of what was copied."""
    digest, size = hashlib.sha256(), 0
    with source.open("rb") as reading, target.open("wb") as writing:
        while chunk := reading.read(_CHUNK):
            writing.write(chunk)
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


class DirectoryStorage:
    """A directory (a mounted volume): keys are paths under it. Files appear whole (written aside,
    then renamed)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.description = str(root)

    def _path(self, key: str) -> Path:
        return self.root / key

    def _place(self, key: str, write: Callable[[Path], T]) -> T:
        target = self._path(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            written = write(partial)
            partial.rename(target)
        except OSError as error:
            raise StorageError(f"writing {key} ({self.description}): {error.strerror or error}") from None
        return written

    async def put_file(self, key: str, path: Path) -> tuple[int, str]:
        return self._place(key, lambda partial: _copy_hashing(path, partial))

    async def put_bytes(self, key: str, data: bytes) -> None:
        self._place(key, lambda partial: partial.write_bytes(data))

    async def get_file(self, key: str, path: Path) -> tuple[int, str]:
        try:
            return _copy_hashing(self._path(key), path)
        except OSError as error:
            raise StorageError(f"reading {key} ({self.description}): {error.strerror or error}") from None

    async def get_bytes(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StorageError(f"reading {key} ({self.description}): {error.strerror or error}") from None

    async def keys(self, prefix: str = "") -> list[str]:
        start = self._path(prefix) if prefix else self.root
        if not start.exists():
            return []
        return sorted(
            path.relative_to(self.root).as_posix()
            for path in start.rglob("*")
            if path.is_file() and not path.name.endswith(".partial")
        )

    async def delete(self, keys: list[str]) -> None:
        for key in keys:
            try:
                self._path(key).unlink(missing_ok=True)
            except OSError as error:
                reason = error.strerror or error
                raise StorageError(f"deleting {key} ({self.description}): {reason}") from None
        for key in keys:  # folders left empty go too, the backup's own among them
            parent = self._path(key).parent
            while parent.is_relative_to(self.root) and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent

    async def aclose(self) -> None:
        return None


@contextlib.asynccontextmanager
async def open_storage(location: str, s3: S3Settings | None) -> AsyncIterator[Storage]:
    """The storage at ``location``: ``s3://bucket/prefix`` (with ``s3`` settings) or a directory."""
    storage: Storage
    if location.startswith("s3://"):
        if s3 is None:
            raise StorageError(f"{location} is an S3 location, and no S3 endpoint or credentials are set")
        bucket, _, prefix = location.removeprefix("s3://").partition("/")
        if not bucket:
            raise StorageError(f"{location} names no bucket")
        storage = S3Storage(s3, bucket, prefix)
    else:
        storage = DirectoryStorage(Path(location))
    try:
        yield storage
    finally:
        await storage.aclose()
