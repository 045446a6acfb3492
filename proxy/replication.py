"""This process' role: the primary of its storage prefix, or a replica of one.

A **primary** (`Node.become_primary`) rebuilds the store from object storage, takes
the prefix over (`replay.startup.take_over`: the next writer epoch), starts the
durable layer, and keeps a backlog of its newest records (`flusher.backlog`, fed by
the flusher as it encodes them). A replica's link is an ordinary connection that
sent `REPLCONF listening-port <p>` and `TS.FOLLOW <lsn>`: from then on the primary
writes it every record from that LSN as bulk strings, each holding consecutive
encoded records (`flusher.codec`, the segments' encoding), and the replica answers
`REPLCONF ACK <lsn>` after applying them and every second.

A **replica** (`Node.become_replica`) only reads object storage: it rebuilds the
store from the newest checkpoint and segments, then follows its primary's link
(`Follower`). Whenever the link is down, or the primary no longer holds the records
the replica needs, it catches up from object storage and connects again. Records
are applied with `Store.replay_records`, exactly as replay applies them, so the
replica's history is a prefix of the primary's: same values, same LSNs. Writes get
`-READONLY`; expiry hides keys instead of deleting them (the primary's deletions
arrive as records). A replica keeps the primary's history policy (named in the reply
to TS.FOLLOW: one started with another `--history` takes it and rebuilds), and when
compaction deleted the segments it needs, it rebuilds from the newest checkpoint.

`REPLICAOF host port` turns a primary into a replica: writes are refused at once,
everything committed is flushed to object storage, the durable layer stops and
client connections are closed (as Sentinel does on a role change). `REPLICAOF NO
ONE` turns a replica into the primary: it catches up from storage and takes the
prefix over with the next epoch (fencing the old primary, should it still run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import hiredis

from commands import allocator
from commands.errors import READONLY, CommandError
from commands.replies import Encoded, Reply, Simple
from commands.replstate import GroupView, ReplicaLink
from commands.sentinel import set_group
from commands.session import ServerCore, Session
from flusher.backlog import Backlog
from flusher.codec import records_from
from flusher.durable import DurabilityConfig, DurableStore
from flusher.flusher import put_segment, records_segment
from flusher.manifest import newest_manifest
from flusher.objectstore import ObjectStore, ObjectStoreError
from flusher.paths import segment as segment_key
from replay.replay import Progress, Recovery, ReplayError, recover, replay_body
from replay.startup import take_over
from store import HistoryPolicy, PrunedError, Store
from store.coldhistory import attach
from store.keyspace import LsnMismatch
from store.tasks import cancel_and_wait

if TYPE_CHECKING:
    from proxy.group import GroupMember

log = logging.getLogger("temporalstore")

LINK_BUFFER = 8 * 1024 * 1024  # a link's unsent bytes before the stream waits
ACK_EVERY_S = 1.0
RETRY_MIN_S = 0.1
RETRY_MAX_S = 1.0
NOBACKLOG = "NOBACKLOG"
TAKEOVER_ATTEMPTS = 20
GROUP = "temporalstore"  # the group's name when --etcd-endpoints is given alone
GROUP_REFRESH_S = 0.5


class LinkError(Exception):
    """The link to the primary broke or sent what cannot be applied."""


class OtherHistory(Exception):
    """The primary keeps another history policy (`--history`) than this replica."""

    def __init__(self, spec: str) -> None:
        super().__init__(spec)
        self.spec = spec


def _command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%b\r\n" % (len(a), a) for a in args)


def master_auth(params: dict[str, str]) -> list[list[bytes]]:
    """The AUTH a replica's link sends first, as Redis' replicas do: `masterauth` as
    the password of `masteruser` (the default user when empty); none without one."""
    password = params.get("masterauth") or ""
    if not password:
        return []
    user = params.get("masteruser") or ""
    return [[b"AUTH", *([user.encode()] if user else []), password.encode()]]


class Follower:
    """A replica's link to its primary: connect, follow, acknowledge; on any break,
    catch up from object storage and connect again."""

    def __init__(self, node: Node, host: str, port: int) -> None:
        self.node = node
        self.host = host
        self.port = port
        self.task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.stopped = False

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        self.stopped = True
        await cancel_and_wait(self.task)
        if self.writer is not None:
            self.writer.close()

    async def run(self) -> None:
        repl = self.node.state.replication
        delay = RETRY_MIN_S
        while not self.stopped:
            try:
                await self.node.catch_up()
                await self.follow()
                delay = RETRY_MIN_S
            except asyncio.CancelledError:
                raise
            except OtherHistory as e:
                # TS.HISTORY must answer here as on the primary: take its policy and
                # rebuild what was kept under this one.
                try:
                    await self.node.adopt_history(e.spec)
                    continue
                except (ReplayError, ObjectStoreError) as err:
                    log.info("replica link to %s:%d: %s", self.host, self.port, err)
            except (OSError, LinkError, ReplayError, ObjectStoreError) as e:
                log.info("replica link to %s:%d: %s", self.host, self.port, e)
            finally:
                if repl.link_up:
                    repl.link_up = False
                    repl.link_down_since = time.time()
                if self.writer is not None:
                    self.writer.close()
                    self.writer = None
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    async def follow(self) -> None:
        store = self.node.store
        repl = self.node.state.replication
        repl.sync_in_progress = True
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a
        # cancel that arrives as the awaited call completes (stop() would hang).
        async with asyncio.timeout(5):
            reader, writer = await asyncio.open_connection(self.host, self.port)
        self.writer = writer
        parser = hiredis.Reader(replyError=LinkError)
        nxt = store.lsn + 1
        host, port = self.node.announce
        calls = master_auth(self.node.state.config.params)
        calls += [
            [b"REPLCONF", b"listening-port", str(port).encode()],
            [b"REPLCONF", b"ip-address", host.encode()],
            [b"TS.FOLLOW", str(nxt).encode()],
        ]
        writer.write(b"".join(_command(*c) for c in calls))
        replies: list[object] = []
        while len(replies) < len(calls):
            async with asyncio.timeout(10):
                data = await reader.read(65536)
            if not data:
                raise LinkError("the primary closed the link")
            parser.feed(data)
            while (r := parser.gets()) is not False:
                replies.append(r)
                if len(replies) == len(calls):
                    break
        for r in replies:
            if isinstance(r, LinkError):
                if str(r).startswith(NOBACKLOG):
                    return  # catch up from object storage first, then come back
                raise r
        # +FOLLOWING <lsn> HISTORY <policy>: the primary's --history.
        words = replies[-1].split() if isinstance(replies[-1], bytes) else []
        if len(words) == 4 and words[2] == b"HISTORY":
            spec = words[3].decode()
            if spec != str(store.history):
                raise OtherHistory(spec)
        repl.link_up = True
        repl.sync_in_progress = False
        repl.applied()
        log.info("replica link to %s:%d: following from LSN %d", self.host, self.port, nxt)
        while True:
            frame = parser.gets()
            while frame is not False:
                if isinstance(frame, LinkError):
                    raise frame
                if isinstance(frame, list):
                    self.node.stored_upto(frame[1])  # ["DURABLE", lsn]
                else:
                    nxt = self.apply(frame, nxt)
                frame = parser.gets()
            writer.write(_command(b"REPLCONF", b"ACK", str(store.lsn).encode()))
            try:
                async with asyncio.timeout(ACK_EVERY_S - 0.05):
                    data = await reader.read(1 << 20)
            except TimeoutError:
                continue
            if not data:
                raise LinkError("the primary closed the link")
            parser.feed(data)

    def apply(self, frame: object, nxt: int) -> int:
        """Apply one frame of consecutive records starting at LSN `nxt`."""
        if not isinstance(frame, bytes):
            raise LinkError(f"unexpected frame {frame!r:.80}")
        store = self.node.store
        try:
            first, last = replay_body(store, frame)
        except LsnMismatch as e:
            raise LinkError(f"records out of order: {e}") from None
        if first != nxt:
            raise LinkError(f"a frame from LSN {first} where {nxt} was next")
        self.node.unstored.append((first, last, frame))
        store.notify_replayed(last - first + 1)
        if self.node.state.tracking is not None:  # client-side caching on the replica
            self.node.state.tracking.replayed(store.index_keys[first - last - 1 :])
        self.node.state.replication.applied(store.last_time_ms)
        return last + 1


class Node:
    """The process' role and what it runs for it (see the module docstring)."""

    def __init__(
        self,
        state: ServerCore,
        objects: ObjectStore,
        durability: DurabilityConfig,
        port: int,
        progress: Progress | None = None,
    ) -> None:
        self.state = state
        self.store: Store = state.store
        self.objects = objects
        self.durability = durability
        self.port = port
        self.progress = progress
        self.recovery: Recovery | None = None
        self.durable: DurableStore | None = None
        self.backlog: Backlog | None = None
        self.follower: Follower | None = None
        # Records applied beyond what storage holds: (first LSN, last LSN, encoded).
        self.unstored: list[tuple[int, int, bytes]] = []
        self._switching: asyncio.Task[None] | None = None
        self._streams: set[asyncio.Task[None]] = set()
        repl = state.replication
        repl.follow = self.serve_link
        repl.switch = self.switch
        config = state.config
        self.announce = (config.announce_host, config.announce_port or port)
        self._group_task: asyncio.Task[None] | None = None
        self.member: GroupMember | None = None  # --etcd-endpoints

    # -- starting ------------------------------------------------------------------

    async def start(self, replicaof: tuple[str, int] | None) -> None:
        """Rebuild from object storage and take the role asked for (ReplayError,
        ObjectStoreError when storage cannot be read)."""
        config = self.state.config
        if config.etcd_endpoints:
            # The group decides: follow its leader, or lead (proxy.group).
            rec = self.recovery = await recover(self.store, self.objects, self.progress)
            log.info(
                "storage %s: replica of group %s until it has a leader, LSN %d "
                "(%d records replayed in %.2fs)",
                self.objects.url,
                config.group,
                self.store.lsn,
                rec.records,
                rec.seconds,
            )
            self.state.read_only = READONLY
            self.store.follower = True
            self.state.replication.role = "slave"
            # Imported here: etcd's client (grpc, protobuf) costs a server that does not
            # use it ~24 MiB of RSS.
            from proxy.group import GroupMember

            self.member = GroupMember(self, config.etcd_endpoints, config.group or GROUP)
            await self.member.start()
        elif replicaof is None:
            await self.become_primary()
        else:
            rec = self.recovery = await recover(self.store, self.objects, self.progress)
            log.info(
                "storage %s: replica of %s:%d, LSN %d (%d records replayed in %.2fs)",
                self.objects.url,
                *replicaof,
                self.store.lsn,
                rec.records,
                rec.seconds,
            )
            self._as_replica(*replicaof)
        if config.group is not None and not config.etcd_endpoints:
            # The view follows the role (once it is known) and the links.
            self.publish_view()
            self._group_task = asyncio.get_running_loop().create_task(self._refresh_group())

    def leading(self) -> tuple[bytes, bytes] | None:
        """While this node is its group's serving primary: the group's leader key and
        this term's value (what a write in etcd on its behalf is fenced on); else None."""
        member = self.member
        if member is None or member.appender is None or not member.leadership.am_leader():
            return None
        value = member.leadership.key_value
        return None if value is None else (member.leadership.key, value)

    def group_view(self) -> GroupView | None:
        """What this node knows of its group from its own role (etcd knows more)."""
        name = self.state.config.group
        if name is None:
            return None
        repl = self.state.replication
        me = self.state.run_id
        view = GroupView(name, me)
        view.nodes.append((*self.announce, me))
        if repl.is_replica:
            view.primary = (repl.master_host, repl.master_port)
            view.nodes.append((repl.master_host, repl.master_port, "primary"))
            view.replicas.append((*self.announce, me, self.store.lsn))
        else:
            view.primary = self.announce
            view.primary_id = me
            for link in repl.links.values():
                view.replicas.append((link.ip, link.port, str(link.session_id), link.acked))
                view.nodes.append((link.ip, link.port, str(link.session_id)))
        return view

    def publish_view(self) -> None:
        """Update what the Sentinel protocol answers (without etcd: from the role)."""
        if self.member is None:
            view = self.group_view()
            if view is not None:
                set_group(self.state, view)

    async def _refresh_group(self) -> None:
        while True:
            self.publish_view()
            await asyncio.sleep(GROUP_REFRESH_S)

    async def catch_up(self) -> None:
        """Apply what object storage holds beyond what this store has. When the
        segments this store needs next are gone (compaction deleted them after a
        newer checkpoint), go on from that checkpoint: skip to it if the store already
        has its records, else rebuild the store from it (`rebuild`)."""
        store = self.store
        if self.recovery is None:
            self.recovery = await recover(store, self.objects, self.progress)
            return
        try:
            self.recovery = await recover(store, self.objects, None, after=self.recovery)
        except ReplayError as e:
            manifest = await newest_manifest(self.objects)
            checkpoint = manifest.checkpoint_lsn if manifest is not None else None
            if checkpoint is None or checkpoint <= self.recovery.stored:
                raise  # not compaction: what it needs should be there
            log.warning(
                "catching up from storage: %s; a checkpoint at LSN %d covers it", e, checkpoint
            )
            if store.lsn >= checkpoint:
                # The store has every record the checkpoint holds: storage holds them
                # too, so the walk can start after it.
                self.recovery.stored = checkpoint
                self.recovery = await recover(store, self.objects, None, after=self.recovery)
            else:
                await self.rebuild()
                return
        stored = self.recovery.stored
        self.unstored = [c for c in self.unstored if c[1] > stored]

    async def adopt_history(self, spec: str) -> None:
        """Keep the history the primary keeps (`--history` `spec`): rebuild the store
        from storage under that policy, so that TS.HISTORY answers here as there."""
        store = self.store
        was = store.history
        store.history = HistoryPolicy.parse(spec)
        log.warning(
            "the primary keeps history %s, this replica was started with %s: "
            "taking the primary's and rebuilding from storage",
            spec,
            was,
        )
        try:
            await self.rebuild()
        except BaseException:
            store.history = was
            raise

    async def rebuild(self) -> None:
        """Drop the store's state and load it again from object storage (the newest
        checkpoint and the segments after it), as a restart would; clients stay
        connected and get -LOADING meanwhile, as during a Redis replica's full
        synchronisation. If the rebuild fails, the old state is put back."""
        state, store = self.state, self.store
        before = store.lsn
        state.loading = True
        undo = store.reset()
        try:
            recovery = await recover(store, self.objects, self.progress)
        except BaseException:
            undo()
            raise
        finally:
            state.loading = False
        self.recovery = recovery
        self.unstored = []
        for s in list(state.clients.values()):
            try:
                s.select(s.dbi)
            except PrunedError:  # a TS.CHECKOUT AT view of history not rebuilt
                s.view_lsn = None
                s.select(s.dbi)
        if state.tracking is not None:
            state.tracking.flushed(None)  # every key may have changed
        log.warning(
            "rebuilt from storage (checkpoint at LSN %s): LSN %d, was %d",
            recovery.checkpoint_lsn,
            store.lsn,
            before,
        )

    def stored_upto(self, lsn: int) -> None:
        """The primary says object storage holds records up to `lsn`."""
        if self.recovery is not None and lsn > self.recovery.stored:
            self.recovery.stored = lsn
        if self.unstored and self.unstored[0][1] <= lsn:
            self.unstored = [c for c in self.unstored if c[1] > lsn]

    async def store_unstored(self) -> bool:
        """Put the records this node applied beyond what object storage holds (from
        its link, or etcd's raft log) there as one segment, so that a takeover's claim
        follows them. False: another writer stored a segment there first (catch up
        from storage, then try again)."""
        assert self.recovery is not None
        start = self.recovery.stored + 1
        if self.store.lsn < start:
            return True
        data = records_from(b"".join(body for _f, _l, body in self.unstored), start)
        if not await put_segment(
            self.objects, segment_key(start), records_segment(data, start, self.store.lsn)
        ):
            return False
        log.info("records %d..%d this node had beyond storage are stored", start, self.store.lsn)
        self.recovery.stored = self.store.lsn
        self.unstored = []
        return True

    async def prepare_to_lead(self, extra: Callable[[], Awaitable[None]] | None = None) -> None:
        """Catch up from storage (and `extra`: etcd's raft log), then store what this
        node has beyond storage, until that succeeds."""
        await self.stop_following()
        for _attempt in range(TAKEOVER_ATTEMPTS):
            await self.catch_up()
            if extra is not None:
                await extra()
            if await self.store_unstored():
                return
        raise ReplayError("could not store the records this node has beyond storage")

    async def become_primary(self) -> None:
        store = self.store
        manifest, self.recovery = await take_over(
            store, self.objects, self.progress, after=self.recovery
        )
        durable = DurableStore(store, self.objects, self.durability, manifest, self.recovery)
        objects = self.objects
        durable.rebuild = lambda st: recover(st, objects)  # DEBUG RELOAD
        durable.after_checkpoint = allocator.trim
        backlog = Backlog(store.lsn + 1, lambda: durable.durable_lsn)
        durable.flusher.tap = backlog.append_chunk
        backlog.fill = durable.flusher.encode_pending
        store.follower = False
        durable.start()
        self.durable, self.backlog = durable, backlog
        state = self.state
        state.durability = durable
        state.fenced = ""
        durable_fenced = durable.flusher.on_fenced

        def fenced(why: str) -> None:
            if durable_fenced is not None:
                durable_fenced(why)
            state.fenced = why  # the dispatcher tests it before each write

        durable.flusher.on_fenced = fenced
        state.read_only = ""
        repl = state.replication
        repl.role = "master"
        repl.master_host, repl.master_port = "", 0
        repl.link_up = False
        # What the Sentinel protocol answers changes with the role, not at the next
        # refresh: until then GET-MASTER-ADDR-BY-NAME would still name the old primary
        # (dead, say) and +switch-master would come later, while clients are busy
        # reconnecting.
        self.publish_view()

    def _as_replica(self, host: str, port: int) -> None:
        state = self.state
        self.store.follower = True
        state.read_only = READONLY
        repl = state.replication
        repl.role = "slave"
        repl.master_host, repl.master_port = host, port
        repl.link_up = False
        repl.link_down_since = time.time()
        self.follower = Follower(self, host, port)
        self.follower.start()
        self.publish_view()

    # -- switching roles (REPLICAOF) -------------------------------------------------

    def switch(self, host: str | None, port: int) -> None:
        """REPLICAOF: change role in the background (the command answers at once)."""
        previous = self._switching

        async def run() -> None:
            if previous is not None:
                with contextlib.suppress(Exception):
                    await previous
            try:
                if host is None:
                    await self._promote()
                else:
                    await self.follow(host, port)
            except Exception:
                log.exception("role change failed")

        self._switching = asyncio.get_running_loop().create_task(run())

    async def _promote(self) -> None:
        if self.follower is None:
            return
        log.info("becoming the primary (REPLICAOF NO ONE)")
        await self.prepare_to_lead()
        await self.become_primary()

    async def follow(self, host: str, port: int) -> None:
        """Be a replica of host:port (stepping down first if this node is primary)."""
        f = self.follower
        if f is not None and (f.host, f.port) == (host, port):
            return
        await self.step_down()
        self._as_replica(host, port)

    async def stop_following(self) -> None:
        if self.follower is not None:
            await self.follower.stop()
            self.follower = None

    async def step_down(self) -> None:
        """Stop being the primary (or following): writes are refused at once, what
        is committed is flushed (fenced if another node took over), the replica links
        and client connections are closed, as Sentinel does on a role change."""
        state = self.state
        state.read_only = READONLY
        self.store.follower = True
        await self.stop_following()
        if self.durable is None:
            return
        log.info("stepping down: flushing what is committed")
        durable, self.durable = self.durable, None
        await durable.close(release_objects=False)
        state.durability = None
        state.fenced = ""
        self.backlog = None
        for task in list(self._streams):
            task.cancel()
        state.replication.links.clear()
        state.replication.role = "slave"
        for s in list(state.clients.values()):
            s.close()
        # What this node committed may not all be in storage (a fenced flush): its
        # memory is no longer a prefix of the group's history. Start again from
        # storage, as a Redis replica does a full resynchronisation.
        old = self.store
        store = Store(databases=len(old.dbs), history=old.history)
        # A spill of its own (file or frozen in memory, as the old one): the old one
        # goes when nothing reads the old store.
        spill = old.spill
        attach(store, spill and spill.directory, spill is None or spill.kind == "memory")
        store.follower = True
        self.store = state.store = store
        self.recovery = None
        self.unstored = []
        await self.catch_up()
        log.info("rebuilt from storage after stepping down: LSN %d", store.lsn)

    # -- the primary's side of a link ------------------------------------------------

    def serve_link(self, s: Session, lsn: int) -> Reply:
        """TS.FOLLOW on the primary: stream records from `lsn` on this connection."""
        backlog = self.backlog
        if backlog is None or backlog.since(lsn) is None:
            first = backlog.first_lsn if backlog is not None else self.store.lsn + 1
            raise CommandError(f"{NOBACKLOG} records before LSN {first} are in object storage")
        ip = s.repl_ip or s.addr.rsplit(":", 1)[0]
        self.state.replication.links[s.id] = ReplicaLink(s.id, ip, s.repl_port, lsn - 1)
        task = asyncio.get_running_loop().create_task(self._stream(s, backlog, lsn))
        self._streams.add(task)
        task.add_done_callback(self._streams.discard)
        self.publish_view()
        # The history policy too: a replica keeping another one takes this one.
        return Simple(b"FOLLOWING %d HISTORY %s" % (lsn, str(self.store.history).encode()))

    async def _stream(self, s: Session, backlog: Backlog, lsn: int) -> None:
        links = self.state.replication.links
        told = 0
        try:
            await asyncio.sleep(0)  # the reply to TS.FOLLOW goes first
            while s.id in links:
                durable = backlog.durable_lsn()
                if durable > told:
                    # What storage holds now: the replica stops keeping those records.
                    s.push(Encoded(b"*2\r\n$7\r\nDURABLE\r\n:%d\r\n" % durable))
                    told = durable
                records = backlog.since(lsn)
                if records is None:
                    log.warning("replica %s fell behind the backlog: it reads storage", s.addr)
                    s.close()
                    return
                if not records:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(ACK_EVERY_S):
                            await backlog.wait_after(lsn - 1)
                    continue
                body = b"".join(records)
                s.push(Encoded(b"$%d\r\n%b\r\n" % (len(body), body)))
                lsn += len(records)
                while s.output_size() > LINK_BUFFER and s.id in links:
                    await asyncio.sleep(0.01)
        finally:
            links.pop(s.id, None)
            self.publish_view()

    # -- stopping ----------------------------------------------------------------------

    async def close(self) -> None:
        if self._group_task is not None:
            self._group_task.cancel()
        if self.member is not None:
            await self.member.close()
        if self._switching is not None:
            with contextlib.suppress(Exception):
                await self._switching
        if self.follower is not None:
            await self.follower.stop()
        for task in list(self._streams):
            task.cancel()
        if self.durable is not None:
            await self.durable.close()
            log.info("stopped at LSN %d (durable %d)", self.store.lsn, self.durable.durable_lsn)
        else:
            await self.objects.close()
            log.info("stopped at LSN %d (a replica)", self.store.lsn)


def replica_of(value: str | None) -> tuple[str, int] | None:
    """--replicaof "HOST PORT" (None: a primary)."""
    if not value:
        return None
    parts = value.split()
    if len(parts) != 2 or not parts[1].isdigit():
        raise ValueError(f'--replicaof takes "HOST PORT", not {value!r}')
    return parts[0], int(parts[1])


__all__ = ["Follower", "Node", "replica_of"]
