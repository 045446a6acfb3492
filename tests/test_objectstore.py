"""Contract tests for flusher.objectstore: one abstract suite run against a local
directory, S3 (moto's server over real HTTP) and the fault-injecting wrapper with no
faults; then backend-specific and fault-injection tests."""

from __future__ import annotations

import asyncio
import errno
import os
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import botocore.exceptions
import botocore.validate
import pytest

from flusher.memory import MemoryObjectStore
from flusher.objectapi import (
    TEMP_PREFIX,
    InvalidObjectStore,
    ObjectStore,
    ObjectStoreError,
    Unavailable,
)
from flusher.objectstore import FaultyObjectStore, LocalObjectStore, _os_error, open_object_store
from flusher.s3 import (
    EXPECT_CONTINUE_BYTES,
    SKIPPED_HANDLERS,
    USER_AGENT,
    S3ObjectStore,
    _s3_error,
)
from tests.conftest import free_port, make_bucket

T = TypeVar("T")

MIB = 1024 * 1024


async def gather_limited(aws: list[Awaitable[T]], limit: int = 32) -> list[T]:
    sem = asyncio.Semaphore(limit)

    async def one(aw: Awaitable[T]) -> T:
        async with sem:
            return await aw

    return await asyncio.gather(*(one(aw) for aw in aws))


class ObjectStoreContract:
    """Tests every ObjectStore must pass. Subclasses implement `create_store`."""

    URL_SCHEMES: tuple[str, ...] = ("file:///", "s3://")

    def create_store(self) -> ObjectStore:
        raise NotImplementedError

    def run(self, body: Callable[[ObjectStore], Awaitable[T]]) -> T:
        async def main() -> T:
            store = self.create_store()
            try:
                return await body(store)
            finally:
                await store.close()

        return asyncio.run(main())

    def test_roundtrip_empty_value(self) -> None:
        async def body(store: ObjectStore) -> None:
            await store.put("empty", b"")
            assert await store.get("empty") == b""
            assert await store.list("") == ["empty"]

        self.run(body)

    def test_roundtrip_5mib_value(self) -> None:
        data = random.Random(1).randbytes(5 * MIB)

        async def body(store: ObjectStore) -> None:
            await store.put("segments/big.seg", data)
            assert await store.get("segments/big.seg") == data

        self.run(body)

    def test_get_missing_is_none(self) -> None:
        async def body(store: ObjectStore) -> None:
            assert await store.get("missing") is None
            assert await store.get("no/such/dir/key") is None
            await store.put("a/b", b"x")
            assert await store.get("a") is None  # a "directory" is not an object
            assert await store.get("a/b/c") is None

        self.run(body)

    def test_put_overwrites(self) -> None:
        async def body(store: ObjectStore) -> None:
            await store.put("k", b"one")
            await store.put("k", b"two, longer")
            assert await store.get("k") == b"two, longer"
            await store.put("k", b"3")
            assert await store.get("k") == b"3"
            assert await store.list("") == ["k"]

        self.run(body)

    def test_put_if_absent(self) -> None:
        async def body(store: ObjectStore) -> None:
            assert await store.put_if_absent("manifest/1", b"first") is True
            assert await store.put_if_absent("manifest/1", b"second") is False
            assert await store.get("manifest/1") == b"first"
            assert await store.list("manifest/") == ["manifest/1"]
            # After a delete the key can be created again.
            await store.delete("manifest/1")
            assert await store.put_if_absent("manifest/1", b"third") is True
            assert await store.get("manifest/1") == b"third"

        self.run(body)

    def test_put_if_absent_after_put(self) -> None:
        async def body(store: ObjectStore) -> None:
            await store.put("k", b"plain")
            assert await store.put_if_absent("k", b"conditional") is False
            assert await store.get("k") == b"plain"

        self.run(body)

    def test_concurrent_put_if_absent_one_winner(self) -> None:
        async def body(store: ObjectStore) -> None:
            for round_ in range(3):
                key = f"race/{round_}"
                results = await asyncio.gather(
                    *(store.put_if_absent(key, f"writer {i}".encode()) for i in range(10))
                )
                assert results.count(True) == 1, results
                winner = results.index(True)
                assert await store.get(key) == f"writer {winner}".encode()

        self.run(body)

    def test_concurrent_puts_same_key(self) -> None:
        values = [bytes([i]) * (1000 + i) for i in range(10)]

        async def body(store: ObjectStore) -> None:
            await asyncio.gather(*(store.put("hot", v) for v in values))
            assert await store.get("hot") in values
            assert await store.list("") == ["hot"]

        self.run(body)

    def test_list_sorted_complete_over_1000_keys(self) -> None:
        keys = [f"segments/{i:020d}.seg" for i in range(1100)]
        decoys = ["segments-old/1", "segment", "other/segments/1", "s"]
        shuffled = keys + decoys
        random.Random(7).shuffle(shuffled)

        async def body(store: ObjectStore) -> None:
            await gather_limited([store.put(k, k.encode()) for k in shuffled])
            assert await store.list("segments/") == keys
            narrow = "segments/" + f"{990:020d}"[:-1]
            assert await store.list(narrow) == [f"segments/{i:020d}.seg" for i in range(990, 1000)]
            everything = await store.list("")
            assert everything == sorted(keys + decoys)
            assert await store.list("seg") == sorted([*keys, "segments-old/1", "segment"])

        self.run(body)

    def test_list_missing_prefix(self) -> None:
        async def body(store: ObjectStore) -> None:
            assert await store.list("") == []
            assert await store.list("nothing/") == []
            await store.put("a/b/c", b"1")
            assert await store.list("nothing/") == []
            assert await store.list("a/c") == []
            assert await store.list("a/b/c/") == []
            assert await store.list("b") == []

        self.run(body)

    def test_list_partial_names(self) -> None:
        async def body(store: ObjectStore) -> None:
            for k in ["ckpt/10", "ckpt/2", "ckpt/100", "ckpt-x", "ckpt2/a", "c"]:
                await store.put(k, b"")
            assert await store.list("ckpt/1") == ["ckpt/10", "ckpt/100"]
            assert await store.list("ckpt") == [
                "ckpt-x",
                "ckpt/10",
                "ckpt/100",
                "ckpt/2",
                "ckpt2/a",
            ]
            assert await store.list("c") == [
                "c",
                "ckpt-x",
                "ckpt/10",
                "ckpt/100",
                "ckpt/2",
                "ckpt2/a",
            ]

        self.run(body)

    def test_delete(self) -> None:
        async def body(store: ObjectStore) -> None:
            await store.put("dir/k", b"v")
            await store.put("dir/other", b"w")
            await store.delete("dir/k")
            assert await store.get("dir/k") is None
            assert await store.list("dir/") == ["dir/other"]
            await store.delete("dir/k")  # again: fine
            await store.delete("never/existed")
            await store.delete("dir")  # a "directory", not an object: fine
            assert await store.get("dir/other") == b"w"

        self.run(body)

    def test_nested_keys(self) -> None:
        keys = [
            "a/b/c/d/e/f.seg",
            "a/b/x",
            "a/y",
            "top",
            "unicode/ключ ü €.bin",
            "dots/v1.2.3/name.with.dots",
        ]

        async def body(store: ObjectStore) -> None:
            for k in keys:
                await store.put(k, k.encode())
            for k in keys:
                assert await store.get(k) == k.encode()
            assert await store.list("") == sorted(keys)
            assert await store.list("a/") == ["a/b/c/d/e/f.seg", "a/b/x", "a/y"]
            assert await store.list("a/b/c/") == ["a/b/c/d/e/f.seg"]

        self.run(body)

    def test_bad_keys_rejected(self) -> None:
        async def body(store: ObjectStore) -> None:
            for bad in ["", "/abs", "a//b", "a/", "../up", "a/./b", "a/../b", f"x/{TEMP_PREFIX}1"]:
                with pytest.raises(ValueError):
                    await store.put(bad, b"")
                with pytest.raises(ValueError):
                    await store.get(bad)
            with pytest.raises(ValueError):
                await store.list("../")

        self.run(body)

    def test_url_and_close_idempotent(self) -> None:
        async def body(store: ObjectStore) -> None:
            assert store.url.startswith(self.URL_SCHEMES)
            await store.close()
            await store.close()

        self.run(body)

    # -- the fault-injecting wrapper around this backend

    def test_faulty_outage(self) -> None:
        async def body(store: ObjectStore) -> None:
            faulty = FaultyObjectStore(store)
            await faulty.put("k", b"v")
            faulty.outage = True
            with pytest.raises(Unavailable):
                await faulty.put("k2", b"v")
            with pytest.raises(Unavailable):
                await faulty.put_if_absent("k3", b"v")
            with pytest.raises(Unavailable):
                await faulty.get("k")
            with pytest.raises(Unavailable):
                await faulty.list("")
            with pytest.raises(Unavailable):
                await faulty.delete("k")
            assert await store.list("") == ["k"]  # nothing reached the inner store
            faulty.outage = False
            assert await faulty.get("k") == b"v"
            assert faulty.calls["get"] == 2
            assert faulty.faults["get"] == 1
            assert faulty.puts == 1

        self.run(body)

    def test_faulty_fail_after_put(self) -> None:
        async def body(store: ObjectStore) -> None:
            faulty = FaultyObjectStore(store, fail_after_put=2)
            with pytest.raises(Unavailable):
                await faulty.put("a", b"landed")
            assert await store.get("a") == b"landed"
            with pytest.raises(Unavailable):
                await faulty.put_if_absent("b", b"landed too")
            assert await store.get("b") == b"landed too"
            # The retry of the conditional create finds its own earlier write.
            assert await faulty.put_if_absent("b", b"landed too") is False
            await faulty.put("c", b"fine")
            assert faulty.fail_after_put == 0
            assert faulty.puts == 4
            assert await faulty.list("") == ["a", "b", "c"]

        self.run(body)

    def test_faulty_error_rate(self) -> None:
        async def body(store: ObjectStore) -> None:
            faulty = FaultyObjectStore(store, error_rate=1.0)
            for i in range(20):
                with pytest.raises(Unavailable):
                    await faulty.put(f"k{i}", b"v")
                with pytest.raises(Unavailable):
                    await faulty.get(f"k{i}")
            assert faulty.puts == 0
            assert await store.list("") == []
            faulty.error_rate = 0.5
            outcomes = []
            for i in range(40):
                try:
                    await faulty.put(f"k{i:02d}", b"v")
                    outcomes.append(True)
                except Unavailable:
                    outcomes.append(False)
            assert 0 < outcomes.count(True) < 40
            assert len(await store.list("")) == outcomes.count(True)

        self.run(body)

    def test_faulty_latency(self) -> None:
        async def body(store: ObjectStore) -> None:
            faulty = FaultyObjectStore(store, latency=0.2)
            start = time.monotonic()
            await faulty.put("k", b"v")
            assert await faulty.get("k") == b"v"
            assert time.monotonic() - start >= 0.4

        self.run(body)

    def test_faulty_ops_restriction(self) -> None:
        async def body(store: ObjectStore) -> None:
            faulty = FaultyObjectStore(store, outage=True, ops={"put", "put_if_absent"})
            with pytest.raises(Unavailable):
                await faulty.put("k", b"v")
            await store.put("k", b"inner")
            assert await faulty.get("k") == b"inner"
            assert await faulty.list("") == ["k"]
            await faulty.delete("k")
            assert faulty.calls == {"put": 1, "get": 1, "list": 1, "delete": 1}

        self.run(body)


# --------------------------------------------------------------------------- local


class TestLocalObjectStore(ObjectStoreContract):
    @pytest.fixture(autouse=True)
    def _root(self, tmp_path: Path) -> None:
        self.root = tmp_path / "store" / "data"

    def create_store(self) -> ObjectStore:
        return open_object_store(f"file://{self.root}")

    def temp_files(self) -> list[Path]:
        return [p for p in self.root.rglob("*") if p.name.startswith(TEMP_PREFIX)]

    def test_files_land_under_directory(self) -> None:
        async def body(store: ObjectStore) -> None:
            assert isinstance(store, LocalObjectStore)
            assert store.url == f"file://{self.root}"
            await store.put("segments/00000000000000000001.seg", b"payload")
            assert await store.put_if_absent("manifest/000001.json", b"{}") is True
            assert (self.root / "segments" / "00000000000000000001.seg").read_bytes() == (
                b"payload"
            )
            assert (self.root / "manifest" / "000001.json").read_bytes() == b"{}"

        self.run(body)

    def test_no_temp_files_remain(self) -> None:
        async def body(store: ObjectStore) -> None:
            await gather_limited([store.put(f"d/{i}", b"x" * i) for i in range(50)])
            await asyncio.gather(*(store.put_if_absent("d/race", bytes([i])) for i in range(10)))
            assert await store.put_if_absent("d/1", b"again") is False
            await store.put("d/1", b"replaced")
            assert self.temp_files() == []
            # A leftover temp file (a crash mid-put) is never listed as a key.
            (self.root / "d" / f"{TEMP_PREFIX}leftover").write_bytes(b"junk")
            assert len(await store.list("d/")) == 51
            assert all(TEMP_PREFIX not in k for k in await store.list(""))

        self.run(body)

    def test_directory_created_and_relative_url(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)
        store = open_object_store("file://rel/dir")
        assert isinstance(store, LocalObjectStore)
        assert (tmp_path / "rel" / "dir").is_dir()
        assert store.url == f"file://{tmp_path / 'rel' / 'dir'}"
        asyncio.run(store.put("k", b"v"))
        assert (tmp_path / "rel" / "dir" / "k").read_bytes() == b"v"

    def test_directory_is_a_file(self, tmp_path: Path) -> None:
        (tmp_path / "f").write_bytes(b"")
        with pytest.raises(InvalidObjectStore):
            open_object_store(f"file://{tmp_path / 'f'}")
        with pytest.raises(InvalidObjectStore):
            open_object_store(f"file://{tmp_path / 'f' / 'sub'}")

    def test_key_layout_conflicts_are_invalid(self) -> None:
        async def body(store: ObjectStore) -> None:
            await store.put("a", b"file")
            with pytest.raises(InvalidObjectStore):
                await store.put("a/b", b"under a file")
            await store.put("d/e", b"x")
            with pytest.raises(InvalidObjectStore):
                await store.put("d", b"over a directory")
            with pytest.raises(InvalidObjectStore):
                await store.put_if_absent("d", b"over a directory")
            assert self.temp_files() == []

        self.run(body)

    def test_does_not_block_event_loop(self) -> None:
        async def body(store: ObjectStore) -> None:
            ticks = 0
            stop = False

            async def ticker() -> None:
                nonlocal ticks
                while not stop:
                    ticks += 1
                    await asyncio.sleep(0)

            task = asyncio.create_task(ticker())
            await gather_limited([store.put(f"k{i}", os.urandom(256 * 1024)) for i in range(16)])
            stop = True
            await task
            assert ticks > 16

        self.run(body)


def test_os_error_classification() -> None:
    for code in (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.ESTALE, errno.EMFILE):
        err = _os_error(OSError(code, os.strerror(code)), "file:///x", "put", "k")
        assert isinstance(err, Unavailable), code
    for code in (errno.EACCES, errno.EPERM, errno.EROFS):
        err = _os_error(OSError(code, os.strerror(code)), "file:///x", "put", "k")
        assert isinstance(err, InvalidObjectStore), code
    err = _os_error(PermissionError(errno.EACCES, "denied"), "file:///x", "get", "k")
    assert "file:///x" in str(err) and "EACCES" in str(err)


def test_local_path_through_a_file_is_invalid(tmp_path: Path) -> None:
    """A storage directory that cannot exist (a file is in the way) is a configuration
    error, not a retryable one (this holds for root too, unlike permissions)."""
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(InvalidObjectStore):
        store = open_object_store(f"file://{tmp_path / 'file' / 's'}")
        asyncio.run(store.put("k", b"v"))


# --------------------------------------------------------------------------- S3


class TestS3ObjectStore(ObjectStoreContract):
    @pytest.fixture(autouse=True)
    def _bucket(self, moto_s3: str) -> None:
        self.endpoint = moto_s3
        self.bucket = make_bucket(moto_s3)

    def create_store(self) -> ObjectStore:
        return open_object_store(f"s3://{self.bucket}/tenant/a", endpoint_url=self.endpoint)

    def test_url_and_prefix(self) -> None:
        store = self.create_store()
        assert isinstance(store, S3ObjectStore)
        assert store.url == f"s3://{self.bucket}/tenant/a"
        assert store.prefix == "tenant/a/"
        bare = open_object_store(f"s3://{self.bucket}", endpoint_url=self.endpoint)
        assert isinstance(bare, S3ObjectStore)
        assert (bare.url, bare.prefix) == (f"s3://{self.bucket}", "")

    def test_prefixes_isolate_stores(self) -> None:
        async def main() -> None:
            a = open_object_store(f"s3://{self.bucket}/p/a", endpoint_url=self.endpoint)
            b = open_object_store(f"s3://{self.bucket}/p/ab/", endpoint_url=self.endpoint)
            root = open_object_store(f"s3://{self.bucket}", endpoint_url=self.endpoint)
            try:
                await a.put("k", b"a")
                await b.put("k", b"b")
                assert await a.list("") == ["k"]
                assert await b.list("") == ["k"]
                assert await a.get("k") == b"a"
                assert await root.list("") == ["p/a/k", "p/ab/k"]
                assert await root.get("p/ab/k") == b"b"
                await a.delete("k")
                assert await b.get("k") == b"b"
            finally:
                for s in (a, b, root):
                    await s.close()

        asyncio.run(main())

    def test_open_creates_one_client(self) -> None:
        async def main() -> None:
            store = S3ObjectStore(self.bucket, "", self.endpoint)
            await store.open()
            client = store._client
            assert client is not None
            await asyncio.gather(*(store.put(f"k{i}", b"v") for i in range(20)))
            assert store._client is client
            await store.close()
            assert store._client is None
            with pytest.raises(ObjectStoreError):
                await store.get("k1")

        asyncio.run(main())

    def test_lazy_client_under_concurrency(self) -> None:
        async def main() -> None:
            store = S3ObjectStore(self.bucket, "", self.endpoint)
            try:
                # Many first calls at once create exactly one client.
                await asyncio.gather(*(store.get(f"k{i}") for i in range(10)))
                assert store._client is not None
            finally:
                await store.close()

        asyncio.run(main())

    def test_missing_bucket_is_invalid(self) -> None:
        async def main() -> None:
            store = open_object_store("s3://no-such-bucket-here/x", endpoint_url=self.endpoint)
            try:
                with pytest.raises(InvalidObjectStore, match="NoSuchBucket"):
                    await store.put("k", b"v")
                with pytest.raises(InvalidObjectStore):
                    await store.put_if_absent("k", b"v")
                with pytest.raises(InvalidObjectStore):
                    await store.get("k")
                with pytest.raises(InvalidObjectStore):
                    await store.list("")
            finally:
                await store.close()

        asyncio.run(main())

    def test_unreachable_endpoint_is_unavailable_quickly(self) -> None:
        async def main() -> None:
            store = open_object_store(
                f"s3://{self.bucket}", endpoint_url=f"http://127.0.0.1:{free_port()}"
            )
            try:
                start = time.monotonic()
                with pytest.raises(Unavailable):
                    await store.put("k", b"v")
                with pytest.raises(Unavailable):
                    await store.get("k")
                with pytest.raises(Unavailable):
                    await store.list("")
                assert time.monotonic() - start < 5.0
            finally:
                await store.close()

        asyncio.run(main())

    def test_concurrent_puts_same_key(self) -> None:
        """As the contract's, except that a PUT moto answers 500 (Unavailable) is
        tried again, as the flusher does: moto closes an overwritten key's buffer
        while another thread still answers for it, so PUTs of one key at once can
        fail there (once in 12 runs with PUTs without ``Expect: 100-continue``,
        none in 12 with it, which spread them out); S3 answers each. The server
        never PUTs one key twice at once (segments and manifests have names of
        their own)."""
        values = [bytes([i]) * (1000 + i) for i in range(10)]
        failed: list[bytes] = []

        async def put(store: ObjectStore, value: bytes) -> None:
            for _attempt in range(5):
                try:
                    await store.put("hot", value)
                    return
                except Unavailable:
                    failed.append(value)
            raise AssertionError("moto failed a PUT five times")

        async def body(store: ObjectStore) -> None:
            await asyncio.gather(*(put(store, v) for v in values))
            assert await store.get("hot") in values
            assert await store.list("") == ["hot"]

        self.run(body)
        assert len(failed) < len(values)

    def test_put_headers(self) -> None:
        """A segment-sized PUT goes without ``Expect: 100-continue`` and without a
        CRC32 header, with our fixed User-Agent; a body of EXPECT_CONTINUE_BYTES still
        waits for ``100 Continue``; both are stored as sent."""

        async def main() -> None:
            store = S3ObjectStore(self.bucket, "h", self.endpoint)
            await store.open()
            client = store._client
            assert client is not None
            sent: list[dict[str, str]] = []

            def seen(request: Any, **kwargs: Any) -> None:
                sent.append(
                    {
                        k.lower(): v.decode() if isinstance(v, bytes) else str(v)
                        for k, v in request.headers.items()
                    }
                )

            client.meta.events.register_last("before-send.s3.PutObject", seen)
            big = os.urandom(EXPECT_CONTINUE_BYTES)
            try:
                assert await store.put_if_absent("small", b"x" * 4000)
                assert await store.put_if_absent("big", big)
                assert await store.get("small") == b"x" * 4000
                assert await store.get("big") == big
            finally:
                await store.close()
            small, large = sent
            assert "expect" not in small and not any("checksum" in k for k in small)
            assert small["if-none-match"] == "*"
            assert not any(k.startswith("amz-sdk-") for k in small)  # SKIPPED_HANDLERS
            assert small["user-agent"] == f"{USER_AGENT} botocore/{botocore.__version__}"
            assert large["expect"] == "100-continue"

        asyncio.run(main())

    def test_skipped_handlers_are_gone(self) -> None:
        """The client runs none of `SKIPPED_HANDLERS` and validates no parameters;
        put-if-absent, get, list and delete still answer as before."""

        async def main() -> None:
            store = S3ObjectStore(self.bucket, "idle", self.endpoint)
            await store.open()
            client = store._client
            assert client is not None
            called: list[str] = []

            def spy(event_name: str, **kwargs: Any) -> None:
                called.append(event_name)

            client.meta.events.register("before-parameter-build.s3", spy)
            client.meta.events.register("before-call.s3", spy)
            try:
                for op in ("PutObject", "GetObject", "ListObjectsV2", "DeleteObject"):
                    for event in (
                        f"before-parameter-build.s3.{op}",
                        f"before-call.s3.{op}",
                        f"request-created.s3.{op}",
                    ):
                        handlers = client.meta.events._emitter._handlers.prefix_search(event)
                        assert not SKIPPED_HANDLERS.intersection(handlers), event
                # botocore wraps its serializer in a validating one unless told not to.
                assert not isinstance(
                    client._serializer, botocore.validate.ParamValidationDecorator
                )
                assert await store.put_if_absent("k", b"v")
                assert not await store.put_if_absent("k", b"w")
                assert await store.get("k") == b"v"
                assert await store.list("") == ["k"]
                await store.delete("k")
                assert await store.get("k") is None
            finally:
                await store.close()
            assert "before-call.s3.PutObject" in called  # the events still fire

        asyncio.run(main())

    def test_missing_credentials_are_invalid(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

        async def main() -> None:
            store = open_object_store(f"s3://{self.bucket}", endpoint_url=self.endpoint)
            try:
                with pytest.raises(InvalidObjectStore, match="NoCredentialsError"):
                    await store.get("k")
            finally:
                await store.close()

        asyncio.run(main())

    def test_unknown_profile_is_invalid(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("AWS_PROFILE", "no-such-profile")

        async def main() -> None:
            store = open_object_store(f"s3://{self.bucket}", endpoint_url=self.endpoint)
            try:
                with pytest.raises(InvalidObjectStore, match="ProfileNotFound"):
                    await store.get("k")
            finally:
                await store.close()

        asyncio.run(main())

    @pytest.mark.parametrize(
        ("default_region", "region", "expected"),
        [
            ("eu-west-2", "ap-south-1", "eu-west-2"),
            (None, "ap-south-1", "ap-south-1"),
            (None, None, "us-east-1"),
        ],
    )
    def test_region_from_environment(
        self,
        monkeypatch: pytest.MonkeyPatch,
        default_region: str | None,
        region: str | None,
        expected: str,
    ) -> None:
        for name, value in (("AWS_DEFAULT_REGION", default_region), ("AWS_REGION", region)):
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, value)

        async def main() -> str:
            store = S3ObjectStore(self.bucket, "", self.endpoint)
            try:
                await store.open()
                assert store._client is not None
                return str(store._client.meta.region_name)
            finally:
                await store.close()

        assert asyncio.run(main()) == expected

    def test_no_credentials_in_messages(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "SeCrEtKeY-do-not-print")

        async def main() -> None:
            store = open_object_store("s3://no-such-bucket-here", endpoint_url=self.endpoint)
            try:
                with pytest.raises(InvalidObjectStore) as info:
                    await store.get("k")
                assert "SeCrEtKeY" not in str(info.value)
            finally:
                await store.close()

        asyncio.run(main())


def test_s3_error_classification() -> None:
    def client_error(code: str, status: int) -> botocore.exceptions.ClientError:
        return botocore.exceptions.ClientError(
            {
                "Error": {"Code": code, "Message": "m"},
                "ResponseMetadata": {"HTTPStatusCode": status},
            },
            "PutObject",
        )

    unavailable = [
        client_error("SlowDown", 503),
        client_error("InternalError", 500),
        client_error("ServiceUnavailable", 503),
        client_error("ConditionalRequestConflict", 409),
        client_error("RequestTimeout", 400),
        client_error("", 502),
        client_error("TooManyRequests", 429),
        botocore.exceptions.EndpointConnectionError(endpoint_url="http://h"),
        botocore.exceptions.ReadTimeoutError(endpoint_url="http://h"),
        botocore.exceptions.ConnectTimeoutError(endpoint_url="http://h"),
        ConnectionResetError(errno.ECONNRESET, "reset"),
        TimeoutError(),
    ]
    invalid = [
        client_error("NoSuchBucket", 404),
        client_error("AccessDenied", 403),
        client_error("InvalidAccessKeyId", 403),
        client_error("SignatureDoesNotMatch", 403),
        client_error("PermanentRedirect", 301),
        client_error("EntityTooLarge", 400),
        botocore.exceptions.NoCredentialsError(),
    ]
    for exc in unavailable:
        assert isinstance(_s3_error(exc, "s3://b", "put", "k"), Unavailable), exc
    for exc in invalid:
        assert isinstance(_s3_error(exc, "s3://b", "put", "k"), InvalidObjectStore), exc
    msg = str(_s3_error(client_error("AccessDenied", 403), "s3://b/p", "get", "seg/1"))
    assert msg == "s3://b/p: get 'seg/1' failed: AccessDenied (HTTP 403)"


# --------------------------------------------------------------------------- wrapper


class TestFaultyObjectStoreContract(ObjectStoreContract):
    """The wrapper with no faults set is a transparent ObjectStore."""

    @pytest.fixture(autouse=True)
    def _root(self, tmp_path: Path) -> None:
        self.root = tmp_path / "inner"

    def create_store(self) -> ObjectStore:
        return FaultyObjectStore(LocalObjectStore(self.root))


# --------------------------------------------------------------------------- memory


class TestMemoryObjectStore(ObjectStoreContract):
    """The in-memory store the flusher and durable-log tests run on."""

    URL_SCHEMES = ("memory://",)

    def create_store(self) -> ObjectStore:
        return MemoryObjectStore()


def test_faulty_error_rate_is_seeded() -> None:
    async def outcomes(tmp: Path) -> list[bool]:
        faulty = FaultyObjectStore(LocalObjectStore(tmp), error_rate=0.3, seed=42)
        out = []
        for i in range(30):
            try:
                await faulty.get(f"k{i}")
                out.append(True)
            except Unavailable:
                out.append(False)
        return out

    import tempfile

    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        assert asyncio.run(outcomes(Path(a))) == asyncio.run(outcomes(Path(b)))


# --------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    "url",
    [
        "",
        "file://",
        "s3://",
        "s3:///prefix",
        "s3://Bad_Bucket/x",
        "s3://ab",
        "s3://bucket/a/../b",
        "s3://bucket/p?x=1",
        "http://bucket/p",
        "gs://bucket/p",
        "/plain/path",
        "s3:/bucket",
    ],
)
def test_bad_urls_are_invalid(url: str) -> None:
    with pytest.raises(InvalidObjectStore):
        open_object_store(url)


def test_bad_endpoint_is_invalid() -> None:
    with pytest.raises(InvalidObjectStore):
        open_object_store("s3://bucket/p", endpoint_url="localhost:9000")


def test_credentials_in_url_are_rejected_unprinted() -> None:
    with pytest.raises(InvalidObjectStore) as info:
        open_object_store("s3://AKIAEXAMPLE:VerySecret123@bucket/prefix")
    assert "VerySecret123" not in str(info.value)
    assert "AKIAEXAMPLE" not in str(info.value)
    with pytest.raises(InvalidObjectStore) as info:
        open_object_store("s3://bucket/p", endpoint_url="ftp://user:VerySecret123@host")
    assert "VerySecret123" not in str(info.value)
