"""The object stores of this package, and choosing one by URL (`open_object_store`).

The contract they keep (the `ObjectStore` interface, its errors, its key rules) is
`flusher.objectapi`'s, and its names are importable from here too:

- `LocalObjectStore` keeps each object as a file under a directory (``file://DIR``). Writes
  are crash-atomic: a temporary file in the same directory is written and fsynced, then
  renamed (`put`) or hard-linked (`put_if_absent`) into place, and the directory is fsynced.
  All blocking file-system calls run in `asyncio.to_thread`, so the event loop never blocks.
- `flusher.s3.S3ObjectStore` talks to S3 or an S3-compatible service (MinIO, moto) through
  one long-lived aiobotocore client (``s3://bucket/prefix``). Conditional creation uses
  ``PutObject`` with ``If-None-Match: *``. It is imported only when an ``s3://`` URL is
  opened: aiobotocore and botocore cost a server on local storage 20 MiB and half a second.
  It builds on `flusher.objectapi` and never imports this module.
- `FaultyObjectStore` wraps another store and injects latency, random errors, outages and
  "the PUT landed but reported failure" for tests.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import os
import random
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit

from flusher.objectapi import TEMP_PREFIX, _check_key, _check_prefix
from flusher.objectapi import InvalidObjectStore as InvalidObjectStore
from flusher.objectapi import ObjectStore as ObjectStore
from flusher.objectapi import ObjectStoreError as ObjectStoreError
from flusher.objectapi import Unavailable as Unavailable
from store.secrets import redact

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "FaultyObjectStore",
    "InvalidObjectStore",
    "LocalObjectStore",
    "ObjectStore",
    "ObjectStoreError",
    "Unavailable",
    "open_object_store",
]

T = TypeVar("T")

# --------------------------------------------------------------------------- local

# errnos that will not go away by retrying: configuration or layout problems.
_PERMANENT_ERRNOS = frozenset(
    {
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.EINVAL,
        errno.EXDEV,
        getattr(errno, "ENOTSUP", errno.EOPNOTSUPP),
        errno.EOPNOTSUPP,
    }
)


def _os_error(exc: OSError, url: str, op: str, key: str) -> ObjectStoreError:
    """Classify an OSError: permission and layout problems are permanent, the rest
    (ENOSPC, EIO, EDQUOT, ESTALE, EMFILE, ...) are retryable."""
    what = os.strerror(exc.errno) if exc.errno is not None else str(exc)
    name = errno.errorcode.get(exc.errno, "?") if exc.errno is not None else type(exc).__name__
    msg = f"{url}: {op} {key!r} failed: {name} ({what})"
    if exc.errno in _PERMANENT_ERRNOS:
        return InvalidObjectStore(msg)
    return Unavailable(msg)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalObjectStore(ObjectStore):
    """Objects as files under `directory` (created if missing)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        raw = os.fspath(directory)
        if not raw:
            raise InvalidObjectStore("file:// store needs a directory")
        root = Path(raw).expanduser().absolute()
        self.url = f"file://{root}"
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidObjectStore(
                f"{self.url}: cannot create directory: {os.strerror(exc.errno or 0)}"
            ) from exc
        if not root.is_dir():
            raise InvalidObjectStore(f"{self.url}: not a directory")
        if not os.access(root, os.W_OK | os.X_OK):
            raise InvalidObjectStore(f"{self.url}: directory is not writable")
        self.root = root

    def _path(self, key: str) -> Path:
        return self.root.joinpath(*_check_key(key))

    async def _run(self, op: str, key: str, fn: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(fn)
        except OSError as exc:
            raise _os_error(exc, self.url, op, key) from exc

    # -- blocking helpers, run in a worker thread

    def _make_parents(self, path: Path) -> None:
        """Create the directories between root and `path`, fsyncing each new entry's parent."""
        current = self.root
        for part in path.relative_to(self.root).parts[:-1]:
            child = current / part
            try:
                child.mkdir()
            except FileExistsError:
                if not child.is_dir():
                    raise NotADirectoryError(
                        errno.ENOTDIR, "a key is in the way", str(child)
                    ) from None
            else:
                _fsync_dir(current)
            current = child

    def _write_temp(self, path: Path, data: bytes) -> Path:
        self._make_parents(path)
        temp = path.parent / f"{TEMP_PREFIX}{uuid.uuid4().hex}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        os.close(fd)
        return temp

    def _put(self, path: Path, data: bytes) -> None:
        temp = self._write_temp(path, data)
        try:
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        _fsync_dir(path.parent)

    def _put_if_absent(self, path: Path, data: bytes) -> bool:
        temp = self._write_temp(path, data)
        try:
            try:
                os.link(temp, path)
            except FileExistsError:
                if path.is_dir():
                    raise IsADirectoryError(
                        errno.EISDIR, "a key prefix is in the way", str(path)
                    ) from None
                return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        _fsync_dir(path.parent)
        return True

    @staticmethod
    def _get(path: Path) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def _list(self, prefix: str) -> list[str]:
        directory, _, _ = prefix.rpartition("/")
        start = self.root.joinpath(*directory.split("/")) if directory else self.root
        keys: list[str] = []

        def fail(exc: OSError) -> None:
            if not isinstance(exc, (FileNotFoundError, NotADirectoryError)):
                raise exc

        for dirpath, dirnames, filenames in os.walk(start, onerror=fail):
            rel = os.path.relpath(dirpath, self.root)
            base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            # Prune subtrees that cannot contain a match.
            dirnames[:] = [
                d
                for d in dirnames
                if not d.startswith(TEMP_PREFIX)
                and ((base + d + "/").startswith(prefix) or prefix.startswith(base + d + "/"))
            ]
            for name in filenames:
                if name.startswith(TEMP_PREFIX):
                    continue
                key = base + name
                if key.startswith(prefix):
                    keys.append(key)
        keys.sort()
        return keys

    def _delete(self, path: Path) -> None:
        try:
            os.unlink(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return
        _fsync_dir(path.parent)

    # -- the interface

    async def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        await self._run("put", key, lambda: self._put(path, data))

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        return await self._run("put_if_absent", key, lambda: self._put_if_absent(path, data))

    async def get(self, key: str) -> bytes | None:
        path = self._path(key)
        return await self._run("get", key, lambda: self._get(path))

    async def list(self, prefix: str) -> list[str]:
        _check_prefix(prefix)
        return await self._run("list", prefix, lambda: self._list(prefix))

    async def delete(self, key: str) -> None:
        path = self._path(key)
        await self._run("delete", key, lambda: self._delete(path))

    async def close(self) -> None:
        return None


# --------------------------------------------------------------------------- faults


class FaultyObjectStore(ObjectStore):
    """Wraps `inner` and injects faults into the operations named in `ops` (all if None).

    Settable at any time:
    - `latency`: seconds slept before each call;
    - `jitter`: up to this many seconds more, drawn per call (so calls running at
      once end out of order);
    - `error_rate`: probability (0..1) that a call raises `Unavailable` before reaching
      `inner` (drawn from `random.Random(seed)`, so runs are reproducible);
    - `outage`: every call raises `Unavailable` without reaching `inner`;
    - `fail_after_put`: the next N `put`/`put_if_absent` calls complete on `inner` and
      then raise `Unavailable` ("the PUT landed but reported failure").

    Counters: `calls[op]` counts every call per operation (faulted or not); `puts` counts
    `put`/`put_if_absent` calls that reached `inner`; `faults[op]` counts injected errors.
    `close` is never faulted.
    """

    OPS = frozenset({"put", "put_if_absent", "get", "list", "delete"})

    def __init__(
        self,
        inner: ObjectStore,
        *,
        latency: float = 0.0,
        jitter: float = 0.0,
        error_rate: float = 0.0,
        outage: bool = False,
        fail_after_put: int = 0,
        ops: set[str] | frozenset[str] | None = None,
        seed: int = 0,
    ) -> None:
        self.inner = inner
        self.url = inner.url
        self.latency = latency
        self.jitter = jitter
        self.error_rate = error_rate
        self.outage = outage
        self.fail_after_put = fail_after_put
        self.ops = ops
        self.random = random.Random(seed)
        self.calls: collections.Counter[str] = collections.Counter()
        self.faults: collections.Counter[str] = collections.Counter()
        self.puts = 0

    def _applies(self, op: str) -> bool:
        return self.ops is None or op in self.ops

    async def _before(self, op: str, key: str) -> None:
        self.calls[op] += 1
        if not self._applies(op):
            return
        delay = self.latency + (self.random.random() * self.jitter if self.jitter > 0 else 0.0)
        if delay > 0:
            await asyncio.sleep(delay)
        if self.outage:
            self.faults[op] += 1
            raise Unavailable(f"{self.url}: {op} {key!r} failed: injected outage")
        if self.error_rate > 0 and self.random.random() < self.error_rate:
            self.faults[op] += 1
            raise Unavailable(f"{self.url}: {op} {key!r} failed: injected error")

    def _after_put(self, op: str, key: str) -> None:
        self.puts += 1
        if self.fail_after_put > 0 and self._applies(op):
            self.fail_after_put -= 1
            self.faults[op] += 1
            raise Unavailable(f"{self.url}: {op} {key!r} failed after landing: injected")

    async def put(self, key: str, data: bytes) -> None:
        await self._before("put", key)
        await self.inner.put(key, data)
        self._after_put("put", key)

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        await self._before("put_if_absent", key)
        stored = await self.inner.put_if_absent(key, data)
        self._after_put("put_if_absent", key)
        return stored

    async def get(self, key: str) -> bytes | None:
        await self._before("get", key)
        return await self.inner.get(key)

    async def list(self, prefix: str) -> list[str]:
        await self._before("list", prefix)
        return await self.inner.list(prefix)

    async def delete(self, key: str) -> None:
        await self._before("delete", key)
        await self.inner.delete(key)

    async def close(self) -> None:
        await self.inner.close()


# --------------------------------------------------------------------------- URLs


def open_object_store(url: str, endpoint_url: str | None = None) -> ObjectStore:
    """The store for `url`: ``file://DIR`` (relative or absolute; DIR is created) or
    ``s3://bucket[/prefix]`` (`endpoint_url` for S3-compatible services; ignored for files).
    Anything else raises `InvalidObjectStore`."""
    if not isinstance(url, str):
        raise InvalidObjectStore(f"object store URL must be a string, not {type(url).__name__}")
    if url.startswith("file://"):
        return LocalObjectStore(url[len("file://") :])
    if url.startswith("s3://"):
        parts = urlsplit(url)
        if "@" in url.split("/", 3)[2]:
            raise InvalidObjectStore(
                f"object store URL {redact(url)!r} must not contain credentials; "
                "use the AWS environment variables or files"
            )
        if parts.query or parts.fragment or "?" in url or "#" in url:
            raise InvalidObjectStore(f"object store URL {url!r} must not have a query or fragment")
        if not parts.netloc:
            raise InvalidObjectStore(f"object store URL {url!r} names no bucket")
        from flusher.s3 import S3ObjectStore

        return S3ObjectStore(parts.netloc, parts.path.strip("/"), endpoint_url)
    raise InvalidObjectStore(
        f"unsupported object store URL {redact(url)!r}: expected file://DIR or s3://bucket/prefix"
    )
