"""The HTTP listener (`--http-port`): `/metrics` scraped from live servers, the same
authentication as RESP, and the explorer's JSON API (proxy/web.py, proxy/metrics.py,
proxy/explorer.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ServerProcess, start_temporalstore, until

HUGE = 96 * 1024 * 1024


def http_port(server: ServerProcess) -> int:
    for line in server.log_lines:
        m = re.search(r"serving HTTP on [^ ]+:(\d+)", line)
        if m:
            return int(m.group(1))
    raise AssertionError("no HTTP listener in the log:\n" + "".join(server.log_lines))


def get(
    server: ServerProcess, path: str, auth: tuple[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{http_port(server)}{path}")
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        req.add_header("Authorization", "Basic " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, dict(res.headers), res.read()
    except urllib.error.HTTPError as e:
        body = e.read()
        return e.code, dict(e.headers), body


def api(server: ServerProcess, path: str, auth: tuple[str, str] | None = None) -> Any:
    status, _, body = get(server, "/api/" + path, auth)
    assert status == 200, body
    return json.loads(body)


def scrape(server: ServerProcess, auth: tuple[str, str] | None = None) -> dict[str, float]:
    """Every sample of /metrics: 'name{label="v",...}' -> value."""
    status, headers, body = get(server, "/metrics", auth)
    assert status == 200, body
    assert headers["Content-Type"].startswith("text/plain; version=")
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[s.name + (f"{{{labels}}}" if labels else "")] = s.value
    return out


@pytest.fixture(scope="module")
def web() -> Iterator[ServerProcess]:
    p = start_temporalstore(["--http-port", "0", "--s3-put-cost", "0.005"])
    yield p
    p.stop()


def test_http_is_off_by_default(ts_server: ServerProcess) -> None:
    assert not any("serving HTTP" in line for line in ts_server.log_lines)


def test_metrics_move_with_writes(web: ServerProcess) -> None:
    r = redis.Redis(port=web.port)
    r.ping()
    before = scrape(web)
    for i in range(50):
        r.set(f"m:{i}", "x" * 100)
    r.execute_command("INCR", "m:counter")
    with pytest.raises(redis.ResponseError):
        r.execute_command("INCR", "m:0")  # not an integer: a failed call
    until(lambda: r.info("persistence")["unflushed_bytes"] == 0)
    after = scrape(web)

    def moved(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    assert moved('temporalstore_commands_total{command="set"}') == 50
    assert moved('temporalstore_commands_total{command="incr"}') == 2
    assert moved('temporalstore_command_errors_total{command="incr",kind="failed"}') == 1
    assert moved('temporalstore_errors_total{error="ERR"}') >= 1
    assert after['temporalstore_command_seconds_total{command="set"}'] > 0
    assert moved("temporalstore_lsn") == 51
    lsn = int(r.execute_command("TS.VERSION"))
    assert after["temporalstore_lsn"] == lsn
    assert after["temporalstore_durable_lsn"] == lsn  # unflushed_bytes was 0
    assert after["temporalstore_unflushed_bytes"] == 0
    assert moved("temporalstore_segments_written_total") >= 1
    assert moved("temporalstore_records_written_total") == 51
    raw = moved('temporalstore_segment_bytes_written_total{form="raw"}')
    assert raw > 50 * 100
    assert 0 < moved('temporalstore_segment_bytes_written_total{form="compressed"}') < raw
    puts = after['temporalstore_object_requests_total{op="put"}']
    assert moved('temporalstore_object_requests_total{op="put"}') >= 1
    assert after["temporalstore_object_put_seconds_count"] == puts
    assert after['temporalstore_object_put_seconds_bucket{le="+Inf"}'] == puts
    assert after["temporalstore_object_put_seconds_sum"] > 0
    cost = after["temporalstore_object_put_cost_dollars_total"]
    assert cost == pytest.approx(puts * 0.005 / 1000)
    assert after["temporalstore_connected_clients"] >= 1
    assert after["temporalstore_memory_used_bytes"] > 10_000_000
    assert after['temporalstore_keys{db="0"}'] >= 51
    assert after["temporalstore_replication_lag_seconds"] == 0
    # INFO persistence has the same request counts and the estimate.
    info = r.info("persistence")
    assert info["s3_put_cost_per_1000"] == 0.005
    assert info["object_requests_put"] >= puts
    assert float(info["s3_put_cost_estimate_usd"]) == pytest.approx(
        info["object_requests_put"] * 0.005 / 1000, abs=1e-6
    )


def test_replay_and_replica_figures() -> None:
    """After a restart the replay's records and duration; on a primary, the lag of
    each replica; on the replica, its own lag."""
    workdir = Path(tempfile.mkdtemp(prefix="ts-http-"))
    flags = ["--http-port", "0"]
    first = start_temporalstore(flags, workdir=workdir)
    r = redis.Redis(port=first.port)
    for i in range(20):
        r.set(f"k{i}", i)
    until(lambda: r.info("persistence")["unflushed_bytes"] == 0)
    first.proc.kill()  # no checkpoint at shutdown: the next start replays the records
    first.stop()
    primary = start_temporalstore(flags, workdir=workdir)
    replica = start_temporalstore(
        [*flags, "--replicaof", f"127.0.0.1 {primary.port}"], workdir=workdir
    )
    try:
        figures = scrape(primary)
        assert figures["temporalstore_replay_records"] >= 20
        assert figures["temporalstore_replay_seconds"] > 0
        assert figures["temporalstore_loading"] == 0
        p = redis.Redis(port=primary.port)
        until(lambda: p.info("replication")["connected_slaves"] == 1)
        p.set("after", 1)
        lag = "temporalstore_replica_lag_versions"

        def lags() -> dict[str, float]:
            return {k: v for k, v in scrape(primary).items() if k.startswith(lag + "{")}

        until(lambda: len(lags()) == 1 and next(iter(lags().values())) == 0)
        (name,) = lags()
        assert re.fullmatch(lag + r'\{replica="127\.0\.0\.1:\d+"\}', name)
        assert scrape(primary)["temporalstore_connected_replicas"] == 1
        rep = scrape(replica)
        assert rep["temporalstore_replication_lag_seconds"] >= 0
        assert rep['temporalstore_build_info{redis_version="7.0.15",role="slave"}'] == 1
    finally:
        replica.stop()
        primary.stop()


def test_same_password_and_acl_as_resp() -> None:
    server = start_temporalstore(["--http-port", "0", "--requirepass", "s3cret"])
    try:
        r = redis.Redis(port=server.port, password="s3cret")
        r.execute_command("ACL", "SETUSER", "reader", "on", ">rpw", "~app:*", "+@read", "-info")
        r.set("app:x", "visible")
        r.set("other", "hidden")
        status, headers, _ = get(server, "/metrics")
        assert status == 401
        assert headers["WWW-Authenticate"].startswith('Basic realm="temporalstore"')
        r.execute_command("ACL", "LOG", "RESET")
        status, _, body = get(server, "/metrics", ("default", "wrong"))
        assert status == 401
        assert b"WRONGPASS" in body
        (entry,) = r.acl_log()
        assert entry["reason"] == "auth" and entry["username"] == "default"
        assert get(server, "/metrics", ("default", "s3cret"))[0] == 200
        # A user who may not run INFO may not scrape what INFO shows.
        status, _, body = get(server, "/metrics", ("reader", "rpw"))
        assert status == 403 and b"NOPERM" in body
        # The explorer runs its verbs as the user: its key patterns apply.
        got = api(server, "value?key=app:x", ("reader", "rpw"))
        assert got["value"] == "visible"
        status, _, body = get(server, "/api/value?key=other", ("reader", "rpw"))
        assert status == 403 and b"NOPERM" in body
        assert get(server, "/api/overview")[0] == 401
    finally:
        server.stop()


def test_explorer_api(web: ServerProcess) -> None:
    r = redis.Redis(port=web.port)
    r.execute_command("TS.META", "AUTHOR", "alice", "MESSAGE", "first draft")
    r.set("doc:plan", "draft")
    r.execute_command("TS.SEAL", "api-s1", "TRIGGER", "deploy")
    r.execute_command("TS.META", "AUTHOR", "bob")
    r.set("doc:plan", "final")
    v2 = int(r.execute_command("TS.VERSION"))
    r.hset("doc:h", mapping={"a": "1", "b": "2"})
    r.zadd("doc:z", {"m": 1.5, "n": float("inf")})
    r.xadd("doc:s", {"f": "v"}, id="1-1")
    r.set(b"doc:\xff\xfe", b"\x00\xc3\xa9\x80")
    r.execute_command("TS.BRANCH", "CREATE", "api-b")
    written = int(r.execute_command("TS.VERSION"))
    o = api(web, "overview")
    assert o["version"] == written and o["user"] == "default"
    assert "api-b" in [b["name"] for b in o["branches"]]
    snap = next(s for s in o["snapshots"] if s["name"] == "api-s1")
    assert snap["trigger"] == "deploy"
    keys = api(web, "keys?pattern=doc:*&count=1000")
    assert keys["cursor"] == "0"
    assert ["doc:plan", "string"] in keys["keys"] and ["doc:z", "zset"] in keys["keys"]
    assert ["doc:\udcff\udcfe", "string"] in keys["keys"]  # bytes that are not UTF-8
    at_snap = api(web, "keys?pattern=doc:*&at=snapshot:api-s1")
    assert at_snap["keys"] == [["doc:plan", "string"]]
    h = api(web, "history?key=doc:plan")["versions"]
    assert [(e["author"], e["message"], e["command"]) for e in h] == [
        ("bob", None, "set"),
        ("alice", "first draft", "set"),
    ]
    first = h[1]["version"]
    assert api(web, f"value?key=doc:plan&version={first}")["value"] == "draft"
    assert api(web, f"value?key=doc:plan&version={v2}")["value"] == "final"
    assert api(web, "value?key=doc:h")["value"] == [["a", "1"], ["b", "2"]]
    z = api(web, "value?key=doc:z")
    assert (z["type"], z["value"]) == ("zset", [["m", 1.5], ["n", "inf"]])
    s = api(web, "value?key=doc:s")
    assert (s["type"], s["value"]) == ("stream", [["1-1", ["f", "v"]]])
    raw = api(web, "value?key=doc:%ff%fe")  # the exact bytes, percent-encoded
    assert (raw["type"], raw["value"]) == ("string", "\x00\u00e9\udc80")
    d = api(web, "diff?a=snapshot:api-s1&b=now&match=doc:*")
    assert d["a"] == "SNAPSHOT api-s1"
    assert ["doc:plan", "changed"] in d["changes"] and ["doc:h", "added"] in d["changes"]
    d = api(web, f"diff?a=version:{first}&b=version:{v2}&match=doc:*")
    assert d["changes"] == [["doc:plan", "changed"]]
    assert api(web, "diff?a=snapshot:api-s1&b=branch:api-b&match=doc:p*")["changes"] == [
        ["doc:plan", "changed"]
    ]
    status, _, body = get(web, "/api/value?key=doc:plan&at=snapshot:nope")
    assert status == 400 and json.loads(body) == {"error": "ERR no such snapshot 'nope'"}
    # Read-only: nothing the explorer did wrote a version, and no view it checked out
    # outlives its request.
    assert int(r.execute_command("TS.VERSION")) == written
    assert r.info("history")["views"] == 0
    page = get(web, "/")
    assert page[0] == 200 and b'<script src="explorer.js">' in page[2]
    assert get(web, "/explorer.js")[0] == 200


def test_a_huge_value_never_blocks_resp(web: ServerProcess) -> None:
    """A value of 96 MB (192 MB of JSON: every euro sign is \\u20ac) goes out in
    chunks, at the pace the client reads: RESP pings keep answering while it renders,
    and the server does not build the whole document in memory."""
    import socket
    import threading

    from tests.conftest import proc_status_kb

    r = redis.Redis(port=web.port)
    value = "\u20ac" * (HUGE // 3)
    r.set("huge", value)
    until(lambda: r.info("persistence")["unflushed_bytes"] == 0, timeout=60)
    sock = socket.create_connection(("127.0.0.1", http_port(web)))
    sock.sendall(b"GET /api/value?key=huge HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    rss_before = proc_status_kb(web.proc.pid)
    got = bytearray(sock.recv(1 << 20))
    # The client stops reading: the server must stop rendering (bounded memory) and go
    # on serving RESP.
    pings = []
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        r.ping()
        pings.append(time.monotonic() - t0)
        time.sleep(0.02)
    grown_mb = (proc_status_kb(web.proc.pid) - rss_before) / 1024
    assert grown_mb < 40, f"the server grew by {grown_mb:.0f} MB while the client did not read"
    done = threading.Event()

    def read_all() -> None:
        while chunk := sock.recv(1 << 20):
            got.extend(chunk)
        done.set()

    reader = threading.Thread(target=read_all, daemon=True)
    start = time.monotonic()
    reader.start()
    while not done.is_set():
        t0 = time.monotonic()
        r.ping()
        pings.append(time.monotonic() - t0)
        time.sleep(0.005)
    took = time.monotonic() - start
    reader.join()
    sock.close()
    head, _, body = bytes(got).partition(b"\r\n\r\n")
    assert b"200 OK" in head.split(b"\r\n")[0]
    assert b"Transfer-Encoding: chunked" in head
    decoded = _unchunk(body)
    assert len(decoded) > 2 * HUGE
    doc = json.loads(decoded)
    assert doc["type"] == "string" and doc["value"] == value
    # While it rendered 192 MB (longer than any one ping took), every ping answered.
    assert max(pings) < 0.5, f"a ping waited {max(pings):.3f} s (render took {took:.2f} s)"
    assert len(pings) > 20
    r.delete("huge")


def _unchunk(body: bytes) -> bytes:
    out = bytearray()
    i = 0
    while True:
        j = body.index(b"\r\n", i)
        size = int(body[i:j], 16)
        if size == 0:
            return bytes(out)
        out += body[j + 2 : j + 2 + size]
        i = j + 2 + size + 2


def test_protected_mode_refuses_http_from_beyond_loopback() -> None:
    """As for RESP: no password and protected mode on, a client from another host is
    refused (the guard, with the peer address another host would have)."""
    from unittest import mock

    from aiohttp.test_utils import make_mocked_request
    from aiohttp.web import HTTPForbidden, Response
    from prometheus_client.registry import CollectorRegistry

    from commands.session import ServerState
    from proxy.web import HttpServer
    from store import Store

    state = ServerState(Store())
    web = HttpServer(state, CollectorRegistry())

    async def ok(request: Any) -> Response:
        return Response(text="served")

    def request_from(host: str) -> Any:
        transport = mock.Mock()
        transport.get_extra_info.return_value = (host, 40000)
        return make_mocked_request("GET", "/metrics", transport=transport)

    def answer(host: str) -> Any:
        async def go() -> Any:
            return await web._guard(request_from(host), ok)

        return asyncio.run(go())

    with pytest.raises(HTTPForbidden):
        answer("192.0.2.7")
    assert answer("127.0.0.1").text == "served"
    state.config.params["protected-mode"] = "no"
    assert answer("192.0.2.7").text == "served"


def test_metrics_show_replay_progress_while_loading() -> None:
    """/metrics answers during the replay (the listener starts first): `loading` is 1
    and `loading_records` grows, then `replay_records` holds the total."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    workdir = Path(tempfile.mkdtemp(prefix="ts-http-load-"))
    first = start_temporalstore(["--checkpoint-every-records", "100000000"], workdir=workdir)
    r = redis.Redis(port=first.port)
    pipe = r.pipeline(transaction=False)
    records = 300_000
    for i in range(records):
        pipe.set(f"k{i % 1000}", i)
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()
    until(lambda: r.info("persistence")["unflushed_bytes"] == 0, timeout=60)
    first.proc.kill()  # no checkpoint: the next start replays every record
    first.stop()
    cmd = ["proxy.cli", "serve", "--port=0", "--http-port=0", f"--storage=file://{workdir}/data"]
    proc = subprocess.Popen(
        [sys.executable, "-m", *cmd],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    server = ServerProcess(proc, 0, workdir)
    try:
        assert proc.stderr is not None
        while not any("serving HTTP" in line for line in server.log_lines):
            line = proc.stderr.readline().decode()
            assert line, "".join(server.log_lines)
            server.log_lines.append(line)
        seen: list[tuple[float, float]] = []
        while True:
            figures = scrape(server)
            flag = figures["temporalstore_loading"]
            seen.append((flag, figures["temporalstore_loading_records"]))
            if not flag:
                break
        loading = [n for flag, n in seen if flag == 1]
        assert loading, "no scrape during the replay"
        assert loading == sorted(loading)
        assert figures["temporalstore_replay_records"] >= records
        assert figures["temporalstore_replay_seconds"] > 0
        assert figures["temporalstore_loading_records"] >= records
    finally:
        server.stop()


@pytest.mark.parametrize("cut", [0, 1, 2])
def test_json_pieces_cut_anywhere_decode_whole(cut: int) -> None:
    """A bulk string longer than a piece is decoded piece by piece: a UTF-8 sequence
    or an invalid byte split across two pieces comes out as decoding it whole does."""
    from proxy.jsonstream import PIECE, pieces

    value = b"a" * (PIECE - 3 + cut) + "\u20ac".encode() * 3 + b"\xff\xe2\x82" + b"z" * PIECE
    text = "".join(pieces({"v": [value, 1.5, float("-inf"), None, {b"f": b"\x80"}]}))
    assert len(list(pieces(value))) > 3  # cut into pieces
    assert json.loads(text) == {
        "v": [value.decode("utf-8", "surrogateescape"), 1.5, "-inf", None, [["f", "\udc80"]]]
    }


def test_put_errors_and_latency_under_storage_faults() -> None:
    """Injected slow PUTs land in the latency histogram's upper buckets; an outage's
    failed PUTs are counted as errors, and the writes become durable once it ends."""
    server = start_temporalstore(["--http-port", "0", "--fault-injection", "yes"])
    try:
        r = redis.Redis(port=server.port)
        before = scrape(server)
        r.execute_command("TS.FAULT", "LATENCY", "300")
        r.set("slow", 1)
        until(lambda: r.info("persistence")["unflushed_bytes"] == 0)
        r.execute_command("TS.FAULT", "LATENCY", "0")
        mid = scrape(server)
        fast = 'temporalstore_object_put_seconds_bucket{le="0.25"}'
        count = "temporalstore_object_put_seconds_count"
        # At least one PUT took 0.3 s or more: counted, but not within 0.25 s.
        assert mid[count] - mid[fast] > before[count] - before[fast]
        assert mid["temporalstore_object_put_seconds_sum"] >= 0.3
        r.execute_command("TS.FAULT", "OUTAGE", "ON")
        r.set("during-outage", 1)
        errors = 'temporalstore_object_request_errors_total{op="put"}'
        until(lambda: scrape(server)[errors] >= 2)
        assert scrape(server)["temporalstore_segment_put_failures_total"] >= 2
        assert scrape(server)["temporalstore_unflushed_bytes"] > 0
        r.execute_command("TS.FAULT", "OUTAGE", "OFF")
        until(lambda: scrape(server)["temporalstore_unflushed_bytes"] == 0, timeout=30)
        after = scrape(server)
        assert after["temporalstore_durable_lsn"] == after["temporalstore_lsn"]
    finally:
        server.stop()


def test_explorer_answers_under_write_load(web: ServerProcess) -> None:
    """Pipelined writes to the key being looked at, from another connection, while the
    explorer reads its history, its value and a diff: every answer comes, promptly,
    and shows the writes moving."""
    import threading

    r = redis.Redis(port=web.port)
    r.set("load:hot", 0)
    r.execute_command("TS.SEAL", "load-start")
    stop = threading.Event()

    def write() -> None:
        w = redis.Redis(port=web.port)
        n = 0
        while not stop.is_set():
            pipe = w.pipeline(transaction=False)
            for _ in range(500):
                n += 1
                pipe.set("load:hot", n)
                pipe.hset("load:h", f"f{n % 100}", n)
            pipe.execute()

    writer = threading.Thread(target=write)
    writer.start()
    slowest = 0.0
    newest: list[int] = []
    try:
        until(lambda: r.get("load:hot") != b"0")
        for _ in range(15):
            t0 = time.monotonic()
            versions = api(web, "history?key=load:hot&count=50")["versions"]
            assert api(web, f"value?key=load:hot&version={versions[0]['version']}")["value"]
            diff = api(web, "diff?a=snapshot:load-start&b=now&match=load:*")
            assert ["load:hot", "changed"] in diff["changes"]
            slowest = max(slowest, time.monotonic() - t0)
            newest.append(versions[0]["version"])
            time.sleep(0.05)
    finally:
        stop.set()
        writer.join()
    assert newest == sorted(newest) and newest[-1] > newest[0]
    assert slowest < 5.0, f"three explorer requests took {slowest:.2f} s under write load"
