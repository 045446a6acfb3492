"""`AsyncTemporal`: the temporal API on `redis.asyncio.Redis`. The same operations as
`client.Temporal` (each written once in `temporalstore.ops`), awaited; see that class for
what each does."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import IO, Any

import redis.asyncio as aredis
from redis.exceptions import RedisError
from typing_extensions import Unpack

from temporalstore import ops, transfer
from temporalstore import types as t
from temporalstore.errors import translate

Setup = list[tuple[Any, ...]]


def _setup_hook(setup: Setup) -> Callable[[Any], Awaitable[None]]:
    async def hook(conn: Any) -> None:
        await conn.on_connect()
        for cmd in setup:
            await conn.send_command(*cmd)
            await conn.read_response()

    return hook


class AsyncSession:
    """`client.Session` for asyncio: a dedicated connection with a view, a branch or
    writer metadata of its own. Create it with `await AsyncSession.open(...)` (the
    `AsyncTemporal` methods do)."""

    def __init__(self, client: aredis.Redis) -> None:
        self.client = client

    @classmethod
    async def open(cls, parent: aredis.Redis, setup: Setup) -> AsyncSession:
        pool = parent.connection_pool
        kwargs = dict(pool.connection_kwargs)
        kwargs["redis_connect_func"] = _setup_hook(setup)
        own = aredis.BlockingConnectionPool(
            connection_class=pool.connection_class, max_connections=1, timeout=None, **kwargs
        )
        session = cls(aredis.Redis(connection_pool=own))
        try:
            await session.client.ping()
        except RedisError as e:
            await own.disconnect()
            raise translate(e) from e
        return session

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not callable(attr) or name == "pipeline":
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return await attr(*args, **kwargs)
            except RedisError as e:
                raise translate(e) from e

        return call

    async def close(self) -> None:
        await self.client.aclose()
        await self.client.connection_pool.disconnect()

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncTemporal:
    """The temporal API over a `redis.asyncio.Redis`."""

    def __init__(self, r: aredis.Redis) -> None:
        self.r = r

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> AsyncTemporal:
        return cls(aredis.Redis.from_url(url, **kwargs))

    async def _drive(self, op: ops.Op, conn: aredis.Redis | None = None) -> Any:
        conn = self.r if conn is None else conn
        try:
            cmd = next(op)
            while True:
                try:
                    reply = await conn.execute_command(*cmd)  # type: ignore[no-untyped-call]
                except RedisError as e:
                    raise translate(e) from e
                cmd = op.send(reply)
        except StopIteration as done:
            return done.value

    async def version(self) -> int:
        return int(await self._drive(ops.version()))

    async def seal(self, trigger: str = "", *, name: str | None = None, **metadata: Any) -> str:
        return str(await self._drive(ops.seal(trigger, name, metadata)))

    async def snapshots(self) -> dict[str, t.SnapshotInfo]:
        result: dict[str, t.SnapshotInfo] = await self._drive(ops.snapshots())
        return result

    async def unseal(self, snapshot_id: str) -> bool:
        return bool(await self._drive(ops.unseal(snapshot_id)))

    async def at_snapshot(self, snapshot_id: str) -> AsyncSession:
        return await self.at(snapshot=snapshot_id)

    async def at(
        self,
        *,
        version: int | None = None,
        time: int | float | datetime | None = None,
        snapshot: str | None = None,
        back: int | None = None,
    ) -> AsyncSession:
        if back is not None:
            version, back = await self.version() - back, None
        at = t.point(version=version, time=time, snapshot=snapshot, back=back)
        return await AsyncSession.open(self.r, [("TS.CHECKOUT", "AT", *at.args())])

    async def get_as_of(self, key: Any, at: t.Point | None = None, **where: Any) -> Any:
        return await self._drive(ops.get_as_of(key, t.point(at, **where)))

    async def history(self, key: Any, **options: Unpack[t.HistoryOptions]) -> list[t.HistoryEntry]:
        result: list[t.HistoryEntry] = await self._drive(ops.history_of(key, **options))
        return result

    async def revert(self, key: Any, to: t.Point | None = None, **where: Any) -> bool:
        return bool(await self._drive(ops.revert(key, t.point(to, **where))))

    async def restore(self, at: t.Point, match: str | None = None) -> int:
        return int(await self._drive(ops.restore(at, match)))

    async def diff(
        self, a: t.Point | str, b: t.Point | str, match: str | None = None
    ) -> dict[str, str]:
        result: dict[str, str] = await self._drive(ops.diff(a, b, match))
        return result

    async def branch(self, name: str, from_: t.Point | None = None) -> None:
        await self._drive(ops.branch(name, from_))

    async def drop_branch(self, name: str) -> None:
        await self._drive(ops.drop_branch(name))

    async def branches(self) -> dict[str, t.BranchInfo]:
        result: dict[str, t.BranchInfo] = await self._drive(ops.branches())
        return result

    async def switch(self, name: str) -> AsyncSession:
        return await AsyncSession.open(self.r, [ops.checkout(name)])

    async def merge(self, source: str, *, into: str | None = None, strategy: str = "fail") -> int:
        return int(await self._drive(ops.merge(source, into, strategy)))

    @asynccontextmanager
    async def writer(self, author: str, message: str | None = None) -> AsyncIterator[AsyncSession]:
        session = await AsyncSession.open(self.r, [ops.meta(author, message)])
        try:
            yield session
        finally:
            await session.close()

    async def create_table(self, name: str, **options: Any) -> None:
        await self._drive(ops.create_table(name, ops.table_options(**options)))

    async def alter_table(self, name: str, **options: Any) -> None:
        await self._drive(ops.alter_table(name, ops.table_options(**options)))

    async def tables(self) -> dict[str, t.TableInfo]:
        result: dict[str, t.TableInfo] = await self._drive(ops.tables())
        return result

    async def table_info(self, name: str) -> t.TableInfo:
        result: t.TableInfo = await self._drive(ops.table_info(name))
        return result

    async def drop_table(self, name: str) -> None:
        await self._drive(ops.drop_table(name))

    async def export_snapshot(
        self,
        out: str | os.PathLike[str] | IO[bytes],
        **options: Unpack[t.ExportOptions],
    ) -> int:
        """`Temporal.export_snapshot` (the file is written with blocking writes)."""
        sess = await AsyncSession.open(self.r, transfer.select(options.get("db")))
        async with sess:
            if isinstance(out, str | os.PathLike):
                with open(out, "wb") as f:
                    return int(await self._drive(transfer.export_op(f, **options), sess.client))
            return int(await self._drive(transfer.export_op(out, **options), sess.client))

    async def import_snapshot(
        self,
        path: str | os.PathLike[str],
        **options: Unpack[t.ImportOptions],
    ) -> transfer.Imported:
        """`Temporal.import_snapshot`."""
        checked = transfer.check_file(path)
        plan = transfer.target(checked, os.path.basename(path), **options)
        if plan.branch is not None:
            await self.branch(plan.branch, t.Point(version=0))
        try:
            async with await AsyncSession.open(self.r, plan.setup) as sess:
                n = int(await self._drive(transfer.import_op(path, plan.replace), sess.client))
        except BaseException:
            if plan.branch is not None:
                await self.drop_branch(plan.branch)
            raise
        return transfer.Imported(plan.branch, plan.db, n)
