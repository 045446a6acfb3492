"""Protocol fuzzing against a running server process: random and mutated RESP frames
(real commands with random arguments, random names and arities, inline requests,
byte flips, truncations, absurd or negative lengths, nested and RESP3-only types,
garbage) over many connections at once. Between rounds: the process is alive, a
witness client on its own connection and a fresh one get exact answers, and the
server's memory stays bounded.

A seeded generator in the style of Hypothesis strategies (Hypothesis itself would
spend more time shrinking and bookkeeping than sending at a million frames); the
seed is printed and recorded with the figures, `TS_SEED=<seed>` repeats a run.

Left out of the random commands, and why:
- SHUTDOWN stops the server, CLIENT KILL can close the witness, CONFIG SET and ACL
  SETUSER can set a password or limits under it: each is the command working as
  designed.
- REPLICAOF/SLAVEOF turn the server into a replica of some address: writes are then
  refused and every client (the witness too) is closed, as designed.
- CLIENT PAUSE holds every client's commands (the witness's too) for up to the
  timeout it is given, as designed.
- SYNC and PSYNC make the connection a Redis replica's link: what follows is an RDB
  payload (`$<len>` and no CRLF after it) and the replication stream, as from
  redis-server, not replies the check below can parse. A random name that is one of
  these excluded commands gets a prefix.
- SETRANGE, SETBIT and BITFIELD allocate up to 512 MB for one offset, and
  SRANDMEMBER/HRANDFIELD/ZRANDMEMBER with a negative count reply that many elements:
  both are requests for gigabytes, as in Redis, not protocol abuse. PFSELFTEST
  runs for seconds by design.
Every payload is screened for these names (as substrings, any case), so a mutation
cannot make one either. Blocking commands (BLPOP, XREAD BLOCK, WAITAOF, ...) are
fuzzed: each connection half-closes after its payload and the server must then
close it, blocked or not.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from pathlib import Path
from typing import NamedTuple

import hiredis
import pytest

import commands.families  # noqa: F401  (fills the command table)
from commands.registry import COMMANDS
from tests.conftest import ServerProcess, start_temporalstore
from tests.reliability import figure, rss_mb, sampling, seeded, sized
from tests.resp_client import RawClient, encode_command, parse
from tests.test_protocol import same

EXCLUDED = {b"shutdown", b"config", b"client|kill", b"acl|setuser", b"setrange"}
EXCLUDED |= {b"setbit", b"bitfield", b"pfselftest"}
EXCLUDED |= {b"srandmember", b"hrandfield", b"zrandmember"}
EXCLUDED |= {b"replicaof", b"slaveof", b"client|pause", b"sync", b"psync"}
FORBIDDEN = (b"shutdown", b"config", b"kill", b"setuser", b"setrange", b"setbit", b"pause")
FORBIDDEN += (b"bitfield", b"pfselftest")
FORBIDDEN += (b"randmember", b"randfield", b"replicaof", b"slaveof")
COSTLY = {b"command", b"save"}  # tens of ms each without arguments: sent 50 times rarer

KEYS = [b"k0", b"k1", b"k2", b"k3", b"ns:tb", b"ns:tb:k", b"{tag}a", b"{tag}b", b"", b"k\x00"]
INTS = [
    b"0", b"1", b"-1", b"2", b"3", b"10", b"100", b"-100", b"65536", b"2147483647",
    b"-2147483648", b"4294967296", b"9223372036854775807", b"-9223372036854775808",
    b"9223372036854775808", b"1e3", b"0.5", b"-0", b"inf", b"-inf", b"+inf", b"nan",
    b"00", b" 1", b"0x10", b"1.7976931348623157e308", b"-1.5", b"12abc",
]  # fmt: skip
WORDS = [
    b"EX", b"PX", b"EXAT", b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR", b"GET", b"KEEPTTL",
    b"WITHSCORES", b"LIMIT", b"COUNT", b"MATCH", b"TYPE", b"REV", b"BYSCORE", b"BYLEX",
    b"MAXLEN", b"MINID", b"~", b"=", b"*", b"$", b"+", b"-", b"(1", b"[a", b"STREAMS",
    b"BLOCK", b"LEFT", b"RIGHT", b"BEFORE", b"AFTER", b"AGGREGATE", b"SUM", b"MIN", b"MAX",
    b"WEIGHTS", b"ID", b"RANK", b"ASYNC", b"SYNC", b"DURABILITY", b"RETAIN", b"VERSIONS",
    b"MS", b"ALL", b"SNAPSHOT-EVERY", b"AT", b"BACK", b"VERSION", b"TIME", b"SNAPSHOT",
    b"BRANCH", b"STRATEGY", b"OURS", b"THEIRS", b"AUTHOR", b"MESSAGE", b"TRIGGER", b"HEAD",
    b"ON", b"OFF", b"SKIP", b"YES", b"NO", b"AUTH", b"SETNAME", b"default", b"3", b"2",
    b"IDLETIME", b"FREQ", b"ENCODING", b"RESET", b"LATENCY", b"OUTAGE", b"NOMKSTREAM",
]  # fmt: skip
MUTANT_BYTES = b"\r\n*$-+:0129%~>_#(,!=|\x00\xff "
RESP3_TYPES = b"+-:%~>_#(,!=|"


class Spec(NamedTuple):
    """A command (or container subcommand) we serve: its name words, arity and key
    positions (first, last, step; last -1 is the last argument)."""

    words: list[bytes]
    arity: int
    keys: tuple[int, int, int]


def command_specs() -> list[Spec]:
    out: list[Spec] = []
    for name, cmd in COMMANDS.items():
        if name != name.lower() or name in EXCLUDED:
            continue
        for sub, subcmd in (cmd.subcommands or {}).items():
            if name + b"|" + sub not in EXCLUDED:
                keys = (subcmd.first_key, subcmd.last_key, subcmd.step)
                out.append(Spec([name, sub], subcmd.arity, keys))
        out.append(Spec([name], cmd.arity, (cmd.first_key, cmd.last_key, cmd.step)))
    return out


class Fuzzer:
    """Strategies for one request frame, and payloads of many."""

    def __init__(self, rng_seed: int) -> None:
        self.rng = random.Random(rng_seed)
        specs = command_specs()
        self.cheap = [c for c in specs if c.words[0] not in COSTLY]
        self.costly = [c for c in specs if c.words[0] in COSTLY]

    # -- arguments and commands

    def arg(self) -> bytes:
        rng = self.rng
        r = rng.random()
        if r < 0.1:
            return rng.choice(KEYS)
        if r < 0.35:
            return rng.choice(INTS)
        if r < 0.6:
            return rng.choice(WORDS)
        if r < 0.7:
            return b"%d" % rng.randrange(-1000, 100000)
        if r < 0.985:
            return rng.randbytes(rng.randrange(0, 24))
        return rng.randbytes(rng.randrange(24, 4096))

    def command(self) -> list[bytes]:
        """A real command with random arguments; its key positions take keys from a
        small pool, so the keyspace (and the history it keeps) stays bounded."""
        rng = self.rng
        spec = rng.choice(self.costly if rng.random() < 0.02 else self.cheap)
        argv = [w.upper() if rng.random() < 0.5 else w for w in spec.words]
        if rng.random() < 0.6:
            n = abs(spec.arity) - len(argv) + (rng.randrange(0, 4) if spec.arity < 0 else 0)
        else:
            n = rng.choice((0, 0, 1, 1, 2, 2, 3, 4, 5, 6, 9, rng.randrange(10, 60)))
        argv += [self.arg() for _ in range(max(0, n))]
        first, last, step = spec.keys
        if first:
            last = last if last >= 0 else len(argv) + last
            for i in range(first, min(last, len(argv) - 1) + 1, step or 1):
                argv[i] = rng.choice(KEYS)
        return argv

    # -- frames that keep the connection open

    def valid(self) -> bytes:
        return encode_command(*self.command())

    def random_name(self) -> bytes:
        rng = self.rng
        name = rng.choice((rng.randbytes(rng.randrange(1, 12)), rng.choice(WORDS)))
        if name.lower() in EXCLUDED:
            name = b"x" + name  # SYNC is in WORDS (an argument of FLUSHALL, SCRIPT FLUSH)
        return encode_command(name, *[self.arg() for _ in range(rng.randrange(0, 6))])

    def inline(self, balanced: bool = True) -> bytes:
        rng = self.rng
        words = []
        for w in self.command():
            w = w.replace(b"\r", b"").replace(b"\n", b"")
            style = rng.random()
            if style < 0.15:
                w = b'"' + w.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
            elif style < 0.2 and b"'" not in w:
                w = b"'" + w + b"'"
            elif not w or any(c in w for c in b" \t\"'\x00\x0b\x0c"):
                w = b"x"
            words.append(w)
        line = rng.choice((b" ", b"  ", b"\t")).join(words)
        if not balanced:
            line += rng.choice((b' "open', b" 'open", b' "a"b', b' "\\x4'))
        return line + rng.choice((b"\r\n", b"\n"))

    def empty(self) -> bytes:
        return self.rng.choice((b"*0\r\n", b"*-1\r\n", b"\r\n", b"\n", b"  \r\n"))

    # -- frames that may end the connection

    def mutated(self) -> bytes:
        rng = self.rng
        data = bytearray(rng.choice((self.valid, self.inline))())
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(data))
            kind = rng.randrange(7)
            if kind == 0:
                data[i] ^= 1 << rng.randrange(8)
            elif kind == 1:
                data[i] = rng.choice(MUTANT_BYTES)
            elif kind == 2:
                data[i:i] = rng.randbytes(rng.randrange(1, 8))
            elif kind == 3:
                del data[i : i + rng.randrange(1, 8)]
            elif kind == 4:
                data[i:i] = data[i : i + rng.randrange(1, 16)]
            elif kind == 5:
                del data[i:]
            else:
                j = data.find(rng.choice((b"*", b"$")))
                if j >= 0:
                    end = data.find(b"\r\n", j)
                    data[j + 1 : end if end > j else j + 1] = rng.choice(INTS)
            if not data:
                data = bytearray(b"*")
        return bytes(data)

    def structural(self) -> bytes:
        rng = self.rng
        big = rng.choice((b"99999999999", b"3000000000", b"2147483648", b"1048577", b"9" * 30))
        t = rng.choice(RESP3_TYPES)
        return rng.choice(
            (
                b"*" + big + b"\r\n",
                b"*-5\r\n",
                b"*1\r\n$-5\r\n",
                b"*1\r\n$" + big + b"\r\n",
                b"*1\r\n$536870913\r\n",
                b"*1\r\n$536870912\r\nabc",
                b"*2\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n",
                b"*1\r\n:5\r\n",
                b"*1\r\n%c1\r\n+a\r\n" % t,
                b"%c1\r\n+a\r\n+b\r\n" % t,
                b"*1\r\n$3\r\nabcd\r\n",
                b"*1\r\n$3\r\nab",
                b"$5\r\nhello\r\n",
                b"*+1\r\n$4\r\nPING\r\n",
                b"*1\r\n$+4\r\nPING\r\n",
                b"* 1\r\n$4\r\nPING\r\n",
                b"*1\n$4\nPING\n",
                b"*1\r\n$4\r\nPING\r\r\n",
                b"*1\r\n$4\r\nPINGxx",
                b"*1\r\n$" + b"1" * 70000,
                b"*" + b"1" * 70000,
                b"P" * 70000,
                b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n",
                b"*1\r\n$0\r\n\r\n",
                b"*1\r\n$\r\n",
                b"*\r\n",
                b"\x00\x01\x02\r\n",
            )
        )

    def garbage(self) -> bytes:
        rng = self.rng
        return rng.randbytes(rng.randrange(1, 200 if rng.random() < 0.99 else 70000))

    # -- payloads

    def payload(self) -> tuple[bytes, int]:
        """One connection's bytes: mostly frames a server must answer and carry on
        after, now and then a hostile one in the middle, usually one at the end."""
        rng = self.rng
        frames: list[bytes] = []
        for _ in range(rng.randrange(1, 64)):
            r = rng.random()
            if r < 0.72:
                frames.append(self.valid())
            elif r < 0.8:
                frames.append(self.random_name())
            elif r < 0.93:
                frames.append(self.inline())
            elif r < 0.97:
                frames.append(self.empty())
            else:
                frames.append(self.mutated())
        if rng.random() < 0.75:
            hostile = rng.choice((self.mutated, self.mutated, self.structural, self.garbage))
            frames.append(hostile())
        elif rng.random() < 0.2:
            frames.append(self.inline(balanced=False))
        data = b"".join(frames)
        lowered = data.lower()
        if any(word in lowered for word in FORBIDDEN):
            return self.payload()
        return data, len(frames)


class Stats:
    def __init__(self, target: int) -> None:
        self.target = target
        self.lock = threading.Lock()
        self.frames = self.connections = self.bytes_sent = self.bytes_received = 0
        self.protocol_errors = self.reset_by_server = self.replies = 0
        self.stuck: list[str] = []
        self.stop = threading.Event()

    def claim(self, n: int) -> bool:
        with self.lock:
            if self.frames >= self.target or self.stop.is_set():
                return False
            self.frames += n
            self.connections += 1
            return True


def fuzz_connection(port: int, data: bytes, chunked: bool, stats: Stats) -> None:
    """Send one payload, half-close, read until the server closes the connection."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    replies = hiredis.Reader()
    answered = received = 0
    last: object = None
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if chunked:
                step = max(1, len(data) // 5)
                for i in range(0, len(data), step):
                    sock.sendall(data[i : i + step])
                    time.sleep(0.0005)
            else:
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # closed by the server mid-payload (a protocol error, QUIT)
        while True:
            try:
                chunk = sock.recv(1 << 20)
            except TimeoutError:
                stats.stuck.append(repr(data[:200]))
                return
            except ConnectionResetError:
                with stats.lock:
                    stats.reset_by_server += 1
                break
            if not chunk:
                break
            received += len(chunk)
            replies.feed(chunk)
            try:
                while (reply := replies.gets()) is not False:
                    answered += 1
                    last = reply
            except hiredis.ProtocolError as e:
                raise AssertionError(f"malformed reply ({e}) to {data[:500]!r}") from None
    finally:
        sock.close()
    with stats.lock:
        stats.bytes_sent += len(data)
        stats.bytes_received += received
        stats.replies += answered
        if isinstance(last, hiredis.ReplyError) and str(last).startswith("ERR Protocol error"):
            stats.protocol_errors += 1


def fuzz_worker(port: int, seed: int, stats: Stats, errors: list[str]) -> None:
    fuzzer = Fuzzer(seed)
    try:
        while True:
            data, n = fuzzer.payload()
            if not stats.claim(n):
                return
            fuzz_connection(port, data, fuzzer.rng.random() < 0.05, stats)
    except Exception as e:  # reported by the main thread
        errors.append(f"fuzz worker: {e!r}")
        stats.stop.set()


RETAINED = [
    (("TS.SNAPSHOTS",), ("TS.UNSEAL",)),
    (("TS.BRANCH", "LIST"), ("TS.BRANCH", "DROP")),
    (("TS.TABLE", "LIST"), ("TS.TABLE", "DROP")),
]


def reset_dataset(c: RawClient) -> None:
    """Drop what the fuzzed commands asked the server to keep (keys, sealed snapshots
    and the history they pin, branches, tables), so that memory measures the server,
    not the data."""
    assert c.call("FLUSHALL") == b"+OK\r\n"
    for listing, drop in RETAINED:
        _kind, items = parse(c.call(*listing))
        for _k, fields in items:
            assert fields[0] == ("$", b"name"), fields
            c.call(*drop, fields[1][1])


def witness_check(p: ServerProcess, witness: RawClient, n: int) -> None:
    """The server is alive and answers a client that plays by the rules, on a
    long-lived connection and on a new one."""
    assert p.proc.poll() is None, f"the server exited with {p.proc.returncode}"
    reset_dataset(witness)
    value = b"%d" % n
    witness.send(
        encode_command("MULTI")
        + encode_command("SET", "witness", value)
        + encode_command("GET", "witness")
        + encode_command("EXEC")
    )
    got = b"".join(witness.read_reply() for _ in range(4))
    expected = b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n$%d\r\n%b\r\n" % (len(value), value)
    assert got == expected, f"witness got {got!r}"
    fresh = RawClient(p.port)
    try:
        assert fresh.call("PING") == b"+PONG\r\n"
    finally:
        fresh.close()


def test_fuzzed_frames_never_hurt_the_server(tmp_path: Path) -> None:
    target = sized(20_000, 1_000_000)
    workers = 4
    seed, _rng = seeded("fuzz")
    p = start_temporalstore(["--storage", f"file://{tmp_path}/store"])
    witness = RawClient(p.port)
    stats = Stats(target)
    errors: list[str] = []
    checks = 0
    started = time.monotonic()
    try:
        with sampling(p.proc.pid) as memory:
            threads = [
                threading.Thread(target=fuzz_worker, args=(p.port, seed + i, stats, errors))
                for i in range(workers)
            ]
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                time.sleep(0.5)
                try:
                    witness_check(p, witness, checks)
                except BaseException:
                    stats.stop.set()
                    raise
                checks += 1
            for t in threads:
                t.join()
            witness_check(p, witness, checks)
            settled = rss_mb(p.proc.pid)
            info = witness.call("INFO", "stats")
    finally:
        stats.stop.set()
        witness.close()
        p.stop()
    assert not errors, errors
    assert not stats.stuck, f"connections the server never closed: {stats.stuck[:3]}"
    assert stats.frames >= target
    executed = int(info.split(b"total_commands_processed:")[1].split(b"\r\n")[0])
    growth = settled - memory.start_mb
    peak_growth = memory.peak_mb - memory.start_mb
    figure(
        "fuzz",
        seed=seed,
        frames=stats.frames,
        connections=stats.connections,
        replies=stats.replies,
        commands_executed=executed,
        protocol_errors=stats.protocol_errors,
        mb_sent=stats.bytes_sent / 2**20,
        mb_received=stats.bytes_received / 2**20,
        witness_checks=checks + 1,
        rss_start_mb=memory.start_mb,
        rss_peak_mb=memory.peak_mb,
        rss_end_mb=settled,
        seconds=time.monotonic() - started,
    )
    assert peak_growth < 300, f"server memory grew {peak_growth:.0f} MB (seed {seed})"
    assert growth < 100, f"server memory stayed {growth:.0f} MB higher (seed {seed})"


# Found by this fuzzer: a CR or LF where a bulk length's '$' belongs was quoted raw in
# the error line (breaking the reply stream), and bytes past 0x7f went out as UTF-8.
@pytest.mark.parametrize(
    "data",
    [b"*1\r\n\r\n", b"*1\r\n\nx\r\n", b"*2\r\n$1\r\na\r\n\rx\r\n", b"*1\r\n\xc4x\r\n"],
)
def test_protocol_errors_quote_the_offending_byte_as_redis(
    redis_ref: ServerProcess, ts_server: ServerProcess, data: bytes
) -> None:
    assert b"Protocol error" in same((redis_ref.port, ts_server.port), [data])


def test_errors_quoting_input_stay_one_line(ts_server: ServerProcess) -> None:
    """Also found by fuzzing: errors that quote an argument (a branch or table name)
    carried its CR/LF into the reply, ending the error line early."""
    c = RawClient(ts_server.port)
    try:
        for args in (("TS.CHECKOUT", "a\r\n+OK"), ("TS.TABLE", "INFO", "n:t\r\n:1")):
            raw = c.call(*args)
            assert raw.startswith(b"-ERR ") and raw.count(b"\r\n") == 1, raw
            assert c.call("PING") == b"+PONG\r\n"
    finally:
        c.close()
