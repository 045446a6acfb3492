"""`MemoryObjectStore`: an `ObjectStore` in a dict, for tests of the flusher and
the durable log that run in-process, with no disk or network. It passes the same
contract suite as the directory and S3 stores (tests/test_objectstore.py)."""

from __future__ import annotations

from flusher.objectapi import ObjectStore, _check_key, _check_prefix


class MemoryObjectStore(ObjectStore):
    def __init__(self, name: str = "test") -> None:
        self.url = f"memory://{name}"
        self.objects: dict[str, bytes] = {}

    async def put(self, key: str, data: bytes) -> None:
        _check_key(key)
        self.objects[key] = bytes(data)

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        _check_key(key)
        if key in self.objects:
            return False
        self.objects[key] = bytes(data)
        return True

    async def get(self, key: str) -> bytes | None:
        _check_key(key)
        return self.objects.get(key)

    async def list(self, prefix: str) -> list[str]:
        _check_prefix(prefix)
        return sorted(k for k in self.objects if k.startswith(prefix))

    async def delete(self, key: str) -> None:
        _check_key(key)
        self.objects.pop(key, None)

    async def close(self) -> None:
        return None
