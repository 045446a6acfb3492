"""Scripting and functions: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FUNCTION,
FCALL, FCALL_RO (Lua 5.1 through `commands.lua_engine`).

    EVAL script numkeys [key ...] [arg ...]        (and EVALSHA sha1, the _RO forms)
    SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP
    FUNCTION LOAD [REPLACE] code | LIST [LIBRARYNAME pattern] [WITHCODE] | DELETE lib |
             FLUSH [ASYNC|SYNC] | DUMP | RESTORE payload [FLUSH|APPEND|REPLACE] |
             STATS | KILL | HELP
    FCALL function numkeys [key ...] [arg ...]     (and FCALL_RO)

A script or function call is one commit: its writes run with the transaction left
open and are committed together with the EVAL/FCALL itself, one version for all of
them (as EXEC). Function libraries are server state kept by the store (a database-level
`functions` op and checkpoints), so they survive restarts and reach replicas; the
script cache is not persisted (as in Redis)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from commands.common import help_reply
from commands.dispatch import command_stats, count_error
from commands.errors import NOREPLICAS, SUBCOMMAND_SYNTAX, CommandError
from commands.glob import glob_match
from commands.lua_convert import to_resp
from commands.lua_engine import (
    FLAG_ALLOW_OOM,
    FLAG_EVAL_COMPAT,
    FLAG_NO_CLUSTER,
    FLAG_NO_WRITES,
    SCRIPT_FLAGS,
    Job,
    Run,
    ScriptEngine,
    Worker,
    sha1hex,
)
from commands.lua_library import dump_payload, parse_payload
from commands.lua_state import engine_of, shebang_flags
from commands.parsing import get_int
from commands.registry import Flag, command, container, lookup_by_name
from commands.replies import OK, Encoded, ErrorReply, Reply, deferred
from commands.session import Session
from store.database import fix_time, now_ms
from store.slots import key_slot

NOSCRIPT = "NOSCRIPT No matching script. Please use EVAL."
NOTBUSY = "NOTBUSY No scripts in execution right now."
EVAL_FLAGS = Flag.NOSCRIPT | Flag.SKIP_MONITOR | Flag.MAY_REPLICATE | Flag.NO_MANDATORY_KEYS
EVAL_FLAGS |= Flag.STALE


def _script_session(eng: ScriptEngine, caller: Session) -> Session:
    s = eng._session
    if s is None:
        s = eng._session = Session(eng.server)
        s.in_exec = True  # nothing a script runs commits on its own
        s.authenticated = True
        s.extra["script"] = True  # Redis' CLIENT_SCRIPT: commands may ask
    s.resp = 2
    s.user = caller.user
    s.acl_all = caller.acl_all
    s.meta = caller.meta
    s.view_lsn = caller.view_lsn
    s.view_times = caller.view_times
    s.branch = caller.branch
    s.select(caller.dbi)
    return s


# -- shebang and flags -----------------------------------------------------------------


def _numkeys(argv: list[bytes], error: str | None = None) -> int:
    try:
        n = get_int(argv[2])
    except CommandError:
        if error is None:
            raise
        raise CommandError(error) from None
    if n > len(argv) - 3:
        raise CommandError("ERR Number of keys can't be greater than number of args")
    if n < 0:
        raise CommandError("ERR Number of keys can't be negative")
    return n


def _prepare(s: Session, flags: int, ro: bool) -> None:
    """Redis' scriptPrepareForRun checks of a script with a shebang or a function."""
    if flags & FLAG_EVAL_COMPAT:
        return
    server = s.server
    if flags & FLAG_NO_CLUSTER and server.cluster is not None:
        raise CommandError("ERR Can not run script on cluster, 'no-cluster' flag is set.")
    if not flags & FLAG_NO_WRITES:
        if server.read_only:
            raise CommandError("READONLY Can not run script with write flag on readonly replica")
        if ro:
            raise CommandError("ERR Can not execute a script with write flag using *_ro command.")
        if server.replication.replicas_short(server.repl_stream):
            raise CommandError(NOREPLICAS)
    if server.over_maxmemory and not flags & (FLAG_ALLOW_OOM | FLAG_NO_WRITES):
        raise CommandError(
            "OOM allow-oom flag is not set on the script, "
            "can not run it when used memory > 'maxmemory'"
        )


def _execute(
    s: Session,
    eng: ScriptEngine,
    fn: Any,
    name: bytes,
    argv: list[bytes],
    flags: int,
    ro: bool,
    is_eval: bool,
) -> Reply:
    _prepare(s, flags, ro)
    numkeys = _numkeys(argv)
    keys, args = argv[3 : 3 + numkeys], argv[3 + numkeys :]
    state = eng.eval_state if is_eval else eng.fn_state
    ss = _script_session(eng, s)
    ss.extra["caller"] = (s, keys)  # client-side caching: whose run, its declared keys
    ro = ro or bool(not flags & FLAG_EVAL_COMPAT and flags & FLAG_NO_WRITES)
    lua_keys, lua_args = state.array(keys), state.array(args)

    def job() -> Outcome:
        """Everything that touches Lua: the run and the reply's conversion."""
        try:
            if is_eval:
                state.rawset(state.backing, b"KEYS", lua_keys)
                state.rawset(state.backing, b"ARGV", lua_args)
                ok, res = state.run_fn(fn)
            else:
                ok, res = state.run_fn(fn, lua_keys, lua_args)
        finally:
            eng.give_back()  # a slice of a timed-out run (lua_engine.ScriptEngine.borrow)
        errors: list[bytes] = []
        if ok:
            out: list[bytes] = []
            to_resp(state.rawget, res, s.resp, ss.resp, out, 0, errors)
            return Encoded(b"".join(out)), errors
        reply = _error_reply(state, res, name)
        if state.rawget(res, b"ignore_error_stats_update") is not True:
            errors.append(bytes(reply))
        return reply, errors

    eng.run = Run(s, ss, name, argv, flags, ro, is_eval)
    if keys and s.server.cluster is not None:  # routed: the declared keys share a slot
        eng.run.slot = key_slot(keys[0])
    # Keys expire as of the script's start for all of it (Redis' scriptTimeSnapshot).
    eng.run.fixed_before = fix_time(now_ms())
    threshold = eng.busy_threshold_ms()
    if threshold <= 0 or s.in_exec:
        # No time limit (or inside EXEC, which answers at once): run in place.
        try:
            reply = job()
        finally:
            _finish(s, eng)
        return _counted(s, reply)
    if eng.worker is None:
        eng.worker = Worker()
    task = eng.worker.submit(job)
    if task.done.wait(threshold / 1000):
        _finish(s, eng)
        return _counted(s, task.result)
    return _timed_out(s, eng, task, is_eval)


def _timed_out(s: Session, eng: ScriptEngine, task: Job, is_eval: bool) -> Reply:
    """The script ran past busy-reply-threshold: let the loop go on (others get
    -BUSY) and answer when the worker is done."""
    loop = asyncio.get_running_loop()
    store = s.store
    with eng.gate:
        eng.marshal = True
        eng.loop = loop
        eng.stash = (store.pending, store.commit_time)
        store.pending, store.commit_time = [], 0
    s.server.busy_script = (BUSY_SCRIPT if is_eval else BUSY_FUNCTION).encode()
    finished: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not finished.done():
            finished.set_result(None)

    def notify() -> None:
        loop.call_soon_threadsafe(wake)

    with task.lock:
        if task.done.is_set():
            notify()
        else:
            task.notify = notify

    async def answer() -> Reply:
        await finished
        with eng.gate:
            eng.marshal = False
            store.pending, store.commit_time = eng.stash
            eng.stash = ([], 0)
        s.server.busy_script = b""
        _finish(s, eng)
        if store.pending:
            store.commit()  # the script's writes: one version, as in place
        return _counted(s, task.result)

    return deferred(answer)


def _finish(s: Session, eng: ScriptEngine) -> None:
    if eng.run is not None:
        fix_time(eng.run.fixed_before)
    eng.run = None
    # The commit that follows is the caller's (its LSN, its sync wait).
    s.store.begin(s.last_cmd_name, s)


Outcome = tuple[Reply, list[bytes]]  # a run's reply, and the errors it newly reports


def _counted(s: Session, outcome: Outcome) -> Reply:
    """Count a run's errors as Redis does: each error reply not already counted (a
    command's), and the EVAL/FCALL as failed when its reply is an error."""
    reply, errors = outcome
    stats = s.server.stats
    for text in errors:
        stats.error_replies += 1
        count_error(s, text)
    if type(reply) is ErrorReply or (type(reply) is Encoded and reply[:1] == b"-"):
        cmd = lookup_by_name(s.last_cmd_name.encode())
        if cmd is not None:
            command_stats(s, cmd).failed += 1
    return reply


def _error_reply(state: Any, err: Any, name: bytes) -> ErrorReply:
    """A failed run's reply: the error with the script and the line it came from."""
    rawget = state.rawget
    msg = rawget(err, b"err")
    if type(msg) is not bytes:
        msg = b"ERR Error running script"
    source, line = rawget(err, b"source"), rawget(err, b"line")
    text = msg
    if source is not None and line is not None:
        text += b" script: %b, on %b:%d." % (name, source, int(line))
    return ErrorReply(text.replace(b"\r", b" ").replace(b"\n", b" "))


# -- EVAL ----------------------------------------------------------------------------


def _create(eng: ScriptEngine, body: bytes) -> tuple[bytes, int, Any]:
    sha = sha1hex(body)
    found = eng.scripts.get(sha)
    if found is not None:
        return sha, found[1], found[2]
    flags, cut = shebang_flags(body)
    fn, err = eng.eval_state.compile(body[cut:], b"@user_script")
    if fn is None:
        raise CommandError(b"ERR Error compiling script (new function): %b" % (err or b""))
    eng.scripts[sha] = (body, flags, fn)
    return sha, flags, fn


def _eval(s: Session, argv: list[bytes], by_sha: bool, ro: bool) -> Reply:
    eng = engine_of(s.server)
    _numkeys(argv)
    if by_sha:
        found = eng.scripts.get(argv[1].lower()) if len(argv[1]) == 40 else None
        if found is None:
            raise CommandError(NOSCRIPT)
        sha, flags, fn = argv[1].lower(), found[1], found[2]
    else:
        sha, flags, fn = _create(eng, argv[1])
    return _execute(s, eng, fn, sha, argv, flags, ro, True)


@command("eval", -3, EVAL_FLAGS)
def cmd_eval(s: Session, argv: list[bytes]) -> Reply:
    return _eval(s, argv, False, False)


@command("evalsha", -3, EVAL_FLAGS)
def cmd_evalsha(s: Session, argv: list[bytes]) -> Reply:
    return _eval(s, argv, True, False)


@command("eval_ro", -3, EVAL_FLAGS | Flag.READONLY)
def cmd_eval_ro(s: Session, argv: list[bytes]) -> Reply:
    return _eval(s, argv, False, True)


@command("evalsha_ro", -3, EVAL_FLAGS | Flag.READONLY)
def cmd_evalsha_ro(s: Session, argv: list[bytes]) -> Reply:
    return _eval(s, argv, True, True)


# -- SCRIPT --------------------------------------------------------------------------

container("script", -2)

SCRIPT_HELP = [
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
]


@command("script|help", 2, Flag.LOADING | Flag.STALE)
def cmd_script_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], SCRIPT_HELP)


@command("script|load", 3, Flag.NOSCRIPT | Flag.STALE)
def cmd_script_load(s: Session, argv: list[bytes]) -> Reply:
    sha, _flags, _fn = _create(engine_of(s.server), argv[2])
    return sha


@command("script|exists", -3, Flag.NOSCRIPT)
def cmd_script_exists(s: Session, argv: list[bytes]) -> Reply:
    scripts = engine_of(s.server).scripts
    return [1 if a.lower() in scripts else 0 for a in argv[2:]]


@command("script|flush", -2, Flag.NOSCRIPT)
def cmd_script_flush(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3 or (len(argv) == 3 and argv[2].lower() not in (b"sync", b"async")):
        raise CommandError("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    eng = engine_of(s.server)
    eng.scripts.clear()
    eng.reset_eval()
    return OK


@command("script|kill", 2, Flag.NOSCRIPT | Flag.ALLOW_BUSY)
def cmd_script_kill(s: Session, argv: list[bytes]) -> Reply:
    return _kill(s, True)


@command("script|debug", 3, Flag.NOSCRIPT)
def cmd_script_debug(s: Session, argv: list[bytes]) -> Reply:
    mode = argv[2].lower()
    if mode == b"no":
        return OK
    if mode in (b"yes", b"sync"):
        raise CommandError("ERR SCRIPT DEBUG is not supported by this server")
    raise CommandError("ERR Use SCRIPT DEBUG YES/SYNC/NO")


def _kill(s: Session, is_eval: bool) -> Reply:
    run = engine_of(s.server).run
    if run is None:
        raise CommandError(NOTBUSY)
    if run.write_dirty:
        raise CommandError(
            "UNKILLABLE Sorry the script already executed write commands against the "
            "dataset. You can either wait the script termination or kill the server in a "
            "hard way using the SHUTDOWN NOSAVE command."
        )
    if is_eval and not run.is_eval:
        raise CommandError(BUSY_FUNCTION)
    if not is_eval and run.is_eval:
        raise CommandError(BUSY_SCRIPT)
    run.killed = True
    return OK


BUSY_SCRIPT = (
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
)
BUSY_FUNCTION = (
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
)


# -- FUNCTION ------------------------------------------------------------------------

container("function", -2)

FUNCTION_HELP = [
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored "
    "using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a "
    "restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, "
    "replace the old",
    "      libraries with the new libraries (notice that even on this option there is a "
    "chance of failure",
    "      in case of functions name collision with another library).",
]


@command("function|help", 2, Flag.LOADING | Flag.STALE)
def cmd_function_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], FUNCTION_HELP)


def _save_libraries(s: Session, libs: dict[bytes, bytes]) -> None:
    """Record the new set of libraries (a database-level op: durable, replicated)."""
    eng = engine_of(s.server)
    s.store.db_op(0, ("functions", [[n, c] for n, c in libs.items()]))
    eng.compiled_from = s.store.functions


@command("function|load", -3, Flag.WRITE | Flag.DENYOOM | Flag.NOSCRIPT)
def cmd_function_load(s: Session, argv: list[bytes]) -> Reply:
    replace = False
    i = 2
    while i < len(argv) - 1:
        if argv[i].lower() == b"replace":
            replace = True
            i += 1
            continue
        raise CommandError(b"ERR Unknown option given: " + argv[i])
    if i >= len(argv):
        raise CommandError("ERR Function code is missing")
    eng = engine_of(s.server)
    eng.sync_functions(s.store.functions)
    name = eng.load_library(argv[i], replace)
    libs = dict(s.store.functions)
    libs[name] = argv[i]
    _save_libraries(s, libs)
    return name


@command("function|delete", 3, Flag.WRITE | Flag.NOSCRIPT)
def cmd_function_delete(s: Session, argv: list[bytes]) -> Reply:
    eng = engine_of(s.server)
    eng.sync_functions(s.store.functions)
    if argv[2] not in eng.libraries:
        raise CommandError("ERR Library not found")
    eng.delete_library(argv[2])
    libs = dict(s.store.functions)
    libs.pop(argv[2], None)
    _save_libraries(s, libs)
    return OK


@command("function|flush", -2, Flag.WRITE | Flag.NOSCRIPT)
def cmd_function_flush(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise CommandError(SUBCOMMAND_SYNTAX % (argv[1][:128], argv[0].upper()))
    if len(argv) == 3 and argv[2].lower() not in (b"sync", b"async"):
        raise CommandError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    eng = engine_of(s.server)
    eng.sync_functions(s.store.functions)
    for name in list(eng.libraries):
        eng.delete_library(name)
    _save_libraries(s, {})
    return OK


@command("function|list", -2, Flag.NOSCRIPT)
def cmd_function_list(s: Session, argv: list[bytes]) -> Reply:
    with_code = False
    pattern: bytes | None = None
    i = 2
    while i < len(argv):
        a = argv[i].lower()
        if not with_code and a == b"withcode":
            with_code = True
        elif pattern is None and a == b"libraryname":
            if i >= len(argv) - 1:
                raise CommandError("ERR library name argument was not given")
            i += 1
            pattern = argv[i]
        else:
            raise CommandError(b"ERR Unknown argument " + argv[i])
        i += 1
    eng = engine_of(s.server)
    eng.sync_functions(s.store.functions)
    out: list[Any] = []
    for name, (code, fns) in eng.libraries.items():
        if pattern is not None and not glob_match(pattern, name, nocase=True):
            continue
        entry: dict[bytes, Any] = {
            b"library_name": name,
            b"engine": b"LUA",
            b"functions": [
                {
                    b"name": fname,
                    b"description": desc,
                    b"flags": _flag_set(s.resp, flags),
                }
                for fname, (_cb, flags, desc) in fns.items()
            ],
        }
        if with_code:
            entry[b"library_code"] = code
        out.append(entry)
    return out


def _flag_set(resp: int, flags: int) -> Encoded:
    """A function's flags: a set in RESP3 (in Redis' order), an array in RESP2."""
    names = [f for f, bit in SCRIPT_FLAGS.items() if flags & bit]
    head = (b"*%d\r\n" if resp == 2 else b"~%d\r\n") % len(names)
    return Encoded(head + b"".join(b"+%b\r\n" % n for n in names))


@command("function|stats", 2, Flag.NOSCRIPT | Flag.ALLOW_BUSY)
def cmd_function_stats(s: Session, argv: list[bytes]) -> Reply:
    eng = engine_of(s.server)
    run = eng.run
    if run is not None and run.is_eval:
        raise CommandError(BUSY_SCRIPT)
    eng.sync_functions(s.store.functions)
    running: Reply = None
    if run is not None:
        running = {
            b"name": run.name,
            b"command": list(run.argv),
            b"duration_ms": int((time.monotonic() - run.start) * 1000),
        }
    return {
        b"running_script": running,
        b"engines": {
            b"LUA": {
                b"libraries_count": len(eng.libraries),
                b"functions_count": len(eng.functions),
            }
        },
    }


@command("function|kill", 2, Flag.NOSCRIPT | Flag.ALLOW_BUSY)
def cmd_function_kill(s: Session, argv: list[bytes]) -> Reply:
    return _kill(s, False)


@command("function|dump", 2, Flag.NOSCRIPT)
def cmd_function_dump(s: Session, argv: list[bytes]) -> Reply:
    compress = s.server.config.params.get("rdbcompression", "yes") == "yes"
    return dump_payload(list(s.store.functions.values()), compress)


@command("function|restore", -3, Flag.WRITE | Flag.DENYOOM | Flag.NOSCRIPT)
def cmd_function_restore(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 4:
        raise CommandError(SUBCOMMAND_SYNTAX % (argv[1][:128], argv[0].upper()))
    policy = b"append"
    if len(argv) == 4:
        policy = argv[3].lower()
        if policy not in (b"flush", b"append", b"replace"):
            raise CommandError(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
            )
    codes = parse_payload(argv[2])
    if codes is None:
        raise CommandError("ERR DUMP payload version or checksum are wrong")
    eng = engine_of(s.server)
    eng.sync_functions(s.store.functions)
    libs = eng.restore_libraries(codes, policy.decode())
    _save_libraries(s, libs)
    return OK


# -- FCALL ---------------------------------------------------------------------------


def _fcall(s: Session, argv: list[bytes], ro: bool) -> Reply:
    eng = engine_of(s.server)
    eng.sync_functions(s.store.functions)
    key = argv[1].lower()
    found = eng.functions.get(key)
    if found is None:
        raise CommandError("ERR Function not found")
    _numkeys(argv, "ERR Bad number of keys provided")
    fn, flags, _desc = found
    return _execute(s, eng, fn, eng.names[key], argv, flags, ro, False)


@command("fcall", -3, EVAL_FLAGS)
def cmd_fcall(s: Session, argv: list[bytes]) -> Reply:
    return _fcall(s, argv, False)


@command("fcall_ro", -3, EVAL_FLAGS | Flag.READONLY)
def cmd_fcall_ro(s: Session, argv: list[bytes]) -> Reply:
    return _fcall(s, argv, True)
