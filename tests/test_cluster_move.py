"""Moving a slot range between shards (issue 28, `temporalstore cluster move`), with
real processes: etcd, three nodes on their own storage, redis-py's RedisCluster.

The move fences the range on the source, flushes, the target replays the source's
stream and takes the range's keys with their history, the map changes by an etcd
transaction (proxy.slotmove). These check that every key and its history (TS.HISTORY's
times and values, TS.ASOF by time) survive it, that a writer running through it loses
no acknowledged write, that both shards restart right from their own storage, and
that a bad request changes nothing.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from store.slots import key_slot
from tests.conftest import ROOT, ServerProcess, start_temporalstore, until
from tests.etcd import EtcdCluster
from tests.reliability import figure, sized
from tests.test_cluster import Cluster, _info, _wire, read_keys, write_keys
from tests.test_cluster import cluster as cluster  # the fixture
from tests.test_durability import kill9

KEYS = sized(3_000, 1_000_000)
MOVED_SLOTS = sized(1_000, 1_000)
HISTORIED = 60  # keys with several versions
VERSIONS = 4


def _cli(c: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--etcd-endpoints", c.endpoints, "--cluster-name", c.name]
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", "cluster", *args, *where],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _move(c: Cluster, slots: str, port: int) -> subprocess.CompletedProcess[str]:
    return _cli(c, "move", "--slots", slots, "--to", f"127.0.0.1:{port}")


@pytest.fixture
def created(cluster: Cluster) -> Iterator[Cluster]:
    assert cluster.create().returncode == 0
    for n in cluster.nodes:
        until(lambda n=n: _info(n.port)["cluster_state"] == "ok", 20)
    yield cluster


def _rc(c: Cluster) -> RedisCluster:
    return RedisCluster(host="127.0.0.1", port=c.nodes[0].port, decode_responses=False)


def _rows(rc: RedisCluster, key: str, *args: str) -> list[dict[bytes, object]]:
    rows = rc.execute_command("TS.HISTORY", key, *args)
    return [r if isinstance(r, dict) else dict(zip(r[::2], r[1::2], strict=True)) for r in rows]


def _history(rc: RedisCluster, key: str) -> list[object]:
    """TS.HISTORY WITHVALUES without the LSNs (they are the taking shard's after a move)."""
    return [
        {f: v for f, v in row.items() if f != b"version"} for row in _rows(rc, key, "WITHVALUES")
    ]


def _times(rc: RedisCluster, key: str) -> list[int]:
    return [int(row[b"time"]) for row in _rows(rc, key)]  # type: ignore[call-overload]


def _asof(rc: RedisCluster, key: str, times: list[int]) -> list[object]:
    points = sorted({t + d for t in times for d in (-1, 0, 1)})
    return [rc.execute_command("TS.ASOF", key, "TIME", t) for t in points]


def _restart(p: ServerProcess, c: Cluster) -> ServerProcess:
    args = ["--cluster-enabled", "yes", "--etcd-endpoints", c.endpoints, "--cluster-name", c.name]
    again = start_temporalstore([*args, "--port", str(p.port)], workdir=p.workdir)
    until(lambda: any("registered" in line for line in again.log_lines), 20)
    return again


def _keys_on(port: int) -> set[bytes]:
    return set(redis.Redis(port=port).scan_iter(count=1000))


def test_move_keeps_keys_history_and_restarts(created: Cluster) -> None:
    c = created
    first, last = 0, MOVED_SLOTS - 1  # the first shard's (0-5460)
    src, dst = c.nodes[0], c.nodes[1]
    rc = _rc(c)
    try:
        # Versions of one key in quick succession, the target committing nothing in
        # between: they get consecutive target LSNs, later than the target's time index
        # says for their times (TS.ASOF TIME then reads the key's own chain).
        burst = "burst11"  # slot 470
        for v in range(VERSIONS):
            rc.set(burst, f"burst:v{v}")
            time.sleep(0.003)
        write_keys(rc, KEYS)
        historied = [f"h:{i}" for i in range(HISTORIED)]
        for v in range(VERSIONS):
            for k in historied:
                rc.set(k, f"{k}:v{v}")
        for k in historied[::3]:
            rc.hset(f"{k}:hash", mapping={"a": 1, "b": 2})
            rc.hset(f"{k}:hash", "a", 3)
        moving = [k for k in historied if first <= key_slot(k.encode()) <= last] + [burst]
        assert moving, "some historied keys are in the range"
        before = {k: (_history(rc, k), _asof(rc, k, _times(rc, k))) for k in moving}
        in_range = {k for k in _keys_on(src.port) if first <= key_slot(k) <= last}
        src_before, dst_before = len(_keys_on(src.port)), len(_keys_on(dst.port))

        started = time.monotonic()
        done = _move(c, f"{first}-{last}", dst.port)
        seconds = time.monotonic() - started
        assert done.returncode == 0, done.stderr
        figure(
            "slot-move",
            keys=KEYS,
            slots=last - first + 1,
            keys_moved=len(in_range),
            seconds=seconds,
        )
        assert f"moved slots {first}-{last} from 127.0.0.1:{src.port}" in done.stdout

        # The map: the range is the target's, at the next epoch; the source redirects.
        until(lambda: _info(src.port)["cluster_current_epoch"] == "2", 20)
        slots = redis.Redis(port=src.port).execute_command("CLUSTER SLOTS")
        assert [first, last, dst.port] in [[s[0], s[1], s[2][1]] for s in slots]
        moved_key = next(iter(in_range))
        with pytest.raises(redis.exceptions.MovedError) as moved:
            redis.Redis(port=src.port).get(moved_key)
        assert str(moved.value) == f"{key_slot(moved_key)} 127.0.0.1:{dst.port}"
        until(lambda: len(_keys_on(src.port)) == src_before - len(in_range), 20)
        assert len(_keys_on(dst.port)) == dst_before + len(in_range)

        rc.nodes_manager.initialize()
        read_keys(rc, KEYS)
        for k in moving:
            assert (_history(rc, k), _asof(rc, k, _times(rc, k))) == before[k], k
            assert rc.get(k) == f"{k}:v{VERSIONS - 1}".encode() or k == burst
        # A write to a moved key after the move is its newest version, on the target.
        rc.set(moving[0], "after")
        assert _history(rc, moving[0])[-1][b"value"] == b"after"  # type: ignore[index]
        after = {k: (_history(rc, k), _asof(rc, k, _times(rc, k))) for k in moving}

        show = _cli(c, "show")
        assert show.returncode == 0, show.stderr
        assert f"127.0.0.1:{src.port} slots {last + 1}-5460" in show.stdout
        assert f"127.0.0.1:{dst.port} slots {first}-{last},5461-10922" in show.stdout
        assert "no move in progress" in show.stdout
    finally:
        rc.close()

    # kill -9 the target and restart it from its storage (a checkpoint, then one more
    # write in the stream after it): the keys and history are there.
    assert redis.Redis(port=dst.port).save()
    rc = _rc(c)
    try:
        last_key = moving[-1]
        on_dst = redis.Redis(port=dst.port)
        on_dst.set(last_key, "after the checkpoint")
        assert on_dst.execute_command("TS.WAITDURABLE", 10_000) >= 1  # durable, then killed
        after[last_key] = (_history(rc, last_key), _asof(rc, last_key, _times(rc, last_key)))
    finally:
        rc.close()
    kill9(dst)
    c.nodes[1] = dst = _restart(dst, c)
    rc = _rc(c)
    try:
        read_keys(rc, KEYS)
        for k in moving:
            assert (_history(rc, k), _asof(rc, k, _times(rc, k))) == after[k], k
    finally:
        rc.close()
    # Restart the source (kill -9 too): it neither serves nor counts the moved keys.
    kill9(src)
    c.nodes[0] = src = _restart(src, c)
    left = _keys_on(src.port)
    assert len(left) == src_before - len(in_range)
    assert not {k for k in left if first <= key_slot(k) <= last}
    assert redis.Redis(port=src.port).dbsize() == len(left)


def test_writer_during_move_loses_nothing(created: Cluster) -> None:
    """A writer keeps writing (each write retried until acknowledged) while a range
    moves: afterwards every acknowledged write is there; writes that met the fence
    were answered -TRYAGAIN and retried."""
    c = created
    src, dst = c.nodes[0], c.nodes[2]
    acked: list[int] = []
    retried = [0]
    stop = threading.Event()

    def writer() -> None:
        rc = _rc(c)
        try:
            i = 0
            while not stop.is_set() or i < 200:
                try:
                    rc.set(f"w:{i}", i)
                except (redis.exceptions.RedisError, redis.exceptions.ClusterError):
                    retried[0] += 1
                    continue
                acked.append(i)
                i += 1
        finally:
            rc.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        until(lambda: len(acked) > 300, 30)
        done = _move(c, "0-2999", dst.port)
        assert done.returncode == 0, done.stderr
        n = len(acked)
        until(lambda: len(acked) > n + 300, 30)
    finally:
        stop.set()
        thread.join(60)
    rc = _rc(c)
    try:
        got = rc.mget_nonatomic([f"w:{i}" for i in acked])
    finally:
        rc.close()
    lost = sum(1 for i, v in zip(acked, got, strict=True) if v != str(i).encode())
    moved = [i for i in acked if key_slot(f"w:{i}".encode()) < 3000]
    tryagain = redis.Redis(port=src.port).info("errorstats")["errorstat_TRYAGAIN"]["count"]
    figure(
        "slot-move-writer",
        acked=len(acked),
        acked_in_moved_slots=len(moved),
        answered_tryagain=tryagain,
        raised_to_the_writer=retried[0],
        lost_acked=lost,
    )
    assert got == [str(i).encode() for i in acked] and lost == 0
    assert moved and len(acked) == len(set(acked))
    assert tryagain > 0


def test_bad_moves_change_nothing(created: Cluster) -> None:
    c = created
    ports = [n.port for n in c.nodes]
    unknown = _move(c, "0-10", 1)
    assert unknown.returncode == 1
    assert "127.0.0.1:1 is not a registered node of cluster" in unknown.stderr
    own = _move(c, "0-10", ports[0])
    assert own.returncode == 1 and "nothing to move" in own.stderr
    backwards = _move(c, "10-5", ports[1])
    assert backwards.returncode == 1 and "want 0 <= FIRST <= LAST <= 16383" in backwards.stderr
    c.nodes[2].stop()  # its registration goes with its lease
    until(lambda: "not registered" in _cli(c, "show").stdout, 30)
    down = _move(c, "16000-16383", ports[0])
    assert down.returncode == 1
    assert f"served by 127.0.0.1:{ports[2]}, which is not registered (down?)" in down.stderr
    for port in ports[:2]:
        assert _info(port)["cluster_current_epoch"] == "1"
    show = _cli(c, "show")
    assert "config epoch 1, 16384 of 16384 slots assigned, state ok" in show.stdout
    assert "no move in progress" in show.stdout


def test_move_to_a_node_without_slots(etcd: EtcdCluster, created: Cluster) -> None:
    """A fourth node, registered but in no shard, takes a range: it joins the map."""
    c = created
    args = ["--cluster-enabled", "yes", "--etcd-endpoints", c.endpoints, "--cluster-name", c.name]
    extra = start_temporalstore(args)
    c.nodes.append(extra)
    until(lambda: any("registered" in line for line in extra.log_lines), 20)
    rc = _rc(c)
    try:
        for v in range(3):
            for i in range(200):
                rc.set(f"{{x}}:{i}", f"{v}")  # slot 16287, the third shard's
        slot = key_slot(b"{x}")
        done = _move(c, str(slot), extra.port)
        assert done.returncode == 0, done.stderr
        rc.nodes_manager.initialize()
        assert rc.get("{x}:7") == b"2"
        assert [row[b"value"] for row in _rows(rc, "{x}:7", "WITHVALUES")] == [b"0", b"1", b"2"]
    finally:
        rc.close()
    assert len(_keys_on(extra.port)) == 200


def _held_move(c: Cluster, state: str, slots: str, port: int, *extra: str) -> subprocess.Popen[str]:
    """`cluster move` started in the background, the target to be held at `state`
    (the nodes' TEMPORALSTORE_MOVE_HOLD file, proxy.slotmove)."""
    assert c.hold is not None
    c.hold.write_text(state)
    where = ["--etcd-endpoints", c.endpoints, "--cluster-name", c.name]
    to = ["--to", f"127.0.0.1:{port}", *extra, *where]
    return subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "cluster", "move", "--slots", slots, *to],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_move_that_cannot_finish_is_aborted(created: Cluster) -> None:
    """The target pre-copies the range, then is held before it imports the tail: past
    --timeout the move is aborted, the map is unchanged, the source takes writes to the
    range again and the target drops what it imported."""
    c = created
    src, dst = c.nodes[0], c.nodes[1]
    key = "b"  # slot 3300, the first shard's
    redis.Redis(port=src.port).set(key, "before")
    assert key_slot(key.encode()) == 3300
    cli = _held_move(c, "import", "3000-3999", dst.port, "--timeout", "5")
    # Meanwhile the source is fenced: a write to the range is answered -TRYAGAIN.
    until(lambda: _wire(src.port, b"SET", b"b", b"during").startswith(b"-TRYAGAIN"), 20)
    assert _wire(src.port, b"SET", b"b", b"during") == (
        b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
    )
    read = _wire(src.port, b"GET", b"b")  # reads are served: the last accepted write
    assert read in (b"$6\r\nbefore\r\n", b"$6\r\nduring\r\n")
    show = _cli(c, "show").stdout
    assert (
        f"move in progress: slots 3000-3999 from 127.0.0.1:{src.port} to "
        f"127.0.0.1:{dst.port}, state import, fenced at LSN "
    ) in show
    assert key.encode() in _keys_on(dst.port)  # pre-copied, not served: the map is the same
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 1
    assert "slots 3000-3999 not moved within 5 s (state import): aborted" in err
    plain = redis.Redis(port=src.port)
    # The fence is lifted at the source's next look at the move (every 0.1 s): until
    # then a write is answered -TRYAGAIN.
    until(lambda: plain.set(key, "after") is True, 20, retry_on=(redis.exceptions.TryAgainError,))
    assert plain.get(key) == b"after"
    for n in c.nodes:
        assert _info(n.port)["cluster_current_epoch"] == "1"
    assert "no move in progress" in _cli(c, "show").stdout
    until(lambda: key.encode() not in _keys_on(dst.port), 20)  # the import dropped


def test_move_aborted_in_its_precopy(created: Cluster) -> None:
    """The target pre-copies, then is held in state precopy: the source is never
    fenced (it takes writes to the range throughout), and past --timeout the move is
    aborted, the map unchanged, and the target drops what it pre-copied."""
    c = created
    src, dst = c.nodes[0], c.nodes[1]
    on_src = redis.Redis(port=src.port)
    on_src.set("b", "before")  # slot 3300
    cli = _held_move(c, "precopy", "3000-3999", dst.port, "--timeout", "5")
    until(lambda: "state precopy, pre-copied up to LSN " in _cli(c, "show").stdout, 30)
    assert b"b" in _keys_on(dst.port)
    while cli.poll() is None:
        assert on_src.set("b", "during") is True  # never -TRYAGAIN
        time.sleep(0.05)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 1
    assert "slots 3000-3999 not moved within 5 s (state precopy): aborted" in err
    assert on_src.set("b", "after") is True and on_src.get("b") == b"after"
    for n in c.nodes:
        assert _info(n.port)["cluster_current_epoch"] == "1"
    until(lambda: b"b" not in _keys_on(dst.port), 20)  # the pre-copy dropped
    assert "no move in progress" in _cli(c, "show").stdout


def test_writes_go_on_during_the_precopy(created: Cluster) -> None:
    """While the target pre-copies (held in state precopy once it has, by the test
    hook), the source acknowledges writes and deletions in the range; after the fence
    the target takes those keys again from the stream's tail: each is there with its
    whole history, the deleted one deleted, the others as pre-copied."""
    c = created
    src, dst = c.nodes[0], c.nodes[1]
    first, last = 3000, 3999  # the first shard's
    # One slot (3300, hash tag b): MGET and DEL take them together.
    kept, changed, deleted, fresh = ([f"{{b}}:{p}{i}" for i in range(5)] for p in "kcdn")
    on_src = redis.Redis(port=src.port)
    for v in range(2):
        for k in kept + changed + deleted:
            on_src.set(k, f"{k}:v{v}")
    cli = _held_move(c, "precopy", f"{first}-{last}", dst.port)
    try:
        state = "state precopy, pre-copied up to LSN "
        until(lambda: state in _cli(c, "show").stdout, 30)
        # Pre-copied: the target holds the keys, and serves none of them yet.
        assert set(kept + changed) <= {k.decode() for k in _keys_on(dst.port)}
        with pytest.raises(redis.exceptions.MovedError):
            redis.Redis(port=dst.port).get(kept[0])
        # The source takes writes to the range meanwhile.
        for k in changed:
            assert on_src.set(k, f"{k}:v2") is True
            assert on_src.append(k, "+") > 0
        assert on_src.delete(*deleted) == len(deleted)
        for k in fresh:
            assert on_src.set(k, f"{k}:new") is True
        assert state in _cli(c, "show").stdout  # all of them during the pre-copy
        assert on_src.execute_command("TS.WAITDURABLE", 10_000) >= 1
        rc = _rc(c)
        try:
            before = {k: _history(rc, k) for k in kept + changed + deleted + fresh}
        finally:
            rc.close()
    finally:
        assert c.hold is not None
        c.hold.write_text("")  # the target goes on
        out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    assert f"moved slots {first}-{last} from 127.0.0.1:{src.port}" in out
    took = next(line for line in dst.log_lines if "took slots" in line)
    tail = len(changed) + len(deleted) + len(fresh)
    assert f", {tail} keys from the tail)" in took  # the others as pre-copied
    until(lambda: _info(src.port)["cluster_current_epoch"] == "2", 20)
    on_dst = redis.Redis(port=dst.port)
    assert on_dst.mget(kept) == [f"{k}:v1".encode() for k in kept]
    assert on_dst.mget(changed) == [f"{k}:v2+".encode() for k in changed]
    assert on_dst.mget(fresh) == [f"{k}:new".encode() for k in fresh]
    assert on_dst.exists(*deleted) == 0
    assert not {k.decode() for k in _keys_on(dst.port)} & set(deleted)
    rc = _rc(c)
    try:
        rc.nodes_manager.initialize()
        for k, rows in before.items():
            assert _history(rc, k) == rows, k
    finally:
        rc.close()
    assert not {k for k in _keys_on(src.port) if first <= key_slot(k) <= last}


def test_target_restarted_after_its_precopy_takes_the_whole_range(created: Cluster) -> None:
    """The target is killed (kill -9) once fenced, its pre-copy only in its memory;
    restarted, it takes the whole range again from the source's stream and finishes
    the move: every key with its history, none twice."""
    c = created
    src, dst = c.nodes[0], c.nodes[1]
    first, last = 3000, 3999  # the first shard's
    keys = [f"{{b}}:r{i}" for i in range(20)]  # slot 3300
    on_src = redis.Redis(port=src.port)
    for v in range(3):
        for k in keys:
            on_src.set(k, f"{k}:v{v}")
    on_src.delete(keys[0])
    rc = _rc(c)
    try:
        before = {k: _history(rc, k) for k in keys}
    finally:
        rc.close()
    cli = _held_move(c, "import", f"{first}-{last}", dst.port)
    until(lambda: ", state import, fenced at LSN " in _cli(c, "show").stdout, 30)
    kill9(dst)
    c.nodes[1] = dst = _restart(dst, c)  # without the hold
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    assert f"moved slots {first}-{last} from 127.0.0.1:{src.port}" in out
    took = next(line for line in dst.log_lines if "took slots" in line)
    assert f"({len(keys)} keys)" in took and f", {len(keys)} keys from the tail)" in took
    rc = _rc(c)
    try:
        rc.nodes_manager.initialize()
        assert [_history(rc, k) for k in keys] == [before[k] for k in keys]
    finally:
        rc.close()
    on_dst = redis.Redis(port=dst.port)
    assert on_dst.exists(keys[0]) == 0
    assert on_dst.mget(keys[1:]) == [f"{k}:v2".encode() for k in keys[1:]]
    assert sorted(k for k in _keys_on(dst.port) if first <= key_slot(k) <= last) == sorted(
        k.encode() for k in keys[1:]
    )


def test_range_over_two_shards_moves_from_each(created: Cluster) -> None:
    """A range owned by two shards is moved one source at a time, each at its epoch."""
    c = created
    ports = [n.port for n in c.nodes]
    rc = _rc(c)
    try:
        write_keys(rc, 2_000)
        done = _move(c, "5400-5500", ports[2])
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            f"moved slots 5400-5460 from 127.0.0.1:{ports[0]} to 127.0.0.1:{ports[2]} "
            "(config epoch 2)",
            f"moved slots 5461-5500 from 127.0.0.1:{ports[1]} to 127.0.0.1:{ports[2]} "
            "(config epoch 3)",
        ]
        rc.nodes_manager.initialize()
        read_keys(rc, 2_000)
    finally:
        rc.close()
    on_target = {k for k in _keys_on(ports[2]) if 5400 <= key_slot(k) <= 5500}
    assert on_target == {
        f"key:{i}".encode() for i in range(2_000) if 5400 <= key_slot(f"key:{i}".encode()) <= 5500
    }
    assert on_target
