"""What the Redis 7.0 suite's scripting unit asks of scripts beyond tests/test_scripting.py:
calls with thousands of arguments (`unpack`), error lines of tail calls, keys expiring
as of a script's (or EXEC's) start, CLUSTER from a script, NOREPLICAS, and a script
with hundreds of thousands of writes committed as one version, persisted and
replayed after a restart."""

from __future__ import annotations

import time

import pytest
import redis

from tests.conftest import Differ, start_temporalstore, until
from tests.test_replication import replicated
from tests.test_scripting import fresh  # noqa: F401  (scripts and functions flushed)

UNPACK = "local a = {} for i=1,7999 do a[i] = 1 end "

MASSIVE = [
    UNPACK + "return redis.call('lpush', 'l', unpack(a))",
    UNPACK + "return redis.pcall('rpush', 'l', unpack(a))",
    UNPACK + "return redis.call('llen', 'l')",
    UNPACK + "return redis.pcall('nosuch', unpack(a))",
    UNPACK + "return redis.call('nosuch', unpack(a))",
    UNPACK + "a[4000] = {} return redis.call('lpush', 'l', unpack(a))",
    UNPACK + "a[4000] = {} return redis.pcall('lpush', 'l', unpack(a))",
    UNPACK + "a[3] = nil\nreturn redis.call('lpush', 'l', unpack(a, 1, 7999))",
    UNPACK + "local r = redis.call('sadd', 's', unpack(a)) return r",
    "local a = {} for i=1,300 do a[i] = i end return redis.call('sadd', 's2', unpack(a))",
    "local a = {} for i=1,300 do a[i] = i end return redis.call('smembers', 's2', unpack(a))",
]

# Errors raised by a call in tail position name the script's line (and Lua's proper
# tail calls still work: recursion deeper than Lua's call limit).
TAIL_CALLS = [
    "return redis.call('nosuch')",
    "\n\nreturn redis.call('get', {})",
    "local c = redis.call\nreturn c('nosuch')",
    "local r = redis\nlocal c = r.pcall\n return c('nosuch')",
    "local function f()\n return redis.call('incr', 'x', 'y')\nend\nreturn f()",
    "local function f(n) if n == 0 then return redis.call('nosuch') end return f(n-1) end\n"
    "return f(100000)",
    "local function f(n) if n == 0 then return 7 end return f(n-1) end\nreturn f(100000)",
    "return loadstring('\\nreturn redis.call(\"nosuch\")')()",
    "return pcall(redis.call, 'nosuch')",
    # More than 256 constants: the key 'call' is loaded into a register first.
    "local t = {" + ",".join(f"'c{i}'" for i in range(300)) + "}\nreturn redis.call('nosuch')",
    "return {pcall(function() return redis.call('nosuch') end)}",
]

LIB = (
    "#!lua name=wide\n"
    "redis.register_function('push_many', function(keys, args)\n"
    "  local a = {} for i=1,tonumber(args[1]) do a[i] = i end\n"
    "  return redis.call('rpush', keys[1], unpack(a))\n"
    "end)\n"
    "redis.register_function('fail_many', function(keys, args)\n"
    "  local a = {} for i=1,tonumber(args[1]) do a[i] = i end\n"
    "  return redis.call('nosuch', unpack(a))\n"
    "end)"
)


@pytest.mark.usefixtures("fresh")
def test_calls_with_thousands_of_arguments(diff: Differ) -> None:
    for script in MASSIVE:
        diff.check("EVAL", script, 0)
    diff.check("FUNCTION", "LOAD", LIB)
    for n in ("10", "7999", "20000"):
        diff.check("FCALL", "push_many", 1, "fl", n)
        diff.check("FCALL", "fail_many", 0, n)
    diff.check("LLEN", "fl")


@pytest.mark.usefixtures("fresh")
def test_tail_call_errors_name_the_line(diff: Differ) -> None:
    for script in TAIL_CALLS:
        diff.check("EVAL", script, 0)


def test_keys_expire_as_of_the_script_start(ddiff: Differ) -> None:
    """A key that expires while a script (or EXEC) runs stays there until it ends;
    one expired before it started is gone (Redis 7.0 freezes the expiry clock)."""
    ddiff.run("DEBUG SET-DISABLE-DENY-SCRIPTS 1")
    try:
        for _ in range(2):
            ddiff.check(
                "EVAL",
                "redis.call('SET', 'key', 'value', 'PX', '1') redis.call('DEBUG', 'SLEEP', 0.01) "
                "return {redis.call('EXISTS', 'key'), redis.call('GET', 'key'), "
                "redis.call('PTTL', 'key') <= 1}",
                0,
            )
            ddiff.check("EXISTS", "key")
        ddiff.check("FUNCTION", "FLUSH")
        ddiff.check(
            "FUNCTION",
            "LOAD",
            "#!lua name=clock\nredis.register_function('hold', function(keys)\n"
            "  redis.call('SET', keys[1], 'v', 'PX', '1') redis.call('DEBUG', 'SLEEP', 0.01)\n"
            "  return redis.call('EXISTS', keys[1]) end)",
        )
        ddiff.check("FCALL", "hold", 1, "fkey")
        ddiff.check("EXISTS", "fkey")
        for c in (ddiff.ref, ddiff.ours):  # expired before the script started
            c.call("SET", "old", "v", "PX", "1")
        time.sleep(0.01)
        ddiff.check("EVAL", "return redis.call('EXISTS', 'old')", 0)
    finally:
        ddiff.run("DEBUG SET-DISABLE-DENY-SCRIPTS 0")
    ddiff.run(
        """
        MULTI
        SET k v PX 1
        DEBUG SLEEP 0.01
        EXISTS k
        GET k
        EXEC
        EXISTS k
        """
    )


@pytest.mark.usefixtures("fresh")
def test_cluster_commands_without_cluster_mode(diff: Differ) -> None:
    diff.run(
        """
        CLUSTER INFO
        CLUSTER HELP
        CLUSTER RESET HARD
        CLUSTER KEYSLOT a
        CLUSTER KEYSLOT
        CLUSTER
        CLUSTER nosuch
        READONLY
        READWRITE
        ASKING
        READONLY x
        COMMAND INFO cluster|reset cluster|info readonly asking
        COMMAND DOCS cluster|keyslot
        EVAL "return redis.call('cluster', 'reset', 'hard')" 0
        EVAL "return redis.call('cluster', 'info')" 0
        EVAL "return redis.call('cluster', 'nosuch')" 0
        EVAL "return redis.call('readonly')" 0
        """
    )


@pytest.mark.usefixtures("fresh")
def test_not_enough_good_replicas(diff: Differ) -> None:
    """min-replicas-to-write on a primary without replicas: writes and write scripts
    are refused with -NOREPLICAS (as Redis' suite runs it)."""
    diff.run("SET x 'some value'")
    diff.run("CONFIG SET min-replicas-to-write 1")
    try:
        diff.run(
            """
            EVAL "#!lua flags=no-writes\\nreturn redis.call('get','x')" 1 x
            EVAL "return redis.call('get','x')" 1 x
            EVAL "#!lua\\nreturn redis.call('get','x')" 1 x
            EVAL "return redis.call('set','x', 1)" 1 x
            EVAL "return redis.pcall('set','x', 1)" 1 x
            EVAL_RO "#!lua\\nreturn 1" 0
            FUNCTION LOAD "#!lua name=lib\\nredis.register_function('f', function() return 1 end)"
            SET x 1
            GET x
            MULTI
            SET a 1
            GET a
            EXEC
            MULTI
            GET a
            EXEC
            CONFIG SET min-replicas-max-lag 0
            SET x 2
            CONFIG SET min-replicas-max-lag 10
            """
        )
    finally:
        diff.run("CONFIG SET min-replicas-to-write 0")
    diff.run("SET x 3")


def test_good_replicas_are_counted() -> None:
    """A replica that acknowledges counts; once it is gone for longer than
    min-replicas-max-lag, writes are refused until the setting is lowered."""
    with replicated([], linked=True) as (primary, replica):
        p = redis.Redis(port=primary.port)
        p.config_set("min-replicas-to-write", 1)
        p.config_set("min-replicas-max-lag", 1)
        assert p.set("w", "1")
        assert p.info("replication")["min_slaves_good_slaves"] == 1
        assert p.eval("#!lua\nreturn redis.call('set', 'w', '2')", 0) == b"OK"
        p.config_set("min-replicas-to-write", 2)
        with pytest.raises(redis.ResponseError, match=r"^NOREPLICAS Not enough good replicas"):
            p.set("w", "3")
        p.config_set("min-replicas-to-write", 1)
        replica.stop()
        until(lambda: p.info("replication")["min_slaves_good_slaves"] == 0, timeout=15)
        with pytest.raises(redis.ResponseError, match=r"^NOREPLICAS"):
            p.set("w", "4")
        p.config_set("min-replicas-to-write", 0)
        assert p.set("w", "5")
        p.close()


def test_script_with_many_writes_is_one_version_and_survives_restart() -> None:
    """300,000 writes (to one set and to separate keys) from one EVAL: one version,
    stored, and all there after a restart on the same storage."""
    p = start_temporalstore()
    try:
        c = redis.Redis(port=p.port, socket_timeout=120)  # the script runs for seconds
        before = int(c.execute_command("TS.VERSION"))
        n = 150_000
        c.eval(
            "for i=1,tonumber(ARGV[1]) do redis.call('sadd', KEYS[1], i) "
            "redis.call('set', 'k:' .. i, i) end",
            1,
            "big",
            n,
        )
        assert int(c.execute_command("TS.VERSION")) == before + 1
        assert c.scard("big") == n
        assert c.dbsize() == n + 1
        c.close()
        p.stop()
        p = start_temporalstore(workdir=p.workdir)
        c = redis.Redis(port=p.port)
        assert c.scard("big") == n
        assert c.dbsize() == n + 1
        assert c.get(f"k:{n}") == str(n).encode()
        c.close()
    finally:
        p.stop()
