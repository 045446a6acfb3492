"""The object store contract: the `ObjectStore` interface, its errors and its key rules.

Everything that persists segments, checkpoints and the manifest talks to an `ObjectStore`;
its implementations are `flusher.objectstore` (a local directory, the fault wrapper, and
`open_object_store`, which chooses one by URL), `flusher.s3`, `flusher.memory` and
`flusher.metered`. This module imports none of them.

Keys are relative, slash-separated names such as ``segments/00000000000000000001.seg``.
Every component must be non-empty, must not be ``.`` or ``..``, and must not start with
``.tmp-`` (reserved for the local store's temporary files); a bad key is a programming error
and raises `ValueError`. Every backend lists keys in code-point order, which for `str` is the
same as S3's UTF-8 byte order.

Errors: `Unavailable` is retryable (network trouble, timeouts, 5xx, throttling, a full or
failing disk); `InvalidObjectStore` is not (bad URL, missing bucket, denied access). Messages
name the store by its URL and never contain credentials.

`put` and `put_if_absent` are not retried by a store itself: the caller retries with
backoff. A caller that retries `put_if_absent` after `Unavailable` must be ready for
``False`` when the earlier attempt did land (see `FaultyObjectStore.fail_after_put`).

A store instance belongs to the event loop that first uses it.
"""

from __future__ import annotations

import abc

__all__ = [
    "TEMP_PREFIX",
    "InvalidObjectStore",
    "ObjectStore",
    "ObjectStoreError",
    "Unavailable",
]

TEMP_PREFIX = ".tmp-"
"""Names of the local store's temporary files start with this; keys may not."""


class ObjectStoreError(Exception):
    """Base."""


class Unavailable(ObjectStoreError):
    """Retryable: network errors, timeouts, 5xx, throttling, outage."""


class InvalidObjectStore(ObjectStoreError):
    """Not retryable: bad URL, missing bucket, access denied."""


class ObjectStore(abc.ABC):
    """Flat key -> bytes storage with conditional create, prefix listing and delete."""

    url: str
    """The store's location for messages, e.g. ``s3://bucket/prefix`` or ``file:///dir``."""

    @abc.abstractmethod
    async def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, replacing any existing object atomically."""

    @abc.abstractmethod
    async def put_if_absent(self, key: str, data: bytes) -> bool:
        """Store `data` only if `key` does not exist: True if stored, False if it existed."""

    @abc.abstractmethod
    async def get(self, key: str) -> bytes | None:
        """The object's bytes, or None if `key` does not exist."""

    @abc.abstractmethod
    async def list(self, prefix: str) -> list[str]:
        """All keys starting with `prefix`, sorted."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Remove `key`; removing a missing key is not an error."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections; idempotent."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


# --------------------------------------------------------------------------- keys


def _check_key(key: str) -> list[str]:
    """The key's components; ValueError unless it is a well-formed relative key."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"object key must be a non-empty string, not {key!r}")
    parts = key.split("/")
    for part in parts:
        if part in ("", ".", "..") or part.startswith(TEMP_PREFIX) or "\x00" in part:
            raise ValueError(f"bad object key {key!r}")
    return parts


def _check_prefix(prefix: str) -> None:
    """ValueError unless `prefix` is "" or could begin a well-formed key."""
    if not isinstance(prefix, str):
        raise ValueError(f"list prefix must be a string, not {prefix!r}")
    if prefix:
        # Every complete component (all but the last, which may be partial) must be valid.
        *dirs, _last = prefix.split("/")
        for part in dirs:
            if part in ("", ".", "..") or part.startswith(TEMP_PREFIX):
                raise ValueError(f"bad list prefix {prefix!r}")
        if "\x00" in prefix:
            raise ValueError(f"bad list prefix {prefix!r}")
