"""`Temporal`: the temporal API on a blocking `redis.Redis`.

Every operation is one generator of `temporalstore.ops`, driven here over the client's
pool. What depends on a connection's own state (a read-only view, a branch checked out,
writer metadata) gets a `Session`: a dedicated connection that sets that state up on
connect, so it is never a shared pool connection and survives a reconnect.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import IO, Any

import redis
from redis.exceptions import RedisError
from typing_extensions import Unpack

from temporalstore import ops, transfer
from temporalstore import types as t
from temporalstore.errors import translate

Setup = list[tuple[Any, ...]]


def _setup_hook(setup: Setup) -> Callable[[Any], None]:
    """A redis-py `redis_connect_func`: the usual handshake, then the session's commands."""

    def hook(conn: Any) -> None:
        conn.on_connect()
        for cmd in setup:
            conn.send_command(*cmd)
            conn.read_response()

    return hook


class Session:
    """A dedicated connection carrying state of its own (a view, a branch, writer metadata).

    Every redis-py method works on it (`get`, `hgetall`, `pipeline`, ...); error replies
    of the temporal API come back as this package's exceptions (a write through a view
    raises `ReadOnlyViewError`). Close it, or use it as a context manager.
    """

    def __init__(self, parent: redis.Redis, setup: Setup) -> None:
        pool = parent.connection_pool
        kwargs = dict(pool.connection_kwargs)
        kwargs["redis_connect_func"] = _setup_hook(setup)
        # One connection, waited for rather than refused, so pipelines and threads share it.
        own = redis.BlockingConnectionPool(  # type: ignore[no-untyped-call]
            connection_class=pool.connection_class, max_connections=1, timeout=None, **kwargs
        )
        self.client = redis.Redis(connection_pool=own)
        try:
            self.client.ping()  # connect now: a missing branch or snapshot fails here
        except RedisError as e:
            own.disconnect()
            raise translate(e) from e

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except RedisError as e:
                raise translate(e) from e

        return call

    def close(self) -> None:
        self.client.close()
        self.client.connection_pool.disconnect()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Temporal:
    """The temporal API over a `redis.Redis` (any protocol, decoded or not).

    ts = Temporal(redis.Redis())
    sid = ts.seal("before-edit", episode=7)
    with ts.at_snapshot(sid) as view:
        view.get("plan")
    """

    def __init__(self, r: redis.Redis) -> None:
        self.r = r

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Temporal:
        return cls(redis.Redis.from_url(url, **kwargs))

    def _drive(self, op: ops.Op, conn: redis.Redis | None = None) -> Any:
        conn = self.r if conn is None else conn
        try:
            cmd = next(op)
            while True:
                try:
                    reply = conn.execute_command(*cmd)  # type: ignore[no-untyped-call]
                except RedisError as e:
                    raise translate(e) from e
                cmd = op.send(reply)
        except StopIteration as done:
            return done.value

    # -- snapshots and points ---------------------------------------------------------

    def version(self) -> int:
        """The current LSN (`TS.VERSION`)."""
        return int(self._drive(ops.version()))

    def seal(self, trigger: str = "", *, name: str | None = None, **metadata: Any) -> str:
        """Seal the current state as a snapshot with a trigger and metadata; returns its
        id (its name: `name`, or one made from the trigger)."""
        return str(self._drive(ops.seal(trigger, name, metadata)))

    def snapshots(self) -> dict[str, t.SnapshotInfo]:
        """Sealed snapshots by id, oldest first."""
        result: dict[str, t.SnapshotInfo] = self._drive(ops.snapshots())
        return result

    def unseal(self, snapshot_id: str) -> bool:
        """Drop a snapshot; False when there was none."""
        return bool(self._drive(ops.unseal(snapshot_id)))

    def at_snapshot(self, snapshot_id: str) -> Session:
        """A read-only view of the state a snapshot sealed."""
        return self.at(snapshot=snapshot_id)

    def at(
        self,
        *,
        version: int | None = None,
        time: int | float | datetime | None = None,
        snapshot: str | None = None,
        back: int | None = None,
    ) -> Session:
        """A read-only view as of a version (LSN), a time (unix ms, float seconds or a
        datetime), a snapshot, or `back` versions before the current one."""
        if back is not None:
            version, back = self.version() - back, None
        at = t.point(version=version, time=time, snapshot=snapshot, back=back)
        return Session(self.r, [("TS.CHECKOUT", "AT", *at.args())])

    # -- one key ---------------------------------------------------------------------

    def get_as_of(self, key: Any, at: t.Point | None = None, **where: Any) -> Any:
        """The key's value at a point, in its type's read shape (None: no key then)."""
        return self._drive(ops.get_as_of(key, t.point(at, **where)))

    def history(self, key: Any, **options: Unpack[t.HistoryOptions]) -> list[t.HistoryEntry]:
        """The key's versions, oldest first: options author, since and until (Points),
        with_values, count and reverse (newest first)."""
        result: list[t.HistoryEntry] = self._drive(ops.history_of(key, **options))
        return result

    def revert(self, key: Any, to: t.Point | None = None, **where: Any) -> bool:
        """Write the key's state at a point as a new version; False if already so."""
        return bool(self._drive(ops.revert(key, t.point(to, **where))))

    def restore(self, at: t.Point, match: str | None = None) -> int:
        """`revert` for every key (or every key matching `match`); how many changed."""
        return int(self._drive(ops.restore(at, match)))

    def diff(self, a: t.Point | str, b: t.Point | str, match: str | None = None) -> dict[str, str]:
        """Keys that differ between two points (a branch's name is its head), each with
        'added', 'removed' or 'changed', in key order; all pages."""
        result: dict[str, str] = self._drive(ops.diff(a, b, match))
        return result

    # -- branches --------------------------------------------------------------------

    def branch(self, name: str, from_: t.Point | None = None) -> None:
        """Fork the main line now, or at a point."""
        self._drive(ops.branch(name, from_))

    def drop_branch(self, name: str) -> None:
        self._drive(ops.drop_branch(name))

    def branches(self) -> dict[str, t.BranchInfo]:
        result: dict[str, t.BranchInfo] = self._drive(ops.branches())
        return result

    def switch(self, name: str) -> Session:
        """A dedicated connection working on a branch (`main` or `head`: the main line)."""
        return Session(self.r, [ops.checkout(name)])

    def merge(self, source: str, *, into: str | None = None, strategy: str = "fail") -> int:
        """Apply a branch's changes to `into` (the main line by default); keys merged."""
        return int(self._drive(ops.merge(source, into, strategy)))

    # -- writer metadata -------------------------------------------------------------

    @contextmanager
    def writer(self, author: str, message: str | None = None) -> Iterator[Session]:
        """A connection whose writes carry this author (and message) in their versions."""
        session = Session(self.r, [ops.meta(author, message)])
        try:
            yield session
        finally:
            session.close()

    # -- tables ----------------------------------------------------------------------

    def create_table(self, name: str, **options: Any) -> None:
        """A table `namespace:table` with its own policy: durability ("async"/"sync"),
        retain ("all", "versions:n", "ms:n"), snapshot_every, max_pinned."""
        self._drive(ops.create_table(name, ops.table_options(**options)))

    def alter_table(self, name: str, **options: Any) -> None:
        """Change what is given of a table's policy (the options of `create_table`)."""
        self._drive(ops.alter_table(name, ops.table_options(**options)))

    def tables(self) -> dict[str, t.TableInfo]:
        result: dict[str, t.TableInfo] = self._drive(ops.tables())
        return result

    def table_info(self, name: str) -> t.TableInfo:
        result: t.TableInfo = self._drive(ops.table_info(name))
        return result

    def drop_table(self, name: str) -> None:
        self._drive(ops.drop_table(name))

    # -- export and import -----------------------------------------------------------

    def export_snapshot(
        self,
        out: str | os.PathLike[str] | IO[bytes],
        **options: Unpack[t.ExportOptions],
    ) -> int:
        """Write the state at `at` (now by default) of the client's database (or `db`)
        to a file or binary stream in the export format (docs/export-format.md), page by
        page; returns the number of keys."""
        with Session(self.r, transfer.select(options.get("db"))) as sess:
            if isinstance(out, str | os.PathLike):
                with open(out, "wb") as f:
                    return int(self._drive(transfer.export_op(f, **options), sess.client))
            return int(self._drive(transfer.export_op(out, **options), sess.client))

    def import_snapshot(
        self,
        path: str | os.PathLike[str],
        **options: Unpack[t.ImportOptions],
    ) -> transfer.Imported:
        """Load an export file as new versions, into a new branch forked from the empty
        state by default (`ImportOptions` says where else). The whole file is checked
        first (ExportFileError: nothing written), then every batch by the server."""
        checked = transfer.check_file(path)
        plan = transfer.target(checked, os.path.basename(path), **options)
        if plan.branch is not None:
            self.branch(plan.branch, t.Point(version=0))
        try:
            with Session(self.r, plan.setup) as sess:
                n = int(self._drive(transfer.import_op(path, plan.replace), sess.client))
        except BaseException:
            if plan.branch is not None:
                self.drop_branch(plan.branch)
            raise
        return transfer.Imported(plan.branch, plan.db, n)
