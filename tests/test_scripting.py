"""Scripting and functions: differential tests against redis-server (RESP2 and RESP3)
of EVAL's conversions, errors, pcall, the sandbox and libraries, SCRIPT, FUNCTION and
FCALL; then real libraries against our server (redis-py's Lock and Script, a Lua
token bucket), a script's writes as one version, and libraries surviving a restart."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis

from tests.conftest import Differ, ServerProcess, start_temporalstore, until
from tests.resp_client import RawClient, encode_command

CONVERSIONS = [
    "return 1",
    "return -3.99",
    "return 3.99",
    "return 1e20",
    "return 'ciao'",
    "return ''",
    "return true",
    "return false",
    "return nil",
    "return {}",
    "return {1,2,3,'ciao',{1,2}}",
    "return {1,nil,3}",
    "return {1,false,3}",
    "return {ok='fine'}",
    "return {ok='a\\r\\nb'}",
    "return {err='My Error'}",
    "return {err='ERR with code'}",
    "return redis.error_reply('My Error')",
    "return redis.error_reply('-X My Error')",
    "return redis.error_reply(1)",
    "return redis.status_reply('FINE')",
    "return {double=3.5}",
    "return {double=1e300}",
    "return {big_number='123456789012345678901234567890'}",
    "return {map={a=1}}",
    "return {set={a=true}}",
    "return {verbatim_string={format='txt', string='hello'}}",
    "return {1, {ok='x'}, {err='y'}, {2, {3}}}",
    "return KEYS",
    "return ARGV",
    "return {KEYS[1], ARGV[1], #KEYS, #ARGV}",
    "return redis.sha1hex('')",
    "return redis.sha1hex('Pizza & Mandolino')",
    "return redis.REDIS_VERSION",
    "return redis.REDIS_VERSION_NUM",
    "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
    "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_REPLICA, redis.REPL_ALL}",
    "return tostring(0.1)",
    "return string.format('%5.2f', 3.14159)",
    "return table.concat({'a','b'}, '-')",
    "return math.floor(-3.5)",
    "return type(coroutine.create)",
    "return select('#', 1, 2, 3)",
    "return _VERSION",
    "return loadstring('return type(redis)')()",
    "return coroutine.wrap(function() return type(redis) end)()",
    "return ('x'):upper()",
    "return cjson.null == nil",
    "return {pcall(cjson.encode, function() end)}",
]

CALLS = [
    "return redis.call('set', KEYS[1], ARGV[1])",
    "return redis.call('get', KEYS[1])",
    "return redis.call('get', 'nosuchkey')",
    "return redis.call('incr', 'cnt')",
    "return redis.call('set', 'n', 1e20)",
    "return redis.call('set', 'n', 3.5)",
    "return redis.call('get', 'n')",
    "return redis.call('set', 'n', 12345678901234567)",
    "return redis.call('get', 'n')",
    "return redis.call('rpush', 'l', 'a', 'b', 'c')",
    "return redis.call('lrange', 'l', 0, -1)",
    "return redis.call('hset', 'h', 'f', 'v', 'g', 'w')",
    "return redis.call('hgetall', 'h')",
    "return redis.call('ping')",
    "return redis.call('type', 'h')",
    "return redis.call('exists', 'h', 'nosuch')",
    "return redis.call('mget', 'nosuch', KEYS[1])",
    "return redis.call('zadd', 'z', 1.5, 'a', 2, 'b')",
    "return redis.call('zrange', 'z', 0, -1, 'withscores')",
    "return redis.call('zscore', 'z', 'a')",
    "redis.setresp(3); return redis.call('zscore', 'z', 'a')",
    "redis.setresp(3); return redis.call('hgetall', 'h')",
    "redis.setresp(3); return redis.call('get', 'nosuchkey')",
    "redis.setresp(3); return redis.call('smembers', 'nosuch')",
    "redis.setresp(3); return {redis.call('exists', 'h')}",
    "redis.setresp(3); return true",
    "redis.setresp(3); return false",
    "redis.setresp(2); return false",
    "return redis.pcall('incr', 'h')",
    "return redis.pcall('nosuch')",
    "return redis.pcall('get')",
    "return redis.pcall('set', 'a')",
    "local r = redis.pcall('incr', 'h'); return type(r)",
    "local r = redis.pcall('incr', 'h'); return r['err']",
    "return {pcall(function() redis.call('nosuch') end)}",
    "return {pcall(function() error('x') end)}",
    "return {pcall(function() error({err='E y'}) end)}",
    "return redis.call('select', 1)",
    "redis.call('select', 1); return redis.call('get', KEYS[1])",
    "return redis.call('get', KEYS[1])",
    "return redis.call('incrbyfloat', 'f', '1.5')",
    "return redis.call('hincrbyfloat', 'h2', 'x', '0.1')",
]

ERRORS = [
    "return redis.call('nosuch')",
    "return redis.call('get')",
    "redis.call('incr', 'x', 'y')",
    "return redis.call('incr', 'h')",
    "return redis.call('eval', 'return 1', 0)",
    "return redis.call('multi')",
    "return redis.call('subscribe', 'c')",
    "return redis.call()",
    "return redis.call({})",
    "return redis.call('get', {})",
    "return redis.call('get', true)",
    "return redis.pcall()",
    "error('boom')",
    "error({err='X y'})",
    "error()",
    "error(nil)",
    "error(1)",
    "local x = 1 +",
    "return )",
    "return a",
    "a = 1",
    "redis.call = 1",
    "string.x = 1",
    "rawset(_G, 'x', 1)",
    "return _G.x",
    "return print",
    "return os",
    "return io",
    "return loadfile",
    "return dofile",
    "return require",
    "return debug",
    "return redis.setresp(4)",
    "return redis.setresp()",
    "return redis.set_repl(5)",
    "return redis.set_repl()",
    "return redis.log()",
    "return redis.log('x', 'y')",
    "return redis.log(9, 'y')",
    "return redis.sha1hex()",
    "local t = {} ; return t.x.y",
    "return string.rep()",
    "return cjson.encode(function() end)",
    "return math.huge + nil",
    "return loadstring('return os')()",
    "setmetatable(_G, {})",
    "local g = getmetatable(_G); g.__index = {}",
    "getmetatable('').__index = {}",
    "return loadstring(string.dump(function() return 1 end))()",
    "return getfenv",
    "return setfenv",
    "return newproxy",
    "return redis.nosuch",
    "_G = {}",
    "redis = function() return 1 end",
    "cjson.encode = function() return 1 end",
]

LIBRARIES = [
    "return cjson.encode({1,2,3})",
    "return cjson.encode({a=1})",
    "return cjson.encode('a/b\"c\\n')",
    "return cjson.encode({})",
    "return cjson.encode(1.5)",
    "return cjson.encode(12345678901234)",
    "return cjson.encode(0.1)",
    "return cjson.encode({true, false})",
    "return cjson.decode('[1,2,{\"a\":3}]')[3].a",
    'return cjson.decode(\'{"k":"v"}\').k',
    "return cjson.decode('\"\\\\u00e8\"')",
    "return cjson.decode('[1.5, 2]')",
    "return cjson.encode(cjson.decode('{\"x\":[1,2,[3]]}'))",
    "return type(cjson.null)",
    "return bit.band(7, 3)",
    "return bit.bor(1, 2, 4)",
    "return bit.bxor(5, 3)",
    "return bit.bnot(0)",
    "return bit.tobit(0xffffffff)",
    "return bit.tobit(2^40 + 3)",
    "return bit.lshift(1, 31)",
    "return bit.rshift(-1, 28)",
    "return bit.arshift(-256, 4)",
    "return bit.rol(0x12345678, 8)",
    "return bit.ror(0x12345678, 8)",
    "return bit.bswap(0x12345678)",
    "return bit.tohex(255)",
    "return bit.tohex(-1, -4)",
    "return bit.tohex(0x1234, 2)",
    "return cmsgpack.pack(1, 'a', {1,2}, {a=1})",
    "return cmsgpack.pack(-1, -200, 70000, 2^40, 1.5, 0.1, true, false)",
    "return cmsgpack.pack(string.rep('x', 40))",
    "return {cmsgpack.unpack(cmsgpack.pack({1,2,'a'}, 'x', 5))}",
    "return struct.pack('>I2', 258)",
    "return struct.pack('<i4', -5)",
    "return struct.pack('BBB', 1, 2, 3)",
    "return struct.pack('>d', 1.5)",
    "return {struct.unpack('<i', struct.pack('<i', -5))}",
    "return {struct.unpack('>H', 'ab')}",
    "return {struct.unpack('BB', 'xyz', 2)}",
    "return struct.size('>iHb')",
    "return struct.pack('s', 'abc')",
    "return {struct.unpack('c3', 'abcdef')}",
]

SHEBANGS = [
    ("#!lua\nreturn 1", 0),
    ("#!lua flags=no-writes\nreturn redis.call('get', 'x')", 0),
    ("#!lua flags=no-writes\nreturn redis.call('set', 'x', 1)", 0),
    ("#!lua flags=no-writes,allow-oom\nreturn 2", 0),
    ("#!lua flags=allow-stale,no-cluster,allow-cross-slot-keys\nreturn 3", 0),
    ("#!lua flags=bogus\nreturn 1", 0),
    ("#!lua bogus=1\nreturn 1", 0),
    ("#!python\nreturn 1", 0),
    ("#!lua", 0),
    ("#!lua name=x\nreturn 1", 0),
    ("#!lua\nreturn a", 0),
    ("#!lua\n\nerror('line 3')", 0),
]


@pytest.fixture
def fresh(diff: Differ) -> Iterator[Differ]:
    for c in (diff.ref, diff.ours):
        c.call("SCRIPT", "FLUSH")
        c.call("FUNCTION", "FLUSH")
    yield diff


def test_eval_conversions(fresh: Differ) -> None:
    for script in CONVERSIONS:
        fresh.check("EVAL", script, 2, "k1", "k2", "a1", "a2", "a3")


def test_eval_calls(fresh: Differ) -> None:
    for script in CALLS:
        fresh.check("EVAL", script, 1, "key", "value")


def test_eval_errors(fresh: Differ) -> None:
    fresh.check("SET", "h", "notanumber")
    for script in ERRORS:
        fresh.check("EVAL", script, 0)


def test_libraries(fresh: Differ) -> None:
    for script in LIBRARIES:
        fresh.check("EVAL", script, 0)


def test_eval_arguments(fresh: Differ) -> None:
    fresh.run(
        """
        EVAL "return 1" -1
        EVAL "return 1" 2 a
        EVAL "return 1" x
        EVAL "return 1"
        EVAL "return {KEYS[1], ARGV[1]}" 1 k
        EVALSHA abc 0
        EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0
        EVALSHA E0E1F9FABFC9D4800C877A703B823AC0578FF8DB 0
        EVAL "return 1" 0
        EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0
        EVALSHA E0E1F9FABFC9D4800C877A703B823AC0578FF8DB 0
        EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db -1
        EVAL_RO "return redis.call('get', KEYS[1])" 1 k
        EVAL_RO "return redis.call('set', KEYS[1], 1)" 1 k
        EVAL_RO "return redis.pcall('del', KEYS[1])" 1 k
        EVALSHA_RO e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0
        EVAL_RO "#!lua\\nreturn 1" 0
        EVAL_RO "#!lua flags=no-writes\\nreturn 1" 0
        """
    )


def test_shebang_flags(fresh: Differ) -> None:
    for body, numkeys in SHEBANGS:
        fresh.check("EVAL", body, numkeys)


def test_script_command(fresh: Differ) -> None:
    fresh.run(
        """
        SCRIPT LOAD "return 'loaded'"
        SCRIPT EXISTS 2c8c2d0b1a3b8d0e9d6b7f56d3d6a2a8f0bfc0c6 nosuch
        SCRIPT LOAD "return ("
        SCRIPT LOAD "#!lua flags=bad\\nreturn 1"
        SCRIPT FLUSH
        SCRIPT FLUSH SYNC
        SCRIPT FLUSH ASYNC
        SCRIPT FLUSH BAD
        SCRIPT FLUSH SYNC ASYNC
        SCRIPT KILL
        SCRIPT HELP
        SCRIPT NOSUCH
        SCRIPT
        SCRIPT EXISTS
        SCRIPT LOAD
        FUNCTION KILL
        """
    )
    sha = fresh.check("SCRIPT", "LOAD", "return 'loaded'").split(b"\r\n")[1].decode()
    fresh.check("SCRIPT", "EXISTS", sha, sha.upper(), "x")
    fresh.check("EVALSHA", sha, 0)
    fresh.check("SCRIPT", "FLUSH")
    fresh.check("EVALSHA", sha, 0)
    fresh.check("SCRIPT", "EXISTS", sha)


LIB = "#!lua name=mylib\n" + "\n".join(
    [
        "redis.register_function('hello', function(keys, args) return 'hi ' .. args[1] end)",
        "redis.register_function{function_name='setit', callback=function(keys, args)",
        "  return redis.call('set', keys[1], args[1]) end}",
        "redis.register_function{function_name='getit', description='reads a key',",
        "  callback=function(keys) return redis.call('get', keys[1]) end,",
        "  flags={'no-writes', 'allow-oom'}}",
        "redis.register_function('fails', function() return redis.call('nosuch') end)",
        "redis.register_function('boom', function() error('boom') end)",
        "redis.register_function('reg_at_run', function()",
        "  redis.register_function('x', function() end) end)",
    ]
)
LIB2 = "#!lua name=other\nredis.register_function('other_fn', function() return 2 end)"


def test_functions(fresh: Differ) -> None:
    f = fresh
    f.check("FUNCTION", "LOAD", LIB)
    f.check("FUNCTION", "LOAD", LIB)
    f.check("FUNCTION", "LOAD", "REPLACE", LIB)
    f.check("FUNCTION", "LOAD", LIB2)
    f.check("FCALL", "hello", 0, "world")
    f.check("FCALL", "setit", 1, "fk", "fv")
    f.check("FCALL", "getit", 1, "fk")
    f.check("FCALL_RO", "getit", 1, "fk")
    f.check("FCALL_RO", "setit", 1, "fk", "x")
    f.check("FCALL", "fails", 0)
    f.check("FCALL", "boom", 0)
    f.check("FCALL", "nosuch", 0)
    f.check("FCALL", "hello", "x")
    f.check("FCALL", "hello", -1)
    f.check("FCALL", "hello", 5)
    f.check("FCALL", "other_fn", 0)
    f.check("FCALL", "HELLO", 0, "upper")  # function names ignore case
    f.check("FCALL", "BOOM", 0)  # ... and errors name the function as registered
    f.check("FCALL", "reg_at_run", 0)
    # Redis lists libraries and functions in its dict order (a random hash seed).
    f.check("FUNCTION", "LIST", unordered=4)
    f.check("FUNCTION", "LIST", "WITHCODE", unordered=4)
    f.check("FUNCTION", "LIST", "LIBRARYNAME", "my*", unordered=4)
    f.check("FUNCTION", "LIST", "LIBRARYNAME", "none*")
    f.check("FUNCTION", "LIST", "LIBRARYNAME")
    f.check("FUNCTION", "LIST", "BOGUS")
    f.check("FUNCTION", "STATS")
    f.check("FUNCTION", "DELETE", "other")
    f.check("FUNCTION", "DELETE", "other")
    f.check("FCALL", "other_fn", 0)
    f.check("FUNCTION", "FLUSH")
    f.check("FUNCTION", "FLUSH", "BAD")
    f.check("FUNCTION", "FLUSH", "SYNC", "ASYNC")
    f.check("FUNCTION", "RESTORE", "a", "FLUSH", "x")
    f.check("FCALL", "TEST_NOSUCH", 0)
    f.check("FUNCTION", "LIST")
    f.check("FUNCTION", "RESTORE", "garbage")
    f.check("FUNCTION", "RESTORE", "garbage", "BAD")
    f.check("FUNCTION", "HELP")
    f.check("FUNCTION", "KILL")
    f.check("FUNCTION", "NOSUCH")


LOAD_ERRORS = [
    "return 1",
    "#!lua\nreturn 1",
    "#!lua name=x",
    "#!lua name=bad-name\nredis.register_function('a', function() end)",
    "#!lua name=x name=y\nreturn 1",
    "#!lua name=x foo=bar\nreturn 1",
    "#!nolua name=x\nredis.register_function('a', function() end)",
    "#!LUA name=up\nredis.register_function('upfn', function() return 1 end)",
    "#!lua name=x\nreturn 1",
    "#!lua name=x\nreturn (",
    "#!lua name=x\nerror('at load')",
    "#!lua name=x\nredis.register_function()",
    "#!lua name=x\nredis.register_function('a')",
    "#!lua name=x\nredis.register_function(1, function() end)",
    "#!lua name=x\nredis.register_function('a', 1)",
    "#!lua name=x\nredis.register_function('a', function() end, 3)",
    "#!lua name=x\nredis.register_function('bad-name', function() end)",
    "#!lua name=x\nredis.register_function(1)",
    "#!lua name=x\nredis.register_function{function_name='a'}",
    "#!lua name=x\nredis.register_function{callback=function() end}",
    "#!lua name=x\nredis.register_function{function_name='a', callback=function() end, "
    "flags={'bogus'}}",
    "#!lua name=x\nredis.register_function{function_name='a', callback=function() end, other=1}",
    "#!lua name=x\nredis.register_function{function_name=1, callback=function() end}",
    "#!lua name=x\nredis.register_function('a', function() end)\n"
    "redis.register_function('a', function() end)",
    "#!lua name=x\nredis.call('set', 'a', 1)",
    "#!lua name=x\nreturn a_global",
    "#!lua name=x\nx_global = 1",
    "#!lua name=x\nlocal a = 1 while 1 do a = a + 1 end",  # past FUNCTION LOAD's time
    "#!lua name=x\nredis.call('ping')",
    "#!lua name=x\nreturn redis.setresp(3)",
    "#!lua name=x\nredis.log(redis.LOG_NOTICE, 'loading')\n"
    "redis.register_function('logged', function() return redis.REDIS_VERSION end)",
]


def test_function_load_errors(fresh: Differ) -> None:
    for code in LOAD_ERRORS:
        fresh.check("FUNCTION", "LOAD", code)
    fresh.check("FUNCTION", "LOAD", LIB2)
    fresh.check("FUNCTION", "LOAD", LIB2.replace("name=other", "name=other2"))
    fresh.check("FUNCTION", "LOAD", "BOGUS", LIB2)
    fresh.check("FUNCTION", "LOAD", "REPLACE")


def test_function_dump_restore(fresh: Differ) -> None:
    ours = fresh.ours
    ours.call("FUNCTION", "LOAD", LIB)
    ours.call("FUNCTION", "LOAD", LIB2)
    payload = ours.call("FUNCTION", "DUMP").split(b"\r\n", 1)[1][:-2]
    # The payload restores in redis-server (and back here), by each policy.
    for c in (fresh.ref, fresh.ours):
        c.call("FUNCTION", "FLUSH")
        assert c.call("FUNCTION", "RESTORE", payload) == b"+OK\r\n"
    # Which library collides first is Redis' dict order: compare the error's kind.
    for policy in ((), ("APPEND",)):
        fresh.check("FUNCTION", "RESTORE", payload, *policy, normalize=lambda r: r.split(b" ")[:2])
    fresh.check("FUNCTION", "RESTORE", payload, "REPLACE")
    fresh.check("FUNCTION", "RESTORE", payload, "FLUSH")
    fresh.check("FUNCTION", "LIST", unordered=4)
    fresh.check("FCALL", "hello", 0, "again")
    ref_payload = fresh.ref.call("FUNCTION", "DUMP").split(b"\r\n", 1)[1][:-2]
    fresh.check("FUNCTION", "RESTORE", ref_payload, "FLUSH")
    fresh.check("FUNCTION", "LIST", "WITHCODE", unordered=4)
    fresh.check("FUNCTION", "RESTORE", payload[:-1] + b"\x00", "FLUSH")


def test_script_in_multi(fresh: Differ) -> None:
    fresh.run(
        """
        MULTI
        EVAL "return redis.call('incr', KEYS[1])" 1 m
        EVAL "return redis.call('incr', KEYS[1])" 1 m
        EXEC
        EVAL "return redis.call('exec')" 0
        """
    )


LOOP_LIB = (
    "#!lua name=looping\n"
    "redis.register_function('spin', function() while true do end end)\n"
    "redis.register_function{function_name='spin_ro', callback=function() while true do end end,"
    " flags={'no-writes'}}"
)


def _busy_session(port: int, ctl: RawClient, script: list[str | int]) -> list[bytes]:
    """Start a script that never ends on a second connection; what the server
    answers meanwhile and once it is killed."""
    runner = RawClient(port)
    try:
        runner.send(encode_command(*script))
        until(lambda: ctl.call("PING").startswith(b"-BUSY"))
        kill = "SCRIPT" if script[0] == "EVAL" else "FUNCTION"
        other = "FUNCTION" if kill == "SCRIPT" else "SCRIPT"
        out = [
            ctl.call("PING"),
            ctl.call("GET", "x"),
            ctl.call("EVAL", "return 1", 0),
            ctl.call("MULTI"),
            ctl.call("DISCARD"),
            ctl.call(other, "KILL"),
            ctl.call("FUNCTION", "STATS") if kill == "SCRIPT" else b"",
            ctl.call(kill, "KILL"),
            runner.read_reply(),
            ctl.call("PING"),
            ctl.call(kill, "KILL"),
        ]
    finally:
        runner.close()
    return out


def test_busy_script_and_kill(
    fresh: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    """Past busy-reply-threshold other clients get -BUSY; SCRIPT KILL and FUNCTION
    KILL end a script that has not written (our scripts run on a worker thread)."""
    got = []
    for port, ctl in ((redis_ref.port, fresh.ref), (ts_server.port, fresh.ours)):
        ctl.call("CONFIG", "SET", "busy-reply-threshold", "50")
        ctl.call("FUNCTION", "LOAD", LOOP_LIB)
        try:
            got.append(
                [
                    *_busy_session(port, ctl, ["EVAL", "while true do end", 0]),
                    *_busy_session(
                        port,
                        ctl,
                        [
                            "EVAL",
                            "local f = function() while 1 do redis.call('ping') end end "
                            "while 1 do pcall(f) end",
                            0,
                        ],
                    ),
                    *_busy_session(port, ctl, ["FCALL", "spin_ro", 0]),
                ]
            )
        finally:
            ctl.call("CONFIG", "SET", "busy-reply-threshold", "5000")
    fresh.record(len(got[0]), got[0] == got[1])
    assert got[0] == got[1]


# -- against our server alone --------------------------------------------------------


@pytest.fixture
def client(ts_server: ServerProcess) -> Iterator[redis.Redis]:
    c = redis.Redis(port=ts_server.port)
    c.flushall()
    c.script_flush()
    yield c
    c.close()


def test_redis_py_lock(client: redis.Redis) -> None:
    lock = client.lock("resource", timeout=10)
    assert lock.acquire(blocking=False)
    other = client.lock("resource", timeout=10)
    assert not other.acquire(blocking=False)
    assert lock.owned()
    assert lock.extend(5)
    assert 10 < client.pttl("resource") <= 15_000
    assert lock.reacquire()
    lock.release()
    assert not client.exists("resource")
    assert other.acquire(blocking=False)
    stale = client.lock("resource", timeout=10)
    stale.local.token = b"not-the-owner"
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        stale.release()
    stale.local.token = b"not-the-owner"
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        stale.extend(5)
    other.release()


def test_redis_py_script(client: redis.Redis) -> None:
    add = client.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
    assert add(keys=["n"], args=[5]) == 5
    client.script_flush()  # EVALSHA answers NOSCRIPT: Script loads it again
    assert add(keys=["n"], args=[2]) == 7
    assert client.script_exists(add.sha) == [True]
    pipe = client.pipeline()
    add(keys=["n"], args=[1], client=pipe)
    add(keys=["n"], args=[1], client=pipe)
    assert pipe.execute() == [8, 9]


TOKEN_BUCKET = """
local key, rate, burst, now, want = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]),
  tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call('hmget', key, 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
tokens = math.min(burst, tokens + (now - ts) * rate)
local allowed = tokens >= want
if allowed then tokens = tokens - want end
redis.call('hset', key, 'tokens', tokens, 'ts', now)
redis.call('pexpire', key, math.ceil(burst / rate * 1000))
return {allowed and 1 or 0, tostring(tokens)}
"""


def test_token_bucket(client: redis.Redis) -> None:
    bucket = client.register_script(TOKEN_BUCKET)
    # 2 tokens a second, bursts of 5: at one instant, 5 pass and the 6th waits.
    results = [bucket(keys=["rl:user"], args=[2, 5, 1000, 1])[0] for _ in range(6)]
    assert results == [1, 1, 1, 1, 1, 0]
    # One second later two more tokens have come.
    later = [bucket(keys=["rl:user"], args=[2, 5, 1001, 1])[0] for _ in range(3)]
    assert later == [1, 1, 0]
    assert client.hget("rl:user", "tokens") == b"0"
    assert 0 < client.pttl("rl:user") <= 2500


def test_script_writes_are_one_version(client: redis.Redis) -> None:
    before = int(client.execute_command("TS.VERSION"))
    client.eval(
        "for i = 1, 3 do redis.call('incr', KEYS[1]) end redis.call('set', KEYS[2], 'x')",
        2,
        "one-version:counter",
        "one-version:other",
    )
    after = int(client.execute_command("TS.VERSION"))
    assert after == before + 1
    history = client.execute_command("TS.HISTORY", "one-version:counter")
    assert len(history) == 1  # one version: the script's commit, holding 3
    assert client.get("one-version:counter") == b"3"
    # A read-only script commits nothing.
    client.eval("return redis.call('get', KEYS[1])", 1, "one-version:counter")
    assert int(client.execute_command("TS.VERSION")) == after
    # Reading history from a script works; rewriting it does not.
    assert client.eval("return #redis.call('ts.history', KEYS[1])", 1, "one-version:counter") == 1
    with pytest.raises(redis.ResponseError, match="not allowed from script"):
        client.eval("return redis.call('ts.seal', 'snap')", 0)


def test_functions_survive_restart() -> None:
    p = start_temporalstore()
    try:
        c = redis.Redis(port=p.port)
        assert c.function_load(LIB2) == b"other"
        assert c.fcall("other_fn", 0) == 2
        c.close()
        p.stop()
        p = start_temporalstore(workdir=p.workdir)
        c = redis.Redis(port=p.port)
        assert c.fcall("other_fn", 0) == 2
        assert [lib[b"library_name"] for lib in map(_pairs, c.function_list())] == [b"other"]
        c.function_delete("other")
        c.close()
        p.stop()
        p = start_temporalstore(workdir=p.workdir)
        c = redis.Redis(port=p.port)
        assert c.function_list() == []
        c.close()
    finally:
        p.stop()


def _pairs(flat: list[object]) -> dict[object, object]:
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def test_script_kill_without_script(client: redis.Redis) -> None:
    with pytest.raises(redis.ResponseError, match="NOTBUSY"):
        client.script_kill()
    assert client.eval("local n = 0 for i = 1, 1000000 do n = n + i end return n", 0) == (
        500000500000
    )


def test_unkillable_script_commits_once(client: redis.Redis, ts_server: ServerProcess) -> None:
    """A script that wrote cannot be killed; while it runs others get -BUSY, and when
    it ends its writes (before and after the loop gave way) are one version."""
    client.config_set("busy-reply-threshold", 20)
    runner = redis.Redis(port=ts_server.port)
    try:
        lsn = int(client.execute_command("TS.VERSION"))
        spin = (
            "redis.call('set', KEYS[1], 'a') "
            "local i = 0 while i < 3e7 do i = i + 1 end "
            "redis.call('set', KEYS[2], 'b') return 'done'"
        )
        result: list[object] = []
        t = threading.Thread(target=lambda: result.append(runner.eval(spin, 2, "k1", "k2")))
        t.start()
        until(lambda: _busy(client))
        with pytest.raises(redis.ResponseError, match="UNKILLABLE"):
            client.script_kill()
        with pytest.raises(redis.ResponseError, match="BUSY"):
            client.get("k1")
        t.join()
        assert result == [b"done"]
        assert int(client.execute_command("TS.VERSION")) == lsn + 1
        assert client.mget("k1", "k2") == [b"a", b"b"]
    finally:
        client.config_set("busy-reply-threshold", 5000)
        runner.close()


def _busy(c: redis.Redis) -> bool:
    try:
        c.ping()
    except redis.ResponseError as e:
        return str(e).startswith("BUSY")
    return False
