"""Lua 5.1 (lupa) for EVAL and FUNCTION: the interpreters, the sandbox, running a
script, and the conversions between Redis replies and Lua values.

Two interpreters per server, as in Redis: one for EVAL scripts (KEYS and ARGV are
globals; SCRIPT FLUSH replaces it) and one for function libraries. The sandbox
(`lua_sandbox.lua`) gives scripts what Redis 7.0 gives them: the base library without
`dofile`/`loadfile`/`print`, `string`, `table`, `math`, `coroutine`, the `redis` API
and the `cjson`, `cmsgpack`, `bit` and `struct` libraries (`commands.lua_libs`), every
table read-only and the globals protected with Redis' error texts.

`redis.call` runs a command through `commands.dispatch` in a script session of its own
(the caller's database, user and write metadata; RESP2 unless the script asks for 3)
with the transaction left open: the script's writes commit once, with the EVAL or
FCALL that ran them, as one version (like EXEC).

Time limit: a count hook calls back every 100,000 Lua instructions; past
`busy-reply-threshold` the run is marked timed out and SCRIPT KILL / FUNCTION KILL
(which set `killed`) end it at the next callback. The event loop is not re-entered
while a script runs (asyncio cannot nest it), so other clients wait rather than get
-BUSY until the script ends; see docs/scripting.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from typing import TYPE_CHECKING, Any, NoReturn

import lupa.lua51 as lupa

from commands import lua_bytecode, lua_libs
from commands.cluster_mode import DOWN, SELECT_REFUSED, command_keys
from commands.cluster_mode import route as cluster_route
from commands.dispatch import DISPATCHER, command_stats, count_error, lookup
from commands.errors import NOREPLICAS, READONLY, READONLY_VIEW, CommandError
from commands.limits import OOM
from commands.lua_convert import error_text, to_lua
from commands.lua_library import NAME_ERROR, library_metadata, valid_name
from commands.lua_libs import LuaRaise
from commands.permissions import check_user
from commands.registry import Command, Flag, lookup_for_call
from commands.replies import (
    Blocked,
    Deferred,
    ErrorReply,
)
from store.slots import key_slot

if TYPE_CHECKING:
    from commands.session import ServerCore, Session

log = logging.getLogger("temporalstore")

REDIS_VERSION = b"7.0.15"
REDIS_VERSION_NUM = 0x07000F

# Script flags, in the order Redis lists them (FUNCTION LIST).
FLAG_NO_WRITES = 1
FLAG_ALLOW_OOM = 2
FLAG_ALLOW_STALE = 4
FLAG_NO_CLUSTER = 8
FLAG_ALLOW_CROSS_SLOT = 16
FLAG_EVAL_COMPAT = 32  # an EVAL script without a shebang
SCRIPT_FLAGS = {
    b"no-writes": FLAG_NO_WRITES,
    b"allow-oom": FLAG_ALLOW_OOM,
    b"allow-stale": FLAG_ALLOW_STALE,
    b"no-cluster": FLAG_NO_CLUSTER,
    b"allow-cross-slot-keys": FLAG_ALLOW_CROSS_SLOT,
}

# Our TS.* verbs scripts may call: those that only read. The others change history,
# branches, the session's view or durability waits, which a script must not.
TS_ALLOWED = frozenset(
    {
        "ts.version",
        "ts.asof",
        "ts.history",
        "ts.snapshots",
        "ts.diff",
        "ts.lastlsn",
        "ts.branch|list",
        "ts.table|list",
        "ts.table|info",
    }
)

LOAD_TIMEOUT = 0.5  # seconds FUNCTION LOAD may run a library's code (Redis' 500 ms)
SLICE = 0.05  # seconds a timed-out script's commands run at a stretch (the loop waits)
NOT_ALLOWED = b"ERR This Redis command is not allowed from script"
# Redis 7.0's scriptVerifyClusterState, in cluster mode: a command of the script whose
# keys this node would not serve (another shard's slot, an unserved slot, two slots in
# one command) fails; so does any keyed command while the cluster is down.
NON_LOCAL = b"ERR Script attempted to access a non local key in a cluster node"
SCRIPT_DOWN = b"ERR Script attempted to execute a command while the cluster is down"
# ... and, unless the script may (`allow-cross-slot-keys`, or an EVAL without a
# shebang), a key of another slot than the script's first (its declared keys' slot).
CROSS_SLOT = b"ERR Script attempted to access keys that do not hash to the same slot"
LOG_LEVELS = (logging.DEBUG, logging.INFO, logging.INFO, logging.WARNING)


def sha1hex(b: bytes) -> bytes:
    return hashlib.sha1(b).hexdigest().encode()


@dataclass
class Run:
    """The script being run (Redis' scriptRunCtx)."""

    caller: Session
    session: Session
    name: bytes  # the sha of an EVAL script, or the function's name
    argv: list[bytes]
    flags: int
    ro: bool
    is_eval: bool
    start: float = field(default_factory=time.monotonic)
    fixed_before: int = 0  # the expiry clock fixed before this run (store.database)
    write_dirty: bool = False
    timed_out: bool = False
    killed: bool = False
    # Cluster mode: the slot of the keys the script touches (its declared keys', or its
    # first call's), -1 until there is one (Redis' original_c->slot).
    slot: int = -1


class Job:
    """One call run by the worker thread; `done` is set when it has finished, and
    `notify` (set by the loop's thread once it stops waiting) is called then."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: Any = None
        self.lock = threading.Lock()
        self.notify: Callable[[], None] | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except Exception as e:
            log.exception("error running a script")
            text = b"ERR internal error while running a script: %b" % repr(e).encode()
            self.result = (ErrorReply(text), [text])  # a reply and the errors to count
        with self.lock:
            self.done.set()
            notify = self.notify
        if notify is not None:
            notify()


class Worker:
    """The thread scripts run in. The event loop's thread hands a script over and
    waits up to busy-reply-threshold: a script that ends by then is answered as if
    run in place (its commands ran on the worker while the loop's thread waited, so
    nothing else touched the store). One that runs longer sets the server busy: the
    loop goes on, answering -BUSY to other clients (SCRIPT KILL, FUNCTION KILL and the
    other allow-busy commands still run), and the script's further commands run in
    slices during which the loop's thread waits again (`ScriptEngine.borrow`)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="lua", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            self.jobs.get().run()

    def submit(self, fn: Callable[[], Any]) -> Job:
        job = Job(fn)
        self.jobs.put(job)
        return job


class LuaState:
    """One interpreter with the sandbox loaded; `env` is the code's global table."""

    def __init__(self, engine: ScriptEngine, functions: bool) -> None:
        self.lua = lua = lupa.LuaRuntime(
            encoding=None, unpack_returned_tuples=True, register_eval=False, register_builtins=False
        )
        src = files("commands").joinpath("lua_sandbox.lua").read_bytes()
        loader = lua.globals().loadstring(src, b"@__redis__")
        assert lupa.lua_type(loader) == "function", loader
        py = lua.table_from(engine.callbacks(self))
        self.api = api = loader(py)
        libs = lua.table_from(lua_libs.load(lua, api[b"where"]))
        redis_table = api[b"redis_api"](functions)
        self.env, self.backing, self.set_loading = api[b"new_env"](libs, redis_table)
        api[b"activate"](self.env)
        self.rawget = api[b"rawget"]
        self.gc = lua.globals().collectgarbage
        self.rawset = api[b"rawset"]
        self.next = api[b"next"]
        self.compile_fn = api[b"compile"]
        self.run_fn = api[b"run"]
        self.run_load_fn = api[b"run_load"]
        self.gc(b"collect")  # what setting up left behind: a new state holds only what it uses

    def compile(self, code: bytes, chunkname: bytes) -> tuple[Any, bytes | None]:
        r = self.compile_fn(code, chunkname, self.env)
        if type(r) is tuple:  # nil and the message
            return None, r[1]
        return r, None

    def memory(self) -> int:
        """Bytes the interpreter holds (Lua's own count)."""
        return int(self.gc(b"count") * 1024)

    def array(self, items: list[bytes]) -> Any:
        return self.lua.table_from(items)


class ScriptEngine:
    """The server's scripting state: the two interpreters, the script cache, the
    function libraries (compiled from what the store holds), and the run in progress."""

    def __init__(self, server: ServerCore) -> None:
        self.server = server
        self.run: Run | None = None
        self.loading: dict[bytes, tuple[Any, int, bytes | None]] | None = None
        self.load_started = 0.0
        self.rng = random.Random(0)
        self._session: Session | None = None
        self.eval_state = LuaState(self, functions=False)
        self.scripts: dict[bytes, tuple[bytes, int, Any]] = {}
        self.fn_state = LuaState(self, functions=True)
        # library name -> (code, {function name -> (callback, flags, description)})
        self.libraries: dict[bytes, tuple[bytes, dict[bytes, tuple[Any, int, bytes | None]]]] = {}
        self.compiled_from: object = None
        self._functions: dict[bytes, tuple[Any, int, bytes | None]] = {}
        # By the function name in lower case (FCALL's lookup ignores case, as Redis'):
        # its library, and its name as registered.
        self._owner: dict[bytes, bytes] = {}
        self.names: dict[bytes, bytes] = {}
        # Running past busy-reply-threshold (see `Worker`): `marshal` is set (under
        # `gate`) once the loop runs again, its open transaction kept aside in
        # `stash`; the script's commands then run in slices (`borrow`): the loop's
        # thread puts the transaction back and waits until `give_back` (`lent`).
        self.worker: Worker | None = None
        self.gate = threading.Lock()
        self.marshal = False
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stash: tuple[list[Any], int] = ([], 0)
        self.lent: threading.Event | None = None  # set to hand the loop's thread back
        self.slice_end = 0.0

    # -- the script cache and libraries ----------------------------------------------

    def reset_eval(self) -> None:
        """SCRIPT FLUSH: a fresh interpreter for EVAL scripts."""
        self.eval_state = LuaState(self, functions=False)

    @property
    def functions(self) -> dict[bytes, tuple[Any, int, bytes | None]]:
        return self._functions

    def sync_functions(self, stored: dict[bytes, bytes]) -> None:
        """Compile the libraries the store holds if they are not the ones compiled
        (after a restart, on a replica, after TS.RESTORE of server state)."""
        if self.compiled_from is stored:
            return
        self.fn_state = LuaState(self, functions=True)
        self.libraries = {}
        self._functions = {}
        self._owner = {}
        self.names = {}
        for code in stored.values():
            try:
                self.load_library(code, True)
            except Exception:
                log.exception("could not load a stored function library")
        self.compiled_from = stored

    def load_library(self, code: bytes, replace: bool) -> bytes:
        """FUNCTION LOAD: compile and register a library; returns its name."""
        engine, name, body = library_metadata(code)
        if not valid_name(name):
            raise CommandError("ERR " + NAME_ERROR)
        if engine.lower() != b"lua":
            raise CommandError(b"ERR Engine '" + engine + b"' not found")
        if name in self.libraries and not replace:
            raise CommandError(b"ERR Library '" + name + b"' already exists")
        st = self.fn_state
        fn, err = st.compile(body, b"@user_function")
        if fn is None:
            raise CommandError(b"ERR Error compiling function: %b" % (err or b""))
        self.loading = {}
        self.load_started = time.monotonic()
        try:
            ok, res = st.run_load_fn(fn, st.set_loading)
            registered = self.loading
        finally:
            self.loading = None
        if not ok:
            msg = st.rawget(res, b"err")
            raise CommandError(b"ERR Error registering functions: %b" % (msg or b""))
        if not registered:
            raise CommandError("ERR No functions registered")
        old = self.libraries.get(name)
        for fname in registered:
            owner = self._owner.get(fname.lower())
            if owner is not None and owner != name:
                raise CommandError(b"ERR Function " + fname + b" already exists")
        if old is not None:
            self.delete_library(name)
        self.libraries[name] = (code, registered)
        for fname, entry in registered.items():
            self._functions[fname.lower()] = entry
            self._owner[fname.lower()] = name
            self.names[fname.lower()] = fname
        return name

    def delete_library(self, name: bytes) -> None:
        _code, fns = self.libraries.pop(name)
        for fname in fns:
            self._functions.pop(fname.lower(), None)
            self._owner.pop(fname.lower(), None)
            self.names.pop(fname.lower(), None)

    def restore_libraries(self, codes: list[bytes], policy: str) -> dict[bytes, bytes]:
        """FUNCTION RESTORE: load `codes` by `policy`; all or nothing. Returns the new
        libraries (name -> code)."""
        saved = (dict(self.libraries), dict(self._functions), dict(self._owner), dict(self.names))
        try:
            if policy == "flush":
                for name in list(self.libraries):
                    self.delete_library(name)
            for code in codes:
                _e, name, _b = library_metadata(code)
                if policy == "append" and name in self.libraries:
                    raise CommandError(b"ERR Library " + name + b" already exists")
                self.load_library(code, True)
        except CommandError:
            self.libraries, self._functions, self._owner, self.names = saved
            raise
        return {name: code for name, (code, _f) in self.libraries.items()}

    # -- callbacks Lua calls ----------------------------------------------------------

    def callbacks(self, st: LuaState) -> dict[bytes, Any]:
        """The Python half of the `redis` API, for interpreter `st`. Each is called from
        Lua as a C function (so a script's line stays on the stack for error reports)
        and raises `LuaRaise` for a Lua error."""

        def raise_table(text: bytes) -> NoReturn:
            raise LuaRaise(st.lua.table_from({b"err": text}))

        def running(what: bytes) -> Run:
            if self.run is None:
                raise_table(b"ERR " + what + b" can only be called inside a script invocation")
            return self.run

        def call(*args: Any) -> Any:
            running(b"redis.call/pcall")
            r, is_err = self._call(st, args)
            if is_err:
                raise LuaRaise(r)
            return r

        def pcall(*args: Any) -> Any:
            running(b"redis.call/pcall")
            return self._call(st, args)[0]

        def error_reply(*args: Any) -> Any:
            if len(args) != 1 or type(args[0]) is not bytes:
                return st.lua.table_from({b"err": b"ERR wrong number or type of arguments"})
            v = args[0]
            return st.lua.table_from({b"err": error_text(v if v[:1] == b"-" else b"-" + v)})

        def status_reply(*args: Any) -> Any:
            if len(args) != 1 or type(args[0]) is not bytes:
                return st.lua.table_from({b"err": b"ERR wrong number or type of arguments"})
            return st.lua.table_from({b"ok": args[0]})

        def sha1(*args: Any) -> bytes:
            if len(args) != 1:
                raise_table(b"ERR wrong number of arguments")
            v = args[0]
            if type(v) is int or type(v) is float:
                v = b"%.14g" % v
            return sha1hex(v if type(v) is bytes else b"")

        def log_(*args: Any) -> None:
            if len(args) < 2:
                raise_table(b"ERR redis.log() requires two arguments or more.")
            level = _number(args[0])
            if level is None:
                raise_table(b"ERR First argument must be a number (log level).")
            if not 0 <= int(level) <= 3:
                raise_table(b"ERR Invalid debug level.")
            parts = [_lua_string(a) for a in args[1:]]
            msg = b" ".join(p for p in parts if p is not None)
            log.log(LOG_LEVELS[int(level)], "%s", msg.decode("utf-8", "replace"))

        def setresp(*args: Any) -> None:
            run = running(b"redis.setresp")
            if len(args) != 1:
                raise_table(b"ERR redis.setresp() requires one argument.")
            v = _number(args[0]) or 0
            if v not in (2, 3):
                raise_table(b"ERR RESP version must be 2 or 3.")
            run.session.resp = int(v)

        def set_repl(*args: Any) -> None:
            running(b"redis.set_repl")
            if len(args) != 1:
                raise_table(b"ERR redis.set_repl() requires two arguments.")
            v = int(_number(args[0]) or 0)
            if v & ~3:
                raise_table(
                    b"ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or "
                    b"REPL_NONE."
                )

        def acl_check_cmd(*args: Any) -> bool:
            run = running(b"redis.acl_check_cmd")
            argv = _argv(args)
            if type(argv) is bytes:
                raise_table(argv)
            assert isinstance(argv, list)
            cmd = lookup_for_call(argv)
            if cmd is None:
                raise_table(b"ERR Invalid command passed to redis.acl_check_cmd()")
            if run.caller.acl_all:
                return True
            return not check_user(self._user(run.caller), cmd, argv)[0]

        def register_function(*args: Any) -> None:
            err = self._register(len(args), *args)
            if err is not None:
                raise_table(err)

        def unwrap(e: Any) -> Any:
            if isinstance(e, LuaRaise):
                return e.value
            if isinstance(e, BaseException):
                log.error("error in a Lua callback: %r", e)
                return str(e).encode()
            return None

        def tick() -> bytes | None:
            return self._tick()

        def spread(f: Callable[..., Any], n: int, args: Any) -> Any:
            """`f` called with the `n` values of Lua table `args` (a call with more
            arguments than lupa passes; `wide` in lua_sandbox.lua)."""
            return f(*[args[i] for i in range(1, int(n) + 1)])

        return {
            b"call": call,
            b"pcall": pcall,
            b"error_reply": error_reply,
            b"status_reply": status_reply,
            b"sha1hex": sha1,
            b"log": log_,
            b"setresp": setresp,
            b"set_repl": set_repl,
            b"acl_check_cmd": acl_check_cmd,
            b"register_function": register_function,
            b"unwrap": unwrap,
            b"tick": tick,
            b"spread": spread,
            b"untail": lua_bytecode.untail,
            b"random": self.rng.random,
            b"randomseed": lambda seed: self.rng.seed(int(seed)),
            b"version": REDIS_VERSION,
            b"version_num": REDIS_VERSION_NUM,
        }

    def _register(self, nargs: int, *args: Any) -> bytes | None:
        """redis.register_function: None, or the error (Redis' texts)."""
        loading = self.loading
        if loading is None:
            return b"ERR redis.register_function can only be called on FUNCTION LOAD command"
        if nargs < 1 or nargs > 2:
            return b"ERR wrong number of arguments to redis.register_function"
        desc: bytes | None = None
        flags = 0
        if nargs == 2:
            name, callback = _lua_string(args[0]), args[1]
            if name is None:
                return b"ERR first argument to redis.register_function must be a string"
            if lupa.lua_type(callback) != "function":
                return b"ERR second argument to redis.register_function must be a function"
        else:
            named = args[0]
            if lupa.lua_type(named) != "table":
                return (
                    b"ERR calling redis.register_function with a single argument is only "
                    b"applicable to Lua table (representing named arguments)."
                )
            name = callback = None
            for k, v in named.items():
                if type(k) is not bytes:
                    return (
                        b"ERR named argument key given to redis.register_function is not a string"
                    )
                key = k.lower()
                if key in (b"function_name", b"description"):
                    v = _lua_string(v)
                    if v is None:
                        return (
                            b"ERR " + key + b" argument given to redis.register_function "
                            b"must be a string"
                        )
                    if key == b"description":
                        desc = v
                    else:
                        name = v
                elif key == b"callback":
                    if lupa.lua_type(v) != "function":
                        return (
                            b"ERR callback argument given to redis.register_function "
                            b"must be a function"
                        )
                    callback = v
                elif key == b"flags":
                    if lupa.lua_type(v) != "table":
                        return (
                            b"ERR flags argument to redis.register_function must be a table "
                            b"representing function flags"
                        )
                    i = 1
                    while (f := v[i]) is not None:
                        bit = SCRIPT_FLAGS.get(f.lower()) if type(f) is bytes else None
                        if bit is None:
                            return b"ERR unknown flag given"
                        flags |= bit
                        i += 1
                else:
                    return b"ERR unknown argument given to redis.register_function"
            if name is None:
                return b"ERR redis.register_function must get a function name argument"
            if callback is None:
                return b"ERR redis.register_function must get a callback argument"
        if not valid_name(name):
            return b"ERR " + NAME_ERROR.encode()
        if name in loading:
            return b"ERR Function already exists in the library"
        loading[name] = (callback, flags, desc)
        return None

    def _user(self, s: Session) -> Any:
        users = self.server.users
        return users.get(s.user) or users.default

    def _tick(self) -> bytes | None:
        """The count hook's callback: the error ending the run, or None."""
        if self.lent is not None and time.monotonic() >= self.slice_end:
            self.give_back()
        run = self.run
        if run is None:
            if self.loading is not None and time.monotonic() - self.load_started > LOAD_TIMEOUT:
                return b"ERR FUNCTION LOAD timeout"
            return None
        if not run.timed_out:
            limit = self.busy_threshold_ms()
            if limit > 0 and (time.monotonic() - run.start) * 1000 >= limit:
                run.timed_out = True
                log.warning(
                    "Slow script detected: still in execution after %d milliseconds. "
                    "You can try killing the script using the %s command. Script name is: %s.",
                    int((time.monotonic() - run.start) * 1000),
                    "SCRIPT KILL" if run.is_eval else "FUNCTION KILL",
                    run.name.decode("utf-8", "replace"),
                )
        return b"ERR Script killed by user with SCRIPT KILL..." if run.killed else None

    def busy_threshold_ms(self) -> int:
        try:
            return int(self.server.config.params.get("busy-reply-threshold", "5000"))
        except ValueError:
            return 5000

    def _call(self, st: LuaState, args: tuple[Any, ...]) -> tuple[Any, bool]:
        """redis.call/pcall: the reply as a Lua value, and whether it is an error."""
        run = self.run
        assert run is not None
        argv = _argv(args)
        if type(argv) is bytes:
            return st.lua.table_from({b"err": argv}), True
        assert isinstance(argv, list)
        with self.gate:
            direct = not self.marshal
            if direct:
                reply = self._command(run, argv)
        if not direct:
            self.borrow()
            reply = self._command(run, argv)
        if self.lent is not None and time.monotonic() >= self.slice_end:
            self.give_back()
        if type(reply) is ErrorReply:
            return self._err(st, bytes(reply))
        return to_lua(st.lua, reply, run.session.resp), False

    def _command(self, run: Run, argv: list[bytes]) -> Any:
        """Run one command of the script (on the worker while the loop's thread
        waits): its reply, or an ErrorReply."""
        cmd_or_err = lookup(argv)
        if type(cmd_or_err) is bytes:
            if lookup_for_call(argv) is None:
                return self._rejected(run, b"ERR Unknown Redis command called from script")
            return self._rejected(
                run, b"ERR Wrong number of args calling Redis command from script"
            )
        cmd = cmd_or_err
        assert isinstance(cmd, Command)
        refused = self._refuse(run, cmd, argv)
        if refused is not None:
            return self._rejected(run, refused, cmd)
        if cmd.is_write:
            run.write_dirty = True
        reply = DISPATCHER.call(run.session, cmd, argv)
        if type(reply) is Blocked:
            assert isinstance(reply, Blocked)
            reply = reply.on_timeout
        elif type(reply) is Deferred:
            reply = ErrorReply(NOT_ALLOWED)
        return reply

    def _rejected(self, run: Run, text: bytes, cmd: Command | None = None) -> ErrorReply:
        """A command the script may not run: counted as Redis counts a rejection."""
        s = run.caller
        s.server.stats.error_replies += 1
        count_error(s, text)
        if cmd is not None:
            command_stats(s, cmd).rejected += 1
        return ErrorReply(text)

    def borrow(self) -> None:
        """(The worker, the script having timed out) have the loop's thread wait
        while the script's commands run for a slice of SLICE seconds, as before the
        timeout: it puts the script's open transaction back in the store and waits
        until `give_back` (the next command past the slice's end, the count hook, or
        the script's end calls it). One thread-switch per slice, not per command."""
        assert self.loop is not None and self.run is not None
        store = self.run.session.store
        granted, back = threading.Event(), threading.Event()

        def lend() -> None:  # on the loop's thread
            store.pending, store.commit_time = self.stash
            self.stash = ([], 0)
            with self.gate:
                self.marshal = False
            self.lent = back
            granted.set()
            back.wait()

        self.loop.call_soon_threadsafe(lend)
        granted.wait()
        self.slice_end = time.monotonic() + SLICE

    def give_back(self) -> None:
        """End a slice (on the worker): the script's transaction aside again, the
        loop's thread goes on answering others."""
        back = self.lent
        if back is None or self.run is None:
            return
        store = self.run.session.store
        self.stash = (store.pending, store.commit_time)
        store.pending, store.commit_time = [], 0
        with self.gate:
            self.marshal = True
        self.lent = None
        back.set()

    def _err(self, st: LuaState, text: bytes) -> tuple[Any, bool]:
        """A command's error as Lua sees it: counted in the stats already (when the
        command or the script's checks refused it), so not again if the script
        returns it."""
        t = st.lua.table_from({b"err": error_text(b"-" + text)})
        t[b"ignore_error_stats_update"] = True
        return t, True

    def _refuse(self, run: Run, cmd: Command, argv: list[bytes]) -> bytes | None:
        """Redis' scriptCall checks, in its order: the error text, or None."""
        caller = run.caller
        if (cmd.flags & Flag.NOSCRIPT and not caller.server.debug.allow_deny_scripts) or (
            cmd.name.startswith("ts.") and cmd.name not in TS_ALLOWED
        ):
            return NOT_ALLOWED
        if not caller.acl_all:
            result, _ = check_user(self._user(caller), cmd, argv)
            if result:
                return b"ERR The user executing the script " + ACL_REASONS[result]
        server = self.server
        if run.ro and cmd.flags & (Flag.WRITE | Flag.MAY_REPLICATE):
            return b"ERR Write commands are not allowed from read-only scripts."
        if cmd.is_write:
            if run.session.view_lsn is not None:
                return READONLY_VIEW.encode()
            if not run.write_dirty and server.read_only:
                return READONLY.encode()
            if not run.write_dirty and server.durability is not None and server.durability.fenced:
                return server.durability.fenced.encode()
            if not run.write_dirty and server.replication.replicas_short(server.repl_stream):
                return NOREPLICAS.encode()
        if (
            server.over_maxmemory
            and not run.flags & FLAG_ALLOW_OOM
            and not run.write_dirty
            and cmd.flags & Flag.DENYOOM
        ):
            return OOM.encode()
        if server.cluster is not None:
            return _cluster_refusal(run, cmd, argv)
        return None


def _cluster_refusal(run: Run, cmd: Command, argv: list[bytes]) -> bytes | None:
    """Why a script's command may not run on this node of a cluster (Redis 7.0's
    scriptVerifyClusterState), else None: the routing check a client's command gets,
    its redirections turned into the script's errors; then, unless the script allows
    cross-slot keys, its keys must be in the slot of the script's keys so far."""
    if cmd.name in ("exec", "select"):  # EXEC is not allowed; SELECT: its own error
        return SELECT_REFUSED if cmd.name == "select" and argv[1] != b"0" else None
    refused = cluster_route(run.session, cmd, argv)
    if refused is not None:
        return SCRIPT_DOWN if refused == DOWN else NON_LOCAL
    if run.flags & (FLAG_ALLOW_CROSS_SLOT | FLAG_EVAL_COMPAT):
        return None
    keys = command_keys(cmd, argv)
    if not keys:
        return None
    slot = key_slot(keys[0])  # route() saw them all in one slot
    if run.slot < 0:
        run.slot = slot
    elif slot != run.slot:
        return CROSS_SLOT
    return None


# -- conversions ----------------------------------------------------------------------


def _number(v: Any) -> float | None:
    """Lua's tonumber of an argument (numbers and numeric strings)."""
    if type(v) is int or type(v) is float:
        return v
    if type(v) is bytes:
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _lua_string(v: Any) -> bytes | None:
    """lua_tolstring: strings, and numbers as Lua prints them."""
    if type(v) is bytes:
        return v
    if type(v) is int or type(v) is float:
        return b"%.14g" % v
    return None


def _argv(args: tuple[Any, ...]) -> list[bytes] | bytes:
    """redis.call's arguments as a command line, or the error text."""
    if not args:
        return b"ERR Please specify at least one argument for this redis lib call"
    argv = []
    for a in args:
        t = type(a)
        if t is bytes:
            argv.append(a)
        elif t is int or t is float:
            argv.append(b"%.17g" % a)
        else:
            return b"ERR Lua redis lib command arguments must be strings or integers"
    return argv


ACL_REASONS = {
    1: b"can't run this command or subcommand",
    2: b"can't access at least one of the keys mentioned in the command",
    3: b"can't publish to the channel mentioned in the command",
}
