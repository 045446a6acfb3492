"""Stream consumer groups: differential tests against redis-server (RESP2 and RESP3),
the undo of every group op, and the group state surviving kill -9 and restart."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import redis

from store.keyspace import Database
from store.ops import apply_op
from store.stream import Stream
from tests.conftest import Differ, start_temporalstore
from tests.helpers import make_session, run
from tests.resp_client import RawClient, encode_command, parse
from tests.test_durability import client, kill9
from tests.test_lists import _wait_blocked
from tests.test_notifications import events
from tests.test_notifications import sub as sub  # the subscriber fixture
from tests.test_pubsub import Pair


def _no_idle(reply: bytes) -> Any:
    """An XPENDING extended reply (typed tree of `parse`) with each entry's idle time
    (its 3rd field) dropped."""
    kind, items = parse(reply)
    if kind != "*":
        return (kind, items)
    return [x[1][:2] + x[1][3:] for x in items]


def test_xgroup_create_setid_destroy(diff: Differ) -> None:
    diff.run("""
        XGROUP CREATE s g $
        XGROUP CREATE s g $ MKSTREAM
        XGROUP CREATE s g $ MKSTREAM
        TYPE s
        XLEN s
        XGROUP CREATE s g2 0 ENTRIESREAD 3
        XGROUP CREATE s g3 0 ENTRIESREAD -1
        XGROUP CREATE s g4 0 ENTRIESREAD -2
        XGROUP CREATE s g4 0 ENTRIESREAD x
        XGROUP CREATE s g4 0 ENTRIESREAD
        XGROUP CREATE s g4 0 FOO
        XGROUP CREATE s g4 0 MKSTREAM MKSTREAM MKSTREAM MKSTREAM
        XGROUP CREATE s g4 - MKSTREAM
        XGROUP CREATE s g4 1-x
        XGROUP CREATE s g4 5-5
        XGROUP CREATE s
        XGROUP CREATE s g
        XGROUP SETID s g 7-7
        XGROUP SETID s g - ENTRIESREAD 2
        XGROUP SETID s g $ ENTRIESREAD 2 MKSTREAM
        XGROUP SETID s g $ MKSTREAM
        XGROUP SETID s nog $
        XGROUP SETID s g x
        XGROUP SETID missing g $
        XGROUP DESTROY s g2
        XGROUP DESTROY s g2
        XGROUP DESTROY missing g2
        XGROUP DESTROY s
        XGROUP CREATECONSUMER s g alice
        XGROUP CREATECONSUMER s g alice
        XGROUP CREATECONSUMER s nog alice
        XGROUP CREATECONSUMER missing g alice
        XGROUP DELCONSUMER s g alice
        XGROUP DELCONSUMER s g alice
        XGROUP DELCONSUMER s nog alice
        XGROUP DELCONSUMER s g
        XGROUP FOO s g
        XGROUP FOO
        XGROUP
        XGROUP HELP
        XGROUP HELP extra
        SET str x
        XGROUP CREATE str g $
        XGROUP DESTROY str g
        XGROUP CREATE str g $ MKSTREAM
    """)


def test_xreadgroup_and_xack(diff: Differ) -> None:
    diff.run("""
        XADD s 1-1 a 1
        XADD s 2-1 b 2
        XADD s 3-1 c 3
        XGROUP CREATE s g 0
        XREADGROUP GROUP g alice COUNT 1 STREAMS s >
        XREADGROUP GROUP g bob STREAMS s >
        XREADGROUP GROUP g bob STREAMS s >
        XREADGROUP GROUP g alice STREAMS s 0
        XREADGROUP GROUP g bob STREAMS s 0
        XREADGROUP GROUP g bob COUNT 1 STREAMS s 2-1
        XREADGROUP GROUP g carol STREAMS s 0
        XADD s 4-1 d 4
        XDEL s 2-1
        XREADGROUP GROUP g bob STREAMS s 0
        XREADGROUP GROUP g bob NOACK STREAMS s >
        XREADGROUP GROUP g bob STREAMS s 0-0
        XACK s g 1-1 3-1 9-9
        XACK s g 1-1
        XACK s g 2-1 x
        XACK s g 2-1 2-1
        XACK s nog 1-1
        XACK missing g 1-1
        XACK s g
        XREADGROUP GROUP g bob STREAMS s 0
        XREADGROUP GROUP g bob STREAMS s $
        XREADGROUP GROUP nog bob STREAMS s >
        XREADGROUP GROUP g bob STREAMS missing >
        XREADGROUP GROUP g bob STREAMS s
        XREADGROUP GROUP g bob STREAMS s > 0
        XREADGROUP GROUP g bob STREAMS s x
        XREADGROUP GROUP g bob COUNT x STREAMS s >
        XREADGROUP GROUP g bob BLOCK -1 STREAMS s >
        XREADGROUP GROUP g bob FOO STREAMS s >
        XREADGROUP COUNT 1 STREAMS s >
        XREADGROUP GROUP g STREAMS s >
        XREADGROUP GROUP g bob STREAMS s >
        XREAD GROUP g bob STREAMS s >
        XREAD NOACK STREAMS s 0
        XADD t 1-1 x y
        XGROUP CREATE t g $
        XADD t 2-1 x y
        XREADGROUP GROUP g bob STREAMS s t > >
        XADD s 5-1 e 5
        XREADGROUP GROUP g bob STREAMS s t > >
        XREADGROUP GROUP g bob STREAMS s t 0 0
        XREADGROUP GROUP g bob STREAMS t t > 0
        XGROUP SETID s g 0
        XREADGROUP GROUP g alice COUNT 2 STREAMS s >
        XREADGROUP GROUP g bob STREAMS s 0
        XREADGROUP GROUP g bob COUNT 0 STREAMS s 18446744073709551615-18446744073709551615
        XGROUP DELCONSUMER s g alice
        XGROUP DELCONSUMER s g bob
        XREADGROUP GROUP g bob STREAMS s 0
        SET str x
        XREADGROUP GROUP g bob STREAMS str >
        XACK str g 1-1
    """)


def test_xpending(diff: Differ) -> None:
    diff.run("""
        XPENDING s g
        XGROUP CREATE s g $ MKSTREAM
        XPENDING s g
        XPENDING s g - + 10
        XADD s 1-1 a 1
        XADD s 2-1 b 2
        XADD s 3-1 c 3
        XADD s 4-1 d 4
        XREADGROUP GROUP g bob COUNT 1 STREAMS s >
        XREADGROUP GROUP g alice COUNT 2 STREAMS s >
        XREADGROUP GROUP g carol NOACK STREAMS s >
        XGROUP CREATECONSUMER s g dave
        XPENDING s g
        XPENDING nos g
        XPENDING s nog
        XPENDING s g - +
        XPENDING s g IDLE 0 - +
        XPENDING s g IDLE x - + 10
        XPENDING s g - + x
        XPENDING s g x + 10
        XPENDING s g - x 10
        XPENDING s g (18446744073709551615-18446744073709551615 + 10
        XPENDING s g - (0-0 10
        XPENDING s g - + 0
        XPENDING s g - + -5
        XPENDING s g - + 10 nobody
        XPENDING s g - + 10 carol
        SET str x
        XPENDING str g
    """)
    for args in [
        ("- + 10",),
        ("- + 2",),
        ("(1-1 + 10",),
        ("- (3-1 10",),
        ("2 3 10",),
        ("- + 10 alice",),
        ("- + 10 bob",),
        ("- + 10 bob alice carol",),
        ("IDLE 0 - + 10",),
        ("IDLE 100000000 - + 10",),
        ("IDLE 0 - + 10 alice",),
    ]:
        diff.check("XPENDING", "s", "g", *args[0].split(), normalize=_no_idle)
    diff.check("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0")
    diff.check("XPENDING", "s", "g", "-", "+", "10", normalize=_no_idle)
    diff.run("""
        XACK s g 2-1 1-1
        XPENDING s g
        XGROUP DELCONSUMER s g alice
        XPENDING s g
    """)


def test_xreadgroup_blocks_until_xadd(diff: Differ) -> None:
    """A blocked XREADGROUP `>` is served by the next XADD; BLOCK on history or with
    entries waiting answers at once; a timeout answers a null array."""
    diff.run("""
        XGROUP CREATE s g $ MKSTREAM
        XREADGROUP GROUP g c BLOCK 10 STREAMS s >
        XREADGROUP GROUP g c BLOCK 0 STREAMS s 0
        XADD s 1-1 a 1
        XREADGROUP GROUP g c BLOCK 0 STREAMS s >
    """)
    _blocked_then(diff, "XADD s 2-1 b 2")
    diff.run("""
        XPENDING s g
        XREADGROUP GROUP g c STREAMS s 0
    """)
    diff.run("XGROUP SETID s g $")
    _blocked_then(diff, "XGROUP SETID s g 1-0", "XADD s 3-1 c 3")
    _blocked_then(diff, "XGROUP DESTROY s g")
    diff.run("XGROUP CREATE s g $")
    _blocked_then(diff, "DEL s")
    diff.run("XGROUP CREATE s g $ MKSTREAM")
    _blocked_then(diff, "SET s x")


def test_block_refused_in_scripts(diff: Differ) -> None:
    diff.run("""
        XGROUP CREATE s g $ MKSTREAM
        EVAL "return redis.pcall('xreadgroup','GROUP','g','c','BLOCK','0','STREAMS','s','>')" 0
        EVAL "return redis.pcall('XREAD','BLOCK','0','STREAMS','s','0')" 0
        EVAL "return redis.pcall('XREADGROUP','GROUP','g','c','STREAMS','s','>')" 0
        XADD s 1-1 a 1
        EVAL "return redis.pcall('XREADGROUP','GROUP','g','c','STREAMS','s','>')" 0
        EVAL "return redis.pcall('XPENDING','s','g')" 0
        EVAL "return redis.pcall('XACK','s','g','1-1')" 0
    """)


def _blocked_then(diff: Differ, *writes: str) -> None:
    """A client blocks in XREADGROUP `>` on s (group g) on each server; the last of
    `writes` wakes it (the ones before must not)."""
    blocked = [RawClient(c.sock.getpeername()[1]) for c in (diff.ref, diff.ours)]
    for c in blocked:
        if diff.resp == 3:
            c.call("HELLO", "3")
        c.send(encode_command("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"))
    for c in (diff.ref, diff.ours):
        _wait_blocked(c)
    for write in writes:
        diff.run(write)
    replies = [c.read_reply() for c in blocked]
    assert replies[0] == replies[1], (writes, replies)
    diff.record(1, True)
    for c in blocked:
        c.close()


def test_group_ops_undo_exactly() -> None:
    """Random xgset/xgupd ops: each undo gives back the exact prior stream, and undoing
    the undo gives back the state after the op."""
    rnd = random.Random(14)
    db = Database(0)
    key = b"s"
    apply_op(db, key, ("restore", Stream(), None))
    for i in range(1, 30):
        apply_op(db, key, ("xadd", (i, 0), (b"f", b"%d" % i)))
    names = [b"g1", b"g2", b"g3"]
    cons = [b"a", b"b", b"c"]
    for step in range(2000):
        st = db.data[key]
        assert isinstance(st, Stream)
        before = st.copy()
        gname = rnd.choice(names)
        g = st.groups.get(gname)
        if g is None or rnd.random() < 0.1:
            state = (
                None
                if g is not None and rnd.random() < 0.5
                else ((rnd.randint(0, 30), 0), -1, (), ())
            )
            op: tuple[object, ...] = ("xgset", gname, state)
        else:
            ids = [(rnd.randint(1, 30), 0) for _ in range(rnd.randint(0, 4))]
            pel_set = tuple(
                (sid, step, rnd.randint(1, 3), rnd.choice(cons)) for sid in dict.fromkeys(ids)
            )
            pel_del = tuple(
                x
                for x in dict.fromkeys(rnd.sample(sorted(g.pel), min(2, len(g.pel))))
                if x not in dict.fromkeys(ids)
            )
            seen = tuple(
                (c, None if c in g.consumers and rnd.random() < 0.3 else step)
                for c in rnd.sample(cons, rnd.randint(0, 2))
            )
            meta = ((rnd.randint(0, 30), 0), rnd.randint(-1, 9)) if rnd.random() < 0.5 else None
            op = ("xgupd", gname, meta, seen, pel_set, pel_del)
        undo = apply_op(db, key, op)
        after = st.copy()
        redo = [u for o in reversed(undo) for u in apply_op(db, key, o)]
        assert db.data[key] == before, op
        for o in reversed(redo):
            apply_op(db, key, o)
        assert db.data[key] == after, op
    assert any(isinstance(v, Stream) and v.groups for v in db.data.values())


def test_group_state_is_versioned() -> None:
    """TS.REVERT of the stream to a version brings back its group state of then."""
    s, _ = make_session()
    run(s, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    for i in range(1, 5):
        run(s, "XADD", "s", f"{i}-0", "f", "v")
    run(s, "XREADGROUP", "GROUP", "g", "a", "COUNT", "2", "STREAMS", "s", ">")
    v1 = run(s, "TS.VERSION")
    then = run(s, "XPENDING", "s", "g")
    run(s, "XREADGROUP", "GROUP", "g", "b", "STREAMS", "s", ">")
    run(s, "XACK", "s", "g", "1-0", "3-0")
    run(s, "XGROUP", "CREATE", "s", "g2", "$")
    assert run(s, "XPENDING", "s", "g") != then
    assert run(s, "TS.REVERT", "s", "VERSION", str(v1)) == 1
    assert run(s, "XPENDING", "s", "g") == then == [2, b"1-0", b"2-0", [[b"a", b"2"]]]
    assert [x[b"name"] for x in run(s, "XINFO", "GROUPS", "s")] == [b"g"]
    got = run(s, "XREADGROUP", "GROUP", "g", "b", "STREAMS", "s", ">")
    assert [e[0] for e in got[0][1]] == [b"3-0", b"4-0"]


def test_pel_and_last_delivered_id_survive_kill9(tmp_path: Path) -> None:
    args = ["--storage", f"file://{tmp_path}/store", "--durability", "sync"]
    p = start_temporalstore(args)
    r = client(p)
    try:
        r.xgroup_create("s", "g", id="0", mkstream=True)
        for i in range(1, 11):
            r.xadd("s", {"n": str(i)}, id=f"{i}-0")
        r.xreadgroup("g", "alice", {"s": ">"}, count=4)
        r.xreadgroup("g", "bob", {"s": ">"}, count=3)
        r.xreadgroup("g", "bob", {"s": "0"})
        assert r.xack("s", "g", "1-0", "2-0", "6-0") == 3
        r.xgroup_create("s", "g2", id="$", entries_read=10)
        before = _group_state(r)
    finally:
        r.close()
    kill9(p)
    q = start_temporalstore(args)
    r = client(q)
    try:
        assert _group_state(r) == before
        assert r.xpending("s", "g") == {
            "pending": 4,
            "min": b"3-0",
            "max": b"7-0",
            "consumers": [{"name": b"alice", "pending": 2}, {"name": b"bob", "pending": 2}],
        }
        got = r.xreadgroup("g", "carol", {"s": ">"})
        assert [e[0] for e in got[0][1]] == [b"8-0", b"9-0", b"10-0"]
    finally:
        r.close()
        q.stop()


def _group_state(r: redis.Redis) -> list[Any]:
    raw = RawClient(r.connection_pool.connection_kwargs["port"])
    try:
        summary = parse(raw.call("XPENDING", "s", "g"))
        ext = _no_idle(raw.call("XPENDING", "s", "g", "-", "+", "100"))
        hist = {
            c: parse(raw.call("XREADGROUP", "GROUP", "g", c, "COUNT", "0", "STREAMS", "s", "99"))
            for c in ("alice", "bob")
        }
        g2 = parse(raw.call("XREADGROUP", "GROUP", "g2", "x", "STREAMS", "s", ">"))
    finally:
        raw.close()
    return [summary, ext, hist, g2]


def test_xclaim_and_xautoclaim(diff: Differ) -> None:
    diff.run("""
        XCLAIM s g c 0 1-1
        XADD s 1-1 a 1
        XADD s 2-1 b 2
        XADD s 3-1 c 3
        XADD s 4-1 d 4
        XADD s 5-1 e 5
        XCLAIM s g c 0 1-1
        XGROUP CREATE s g 0
        XREADGROUP GROUP g alice STREAMS s >
        XCLAIM s g bob 0 1-1 2-1
        XCLAIM s g bob 100000000 3-1
        XCLAIM s g bob -5 3-1 JUSTID
        XCLAIM s g bob 0 4-1 RETRYCOUNT 7 JUSTID
        XCLAIM s g bob 0 4-1 4-1 4-1 JUSTID
        XCLAIM s g bob 0 4-1 4-1 4-1
        XCLAIM s g bob 100000000 4-1 4-1
        XCLAIM s g bob x 1-1
        XCLAIM s g bob 0 1-1 FOO
        XCLAIM s g bob 0 1-1 -
        XCLAIM s g bob 0 1-1 IDLE x
        XCLAIM s g bob 0 1-1 TIME x
        XCLAIM s g bob 0 1-1 RETRYCOUNT x
        XCLAIM s g bob 0 1-1 LASTID x
        XCLAIM s g bob 0 1-1 IDLE
        XCLAIM s g bob 0 FORCE
        XCLAIM s nog bob 0 1-1
        XCLAIM nos g bob 0 1-1
        XCLAIM s g bob 0 9-9 FORCE
        XDEL s 5-1
        XCLAIM s g bob 0 5-1 5-1
        XCLAIM s g bob 0 5-1
        XADD s 6-1 f 6
        XCLAIM s g carol 0 6-1 FORCE
        XCLAIM s g carol 0 6-1 FORCE JUSTID
        XCLAIM s g carol 0 2-1 LASTID 9-9 JUSTID
        XCLAIM s g carol 0 2-1 LASTID 1-1 RETRYCOUNT 0 IDLE 100 TIME 5 FORCE
        XPENDING s g
        XREADGROUP GROUP g carol STREAMS s 0
        XREADGROUP GROUP g alice STREAMS s >
        XADD s 10-1 x y
        XREADGROUP GROUP g alice STREAMS s >
        SET str x
        XCLAIM str g bob 0 1-1
    """)
    diff.check("XPENDING", "s", "g", "-", "+", "100", normalize=_no_idle)
    diff.run("""
        XAUTOCLAIM s g dave 0 0 COUNT 2
        XAUTOCLAIM s g dave 0 0 COUNT 2 JUSTID
        XAUTOCLAIM s g dave 0 (2-1 COUNT 1
        XAUTOCLAIM s g dave 100000000 0
        XAUTOCLAIM s g dave 0 0 JUSTID
        XAUTOCLAIM s g dave 0 0
        XDEL s 1-1 3-1
        XAUTOCLAIM s g erin 0 0 COUNT 1
        XAUTOCLAIM s g erin 0 0 COUNT 1
        XAUTOCLAIM s g erin 0 0
        XAUTOCLAIM s g erin 0 - COUNT 100
        XAUTOCLAIM s g erin x 0
        XAUTOCLAIM s g erin -1 0 COUNT 0
        XAUTOCLAIM s g erin 0 0 COUNT x
        XAUTOCLAIM s g erin 0 0 COUNT 576460752303423488
        XAUTOCLAIM s g erin 0 0 COUNT 922337203685477581
        XAUTOCLAIM s g erin 0 0 FOO
        XAUTOCLAIM s g erin 0 x
        XAUTOCLAIM s g erin 0 (18446744073709551615-18446744073709551615
        XAUTOCLAIM s nog erin 0 0
        XAUTOCLAIM nos g erin 0 0
        XAUTOCLAIM str g erin 0 0
        XAUTOCLAIM str g erin 0 0 COUNT 0
        XPENDING s g
    """)
    diff.check("XPENDING", "s", "g", "-", "+", "100", normalize=_no_idle)


def _no_consumer_idle(reply: bytes) -> Any:
    """An XINFO CONSUMERS reply with each consumer's idle time dropped."""
    kind, items = parse(reply)
    if kind != "*":
        return (kind, items)
    return [x[1][:-1] for x in items]


def test_xinfo_groups_and_consumers(diff: Differ) -> None:
    diff.run("""
        XINFO GROUPS s
        XINFO CONSUMERS s g
        XADD s 1-1 a 1
        XINFO GROUPS s
        XGROUP CREATE s g2 $
        XGROUP CREATE s g1 0
        XGROUP CREATE s g0 0 ENTRIESREAD 0
        XGROUP CREATE s g9 9-9
        XINFO GROUPS s
        XADD s 2-1 b 2
        XADD s 3-1 c 3
        XADD s 4-1 d 4
        XINFO GROUPS s
        XREADGROUP GROUP g1 alice COUNT 1 STREAMS s >
        XREADGROUP GROUP g0 alice COUNT 2 STREAMS s >
        XREADGROUP GROUP g2 alice NOACK STREAMS s >
        XINFO GROUPS s
        XDEL s 3-1
        XINFO GROUPS s
        XREADGROUP GROUP g1 bob STREAMS s >
        XINFO GROUPS s
        XGROUP SETID s g0 2-1 ENTRIESREAD 2
        XGROUP SETID s g2 0
        XINFO GROUPS s
        XDEL s 1-1 2-1 4-1
        XINFO GROUPS s
        XINFO CONSUMERS s nog
        XINFO CONSUMERS missing g1
        XINFO CONSUMERS s
        XINFO GROUPS missing
        XINFO GROUPS s extra
        XINFO HELP
        XINFO HELP extra
        XINFO FOO s
        XINFO
        SET str x
        XINFO GROUPS str
        XINFO CONSUMERS str g
    """)
    diff.check("XGROUP", "CREATECONSUMER", "s", "g1", "zed")
    for g in ("g0", "g1", "g2"):
        diff.check("XINFO", "CONSUMERS", "s", g, normalize=_no_consumer_idle)


def test_xsetid(diff: Differ) -> None:
    diff.run("""
        XSETID s 1-1
        XADD s 5-1 a 1
        XADD s 6-1 a 1
        XSETID s 5-9
        XSETID s 6-1
        XSETID s 10-0
        XADD s 10-0 a 1
        XSETID s 18446744073709551615-18446744073709551615
        XADD s * a 1
        XSETID s 17-0
        XSETID s 20-0 ENTRIESADDED 1
        XSETID s 20-0 ENTRIESADDED 2
        XSETID s 20-0 ENTRIESADDED -1
        XSETID s 20-0 ENTRIESADDED x
        XSETID s 20-0 ENTRIESADDED
        XSETID s 20-0 MAXDELETEDID 21-0
        XSETID s 20-0 MAXDELETEDID 19-0 ENTRIESADDED 50
        XGROUP CREATE s g 0
        XINFO GROUPS s
        XSETID s 18-0
        XSETID s 19-0
        XSETID s x
        XSETID s -
        XSETID s 30-0 FOO
        XSETID s 30-0 MAXDELETEDID x
        XDEL s 5-1 6-1
        XLEN s
        XSETID s 0-1
        XSETID s 19-0 MAXDELETEDID 0-0
        XADD s 5-* a 1
        XADD s 19-* a 1
        XINFO GROUPS s
        XSETID missing 1-1
        SET str x
        XSETID str 1-1
        XSETID str x
    """)


def test_worker_pool_survives_kill9_without_losing_or_redelivering_acked(
    tmp_path: Path,
) -> None:
    """Three redis-py workers read and ack through a group; the server is killed (-9)
    mid-way and restarted; the workers resume from their own pending history, then new
    entries. Every entry ends acknowledged (an XACK cut off by the kill may have landed
    unseen) and none is delivered after its ack."""
    args = ["--storage", f"file://{tmp_path}/store", "--durability", "sync"]
    total = 150
    p = start_temporalstore(args)
    r = client(p)
    for i in range(1, total + 1):
        r.xadd("jobs", {"n": str(i)}, id=f"{i}-0")
    r.xgroup_create("jobs", "workers", id="0")
    r.close()
    acked: set[bytes] = set()
    late: list[bytes] = []  # delivered again after an acknowledged XACK
    unsure: set[bytes] = set()  # XACK sent, the server killed before it replied
    lock = threading.Lock()

    def work(port: int, name: str, first: str, stop: threading.Event) -> None:
        w = redis.Redis(port=port, socket_timeout=30)
        cursor = first
        try:
            while not stop.is_set():
                got = w.xreadgroup("workers", name, {"jobs": cursor}, count=5)
                batch = got[0][1] if got else []
                if not batch:
                    if cursor == ">":
                        return
                    cursor = ">"
                    continue
                for sid, _ in batch:
                    with lock:
                        if sid in acked:
                            late.append(sid)
                    with lock:
                        unsure.add(sid)  # until the XACK's reply is read
                    if w.xack("jobs", "workers", sid) == 1:
                        with lock:
                            acked.add(sid)
                    with lock:
                        unsure.discard(sid)
        except (redis.ConnectionError, redis.TimeoutError):
            pass
        finally:
            w.close()

    names = ["w1", "w2", "w3"]
    stop = threading.Event()
    threads = [threading.Thread(target=work, args=(p.port, n, ">", stop)) for n in names]
    for t in threads:
        t.start()
    while len(acked) < total // 3 and any(t.is_alive() for t in threads):
        time.sleep(0.01)
    kill9(p)
    stop.set()
    for t in threads:
        t.join(30)
    assert total // 3 <= len(acked) < total
    q = start_temporalstore(args)
    try:
        resumed = threading.Event()
        threads = [threading.Thread(target=work, args=(q.port, n, "0", resumed)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert late == []
        assert len(unsure) <= len(names)
        assert acked | unsure == {b"%d-0" % i for i in range(1, total + 1)}
        r = client(q)
        assert r.xpending("jobs", "workers")["pending"] == 0
        r.close()
    finally:
        q.stop()


def _no_times(reply: bytes) -> Any:
    """A typed reply tree with every integer of 13 digits or more (ms times) zeroed."""

    def walk(x: Any) -> Any:
        if isinstance(x, tuple) and len(x) == 2 and x[0] == ":" and len(x[1]) >= 13:
            return (":", b"0")
        if isinstance(x, tuple | list):
            return type(x)(walk(y) for y in x)
        return x

    return walk(parse(reply))


def test_xinfo_stream(diff: Differ) -> None:
    diff.run("""
        XINFO STREAM s
        XGROUP CREATE s g $ MKSTREAM
        XINFO STREAM s
        XINFO STREAM s FULL
        XADD s 1-1 a 1
        XINFO STREAM s
        XINFO STREAM s FULL COUNT
        XINFO STREAM s FOO
        XINFO STREAM s FULL FOO 1
        XINFO STREAM s FULL COUNT x
        XINFO STREAM s FULL COUNT 1 extra
        SET str x
        XINFO STREAM str
    """)
    rnd = random.Random(7)
    ms = 1
    for step in range(400):
        k = rnd.random()
        if k < 0.8:
            ms += rnd.choice((0, 1, 1, 255, 256, 70000, 1 << 33))
            value = "x" * rnd.choice((1, 100, 1500))
            diff.check("XADD", "s", f"{ms}-{step}", "f", value)
        elif k < 0.9:
            diff.check("XDEL", "s", f"{ms}-{step - 1}", f"{ms}-{step - 3}")
        elif k < 0.95:
            diff.check("XTRIM", "s", "MAXLEN", "~", str(rnd.randint(0, 300)))
        else:
            diff.check("XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "s", ">")
        if step % 20 == 0:
            diff.check("XINFO", "STREAM", "s")
    diff.check("XINFO", "STREAM", "s")
    diff.check("XINFO", "STREAM", "s", "FULL", normalize=_no_times)
    diff.check("XINFO", "STREAM", "s", "FULL", "COUNT", "0", normalize=_no_times)
    diff.check("XINFO", "STREAM", "s", "FULL", "COUNT", "2", normalize=_no_times)
    diff.check("XINFO", "STREAM", "s", "FULL", "COUNT", "-1", normalize=_no_times)


def test_notifications(diff: Differ, sub: Pair) -> None:
    n = events(
        diff,
        sub,
        """
        XGROUP CREATE s g $ MKSTREAM
        XGROUP CREATE s g $ MKSTREAM
        XADD s 1-1 a 1
        XADD s 2-1 a 1
        XGROUP CREATE s g2 0
        XGROUP SETID s g 0
        XGROUP CREATECONSUMER s g c1
        XGROUP CREATECONSUMER s g c1
        XREADGROUP GROUP g c1 COUNT 1 STREAMS s >
        XREADGROUP GROUP g c2 STREAMS s >
        XREADGROUP GROUP g2 c3 STREAMS s 0
        XACK s g 1-1
        XCLAIM s g c4 0 2-1
        XAUTOCLAIM s g c5 0 0
        XAUTOCLAIM s g c5 0 0
        XGROUP DELCONSUMER s g c1
        XGROUP DELCONSUMER s g nobody
        XGROUP DESTROY s g2
        XGROUP DESTROY s g2
        XSETID s 5-0
        XSETID s 1-0
        """,
        "KEA",
    )
    assert n >= 20
