"""DEBUG, as Redis 7.0.15 has it, behind enable-debug-command (no|yes|local; the
dispatcher refuses it with Redis' text unless allowed, `commands.dispatch`).

DEBUG HELP · SLEEP seconds · RELOAD [MERGE] [NOFLUSH] [NOSAVE] · LOADAOF
DEBUG OBJECT key · SDSLEN key · LISTPACK key · QUICKLIST key [0|1] · HTSTATS dbid · HTSTATS-KEY key
DEBUG DIGEST · DIGEST-VALUE [key ...] · PROTOCOL type · ERROR text · LOG message · LEAK text
DEBUG SET-ACTIVE-EXPIRE 0|1 · PAUSE-CRON 0|1 · SET-DISABLE-DENY-SCRIPTS 0|1
DEBUG SET-SKIP-CHECKSUM-VALIDATION 0|1 · QUICKLIST-PACKED-THRESHOLD size · AOF-FLUSH-SLEEP usec
DEBUG REPLYBUFFER PEAK-RESET-TIME never|reset|ms · REPLYBUFFER RESIZING 0|1
DEBUG CHANGE-REPL-ID · CONFIG-REWRITE-FORCE-ALL · POPULATE count [prefix] [size]
DEBUG STRUCTSIZE · STRINGMATCH-TEST · MALLCTL key [val] · MALLCTL-STR key [val]
DEBUG CLIENT-EVICTION · DROP-CLUSTER-PACKET-FILTER type · CLUSTERLINK KILL ... · REPLICATE ...

In our architecture:

- SLEEP blocks the event loop, so the whole server stops, as Redis does.
- RELOAD writes a checkpoint to storage (unless NOSAVE), waits until every write is
  durable, drops the in-memory state and rebuilds it from storage exactly as a restart
  does (checkpoint, then the segments after it; keys, expiries, histories, seals,
  branches, tables and function libraries come back), other clients meanwhile getting
  -LOADING. Values then take the encodings Redis gives on load (a hash, set or sorted
  set that fits the listpack/intset limits again is compact again). Storage holds every
  write, so NOFLUSH MERGE gives the same dataset; NOFLUSH without MERGE over a dataset
  that is not empty answers Redis' error and changes nothing (Redis would stop at the
  first duplicate). Inside MULTI/EXEC or a script both are refused (the block's
  writes are not committed yet: `commands.reload`). LOADAOF is the log equivalent:
  every write made durable, then the same rebuild without a new checkpoint. A server
  without storage round-trips a checkpoint image in memory.
- OBJECT prints Redis' line with our figures: `at:` the value's address in our
  process, with the identities of Redis' objects (`commands.hotwrites.object_address`:
  one object per shared small integer, INCR's in-place change keeps it), the
  encoding OBJECT ENCODING reports, `serializedlength` the length of the value in
  Redis' RDB encoding without compression, the LRU clock of the key's last access and
  its idle seconds, and for lists the quicklist figures the value would have under
  list-max-listpack-size.
- DIGEST and DIGEST-VALUE compute Redis' digests (`commands.digest`): equal to
  redis-server's for the same data.
- SET-ACTIVE-EXPIRE 0 stops the cron's expiry cycle (lazy expiry goes on); PAUSE-CRON 1
  stops the whole cron; SET-DISABLE-DENY-SCRIPTS 1 lets scripts call no-script commands.
- CHANGE-REPL-ID draws a new replication ID (INFO replication's master_replid).
- POPULATE writes its keys as one version, like any write (Redis does not propagate
  them; we keep them durable).
- MALLCTL and MALLCTL-STR: this process has no jemalloc, so every name is unknown
  (jemalloc's ENOENT, as redis-server answers an unknown name).
- LISTPACK and QUICKLIST log the key's encoding and element count (Redis prints the
  node layout on stdout); both answer Redis' status line.
- HTSTATS and HTSTATS-KEY show our dicts' sizes (open addressing: no chains).
- Redis-only internals with nothing behind them here answer what Redis answers in
  the matching configuration: CLIENT-EVICTION (maxmemory-clients is 0),
  DROP-CLUSTER-PACKET-FILTER, CLUSTERLINK (no cluster mode), REPLICATE (no replicas
  read Redis' stream), CONFIG-REWRITE-FORCE-ALL (no config file: Redis' "Bad
  address"), AOF-FLUSH-SLEEP (OK: there is no AOF to slow down).
- SEGFAULT, PANIC, ASSERT, OOM, RESTART and CRASH-AND-RECOVER (crashing or restarting
  the process on purpose) are not served: they answer the unknown-subcommand error.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from typing import Any

from commands import digest
from commands.access import LRU_CLOCK_MAX, idle_seconds, last_access
from commands.encodings import object_encoding, refcount
from commands.errors import NO_SUCH_KEY, CommandError
from commands.glob import glob_match
from commands.hotwrites import object_address, writer_of
from commands.limits import memtoull
from commands.parsing import get_int, string2ll, strtod
from commands.rdbsize import quicklist_figures, serialized_length
from commands.registry import ADMIN, Flag, command
from commands.reload import reload_reply
from commands.replies import (
    OK,
    BigNumber,
    Encoded,
    ErrorReply,
    Frames,
    Push,
    Reply,
    Simple,
    Verbatim,
)
from commands.session import Session
from store.ops import SET

log = logging.getLogger("temporalstore")

DEBUG_HELP = (
    "AOF-FLUSH-SLEEP <microsec>",
    "    Server will sleep before flushing the AOF, this is used for testing.",
    "ASSERT",
    "    Crash by assertion failed.",
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "CRASH-AND-RECOVER [<milliseconds>]",
    "    Hard crash and restart after a <milliseconds> delay (default 0).",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LEAK <string>",
    "    Create a memory leak of the input string.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "HTSTATS <dbid>",
    "    Return hash table statistics of the specified Redis database.",
    "HTSTATS-KEY <key>",
    "    Like HTSTATS but for the hash table stored at <key>'s value.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "REPLICATE <string>",
    "    Replicates the provided string to replicas, allowing data divergence.",
    "MALLCTL <key> [<val>]",
    "    Get or set a malloc tuning integer.",
    "MALLCTL-STR <key> [<val>]",
    "    Get or set a malloc tuning string.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "DROP-CLUSTER-PACKET-FILTER <packet-type>",
    "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
    "OOM",
    "    Crash the server simulating an out-of-memory error.",
    "PANIC",
    "    Crash the server simulating a panic.",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD [option ...]",
    "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
    "    * MERGE: conflicting keys will be loaded from RDB.",
    "    * NOFLUSH: the existing database will not be removed before load, but",
    "      conflicting keys will generate an exception and kill the server.",
    "    * NOSAVE: the database will be loaded from an existing RDB file.",
    "    Examples:",
    "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
    "      the database.",
    "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
    "      existing RDB file.",
    "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
    "      file to the database.",
    "RESTART [<milliseconds>]",
    "    Graceful restart: save config, db, restart after a <milliseconds> delay (default 0).",
    "SDSLEN <key>",
    "    Show low level SDS string info representing `key` and value.",
    "SEGFAULT",
    "    Crash the server with sigsegv.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
    "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRINGMATCH-TEST",
    "    Run a fuzz tester against the stringmatchlen() function.",
    "STRUCTSIZE",
    "    Return the size of different Redis core C structures.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
    "CLIENT-EVICTION",
    "    Show low level client eviction pools info (maxmemory-clients).",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
    "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
    "    In case NEVER is provided the last observed peak will never be reset",
    "    In case RESET is provided the peak reset time will be restored to the default value",
    "REPLYBUFFER RESIZING <0|1>",
    "    Enable or disable the reply buffer resize cron job",
    "CLUSTERLINK KILL <to|from|all> <node-id>",
    "    Kills the link based on the direction to/from (both) with the provided node.",
)
_HELP_REPLY = [
    Simple(b"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
    *(Simple(line.encode()) for line in DEBUG_HELP),
    Simple(b"HELP"),
    Simple(b"    Prints this help."),
]
SUBCOMMAND_SYNTAX = "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP."
PROTOCOL_NAMES = (
    "ERR Wrong protocol type name. Please use one of the following: "
    "string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"
)
PACKED_THRESHOLD = "ERR argument must be a memory value bigger than 1 and smaller than 4gb"
NOT_SDS = "ERR Not an sds encoded string."
NOT_LISTPACK = "ERR Not a listpack encoded object."
NOT_QUICKLIST = "ERR Not a quicklist encoded object."
NOT_HASHTABLE = "ERR The value stored at the specified key is not represented using an hash table"
ENOENT = "ERR No such file or directory"


def atoi(b: bytes) -> int:
    """C's atoi: leading whitespace, a sign and digits; anything else stops it (0)."""
    s = b.lstrip(b" \t\n\v\f\r")
    end = 1 if s[:1] in (b"+", b"-") else 0
    while end < len(s) and 48 <= s[end] <= 57:
        end += 1
    try:
        n = int(s[:end])
    except ValueError:
        return 0
    return (n + 2**31) % 2**32 - 2**31


def _syntax(argv: list[bytes]) -> CommandError:
    return CommandError(SUBCOMMAND_SYNTAX.format(argv[1].decode("utf-8", "replace")[:128]))


def _raw_value(s: Session, key: bytes) -> Any:
    """The value as stored, even if logically expired (Redis' dictFind); no access."""
    return s.db.data.get(key)


def _lookup(s: Session, key: bytes) -> Any:
    """objectCommandLookupOrReply: an unexpired value without touching it, or NO_SUCH_KEY."""
    v = s.db.peek(key)
    if v is None:
        raise CommandError(NO_SUCH_KEY)
    return v


# -- the subcommands ---------------------------------------------------------------------


def _object(s: Session, argv: list[bytes]) -> Reply:
    key = argv[2]
    v = _raw_value(s, key)
    if v is None:
        raise CommandError(NO_SUCH_KEY)
    enc = object_encoding(v, writer_of(s, key))
    extra = b""
    params = s.server.config.params
    fill = int(params.get("list-max-listpack-size", "-2"))
    threshold = s.server.debug.quicklist_packed_threshold
    if isinstance(v, deque):
        nodes, avg, fill, compressed, size = quicklist_figures(v, params, threshold)
        extra = (
            b" ql_nodes:%d ql_avg_node:%.2f ql_listpack_max:%d ql_compressed:%d"
            % (
                nodes,
                avg,
                fill,
                compressed,
            )
            + b" ql_uncompressed_size:%d" % size
        )
    return Simple(
        b"Value at:0x%x refcount:%d encoding:%b serializedlength:%d lru:%d lru_seconds_idle:%d%b"
        % (
            object_address(s, key, v),
            refcount(s, v),
            enc,
            serialized_length(v, fill, threshold),
            last_access(s.db, key) & LRU_CLOCK_MAX,
            idle_seconds(s.db, key),
            extra,
        )
    )


def _sdslen(s: Session, argv: list[bytes]) -> Reply:
    key = argv[2]
    v = _raw_value(s, key)
    if v is None:
        raise CommandError(NO_SUCH_KEY)
    if not isinstance(v, bytes | bytearray) or object_encoding(v) == b"int":
        raise CommandError(NOT_SDS)
    # Our strings have no spare capacity: avail 0; "zmalloc" is the bytes object's size.
    return Simple(
        b"key_sds_len:%d, key_sds_avail:0, key_zmalloc: %d, "
        b"val_sds_len:%d, val_sds_avail:0, val_zmalloc: %d"
        % (len(key), key.__sizeof__(), len(v), v.__sizeof__())
    )


def _protocol(s: Session, argv: list[bytes]) -> Reply:
    name = argv[2].lower()
    if name == b"string":
        return b"Hello World"
    if name == b"integer":
        return 12345
    if name == b"double":
        return 3.141
    if name == b"bignum":
        return BigNumber(b"1234567999999999999999999999999999999")
    if name == b"null":
        return None
    if name == b"array":
        return [0, 1, 2]
    if name == b"set":
        return {0, 1, 2}
    if name == b"map":
        return {0: False, 1: True, 2: False}
    if name == b"attrib":
        real = b"Some real reply following the attribute"
        if s.resp < 3:
            return real
        attribute = b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n"
        return Encoded(attribute + b"$%d\r\n%b\r\n" % (len(real), real))
    if name == b"push":
        if s.resp < 3:
            raise CommandError("ERR RESP2 is not supported by this command")
        return Frames(
            [Push([b"server-cpu-usage", 42]), b"Some real reply following the push reply"]
        )
    if name == b"true":
        return True
    if name == b"false":
        return False
    if name == b"verbatim":
        return Verbatim(b"This is a verbatim\nstring")
    raise CommandError(PROTOCOL_NAMES)


def _sleep(s: Session, argv: list[bytes]) -> Reply:
    seconds, _used, _erange = strtod(argv[2])
    usec = int(seconds * 1_000_000) if seconds == seconds and abs(seconds) < 2**62 else 0
    if usec > 0:
        time.sleep(usec / 1_000_000)  # the event loop stops: the whole server sleeps
    return OK


def _packed_threshold(s: Session, argv: list[bytes]) -> Reply:
    size = memtoull(argv[2].decode("latin-1"))
    if size is None or size > (1 << 32) - (1 << 20):
        raise CommandError(PACKED_THRESHOLD)
    s.server.debug.quicklist_packed_threshold = size or (1 << 30)
    return OK


def _replybuffer(s: Session, argv: list[bytes]) -> Reply:
    what, arg = argv[2].lower(), argv[3]
    dbg = s.server.debug
    if what == b"peak-reset-time":
        if arg.lower() == b"never":
            dbg.reply_buffer_peak_reset_ms = -1
        elif arg.lower() == b"reset":
            dbg.reply_buffer_peak_reset_ms = 5000
        else:
            dbg.reply_buffer_peak_reset_ms = get_int(arg)
    elif what == b"resizing":
        dbg.reply_buffer_resizing = bool(atoi(arg))
    else:
        raise _syntax(argv)
    return OK


def _populate(s: Session, argv: list[bytes]) -> Reply:
    count = _positive(argv[2])
    size = _positive(argv[4]) if len(argv) == 5 else 0
    prefix = argv[3] if len(argv) >= 4 else b"key"
    db = s.db
    for j in range(count):
        key = b"%b:%d" % (prefix, j)
        if db.get(key) is not None:
            continue
        value = b"value:%d" % j
        if size:
            value = value[:size].ljust(size, b"\0")
        s.store.apply(db, key, (SET, value, None))
    return OK


def _positive(b: bytes) -> int:
    """getPositiveLongFromObjectOrReply: one message for both failures."""
    n = string2ll(b)
    if n is None or n < 0:
        raise CommandError("ERR value is out of range, must be positive")
    return n


def _htstats(s: Session, argv: list[bytes]) -> Reply:
    dbid = get_int(argv[2])
    if not 0 <= dbid < len(s.store.dbs):
        raise CommandError("ERR Out of range database")
    db = s.store.dbs[dbid]
    return Verbatim(
        b"[Dictionary HT]\n"
        + _dict_stats(len(db.data))
        + b"[Expires HT]\n"
        + _dict_stats(len(db.expires))
    )


def _dict_stats(n: int) -> bytes:
    """Redis' dictGetStats header for one of our dicts of `n` entries. Python's dicts
    use open addressing: no chains to report, and the table size is CPython's (the
    smallest power of two, at least 8, whose two thirds hold `n`)."""
    head = b"Hash table 0 stats (main hash table):\n"
    if n == 0:
        return head + b"No stats available for empty dictionaries\n"
    size = 8
    while size * 2 // 3 < n:
        size *= 2
    return head + b" table size: %d\n number of elements: %d\n" % (size, n)


def _htstats_key(s: Session, argv: list[bytes]) -> Reply:
    v = _lookup(s, argv[2])
    enc = object_encoding(v)
    if enc not in (b"hashtable", b"skiplist"):
        raise CommandError(NOT_HASHTABLE)
    return Verbatim(_dict_stats(len(v)))


def _layout(s: Session, argv: list[bytes], wanted: tuple[bytes, ...], error: str) -> Reply:
    v = _lookup(s, argv[2])
    enc = object_encoding(v, writer_of(s, argv[2]))
    if enc not in wanted:
        raise CommandError(error)
    items = list(v) if not isinstance(v, dict) else [x for kv in v.items() for x in kv]
    log.info(
        "DEBUG %s %r: %s, %d elements", argv[1].decode().upper(), argv[2], enc.decode(), len(items)
    )
    what = b"Listpack" if wanted == (b"listpack",) else b"Quicklist"
    return Simple(what + b" structure printed on stdout")


def _change_repl_id(s: Session, argv: list[bytes]) -> Reply:
    log.warning("Changing replication IDs after receiving DEBUG change-repl-id")
    s.server.replid = os.urandom(20).hex()
    return OK


def _error(s: Session, argv: list[bytes]) -> Reply:
    return ErrorReply(argv[2].replace(b"\n", b" ").replace(b"\r", b" "))


def _log(s: Session, argv: list[bytes]) -> Reply:
    log.warning("DEBUG LOG: %s", argv[2].decode("utf-8", "replace"))
    return OK


def _flag(attr: str) -> Any:
    def set_flag(s: Session, argv: list[bytes]) -> Reply:
        setattr(s.server.debug, attr, bool(atoi(argv[2])))
        return OK

    return set_flag


def _set_active_expire(s: Session, argv: list[bytes]) -> Reply:
    s.server.debug.active_expire = bool(atoi(argv[2]))
    return OK


def _digest(s: Session, argv: list[bytes]) -> Reply:
    return Simple(digest.hex_digest(digest.dataset_digest(s.store.dbs)))


def _digest_value(s: Session, argv: list[bytes]) -> Reply:
    return [Simple(digest.hex_digest(digest.key_value_digest(s.db, k))) for k in argv[2:]]


def _structsize(s: Session, argv: list[bytes]) -> Reply:
    # Redis' C structure sizes; ours are Python objects: their sizes in this process.
    return (
        b"bits:64 robj:%d dictentry:%d sdshdr5:%d sdshdr8:%d sdshdr16:%d sdshdr32:%d sdshdr64:%d "
        % (
            object().__sizeof__(),
            (0,).__sizeof__(),
            b"".__sizeof__(),
            b"".__sizeof__(),
            b"".__sizeof__(),
            b"".__sizeof__(),
            b"".__sizeof__(),
        )
    )


def _mallctl(s: Session, argv: list[bytes]) -> Reply:
    if argv[1].lower() == b"mallctl" and len(argv) > 3:
        get_int(argv[3])
    return ErrorReply(ENOENT.encode())


def _ok(s: Session, argv: list[bytes]) -> Reply:
    return OK


def _leak(s: Session, argv: list[bytes]) -> Reply:
    _LEAKED.append(bytes(argv[2]))
    return OK


_LEAKED: list[bytes] = []


def _clusterlink(s: Session, argv: list[bytes]) -> Reply:
    raise CommandError("ERR Debug option only available for cluster mode enabled setup!")


def _stringmatch_test(s: Session, argv: list[bytes]) -> Reply:
    rng = os.urandom
    for _ in range(1000):
        glob_match(rng(16), rng(32))
    return Simple(b"Apparently Redis did not crash: test passed")


def _reload(s: Session, argv: list[bytes]) -> Reply:
    return reload_reply(s, argv)


# name -> (handler, argument counts accepted: an exact count, or -n for at least n)
_SUBCOMMANDS: dict[bytes, tuple[Any, tuple[int, ...]]] = {
    b"log": (_log, (3,)),
    b"leak": (_leak, (3,)),
    b"reload": (_reload, (-2,)),
    b"loadaof": (_reload, (-2,)),
    b"drop-cluster-packet-filter": (lambda s, a: (get_int(a[2]), OK)[1], (3,)),
    b"object": (_object, (3,)),
    b"sdslen": (_sdslen, (3,)),
    b"listpack": (lambda s, a: _layout(s, a, (b"listpack",), NOT_LISTPACK), (3,)),
    b"quicklist": (lambda s, a: _layout(s, a, (b"quicklist",), NOT_QUICKLIST), (3, 4)),
    b"populate": (_populate, (3, 4, 5)),
    b"digest": (_digest, (2,)),
    b"digest-value": (_digest_value, (-2,)),
    b"protocol": (_protocol, (3,)),
    b"sleep": (_sleep, (3,)),
    b"set-active-expire": (_set_active_expire, (3,)),
    b"quicklist-packed-threshold": (_packed_threshold, (3,)),
    b"set-skip-checksum-validation": (_flag("skip_checksum_validation"), (3,)),
    b"aof-flush-sleep": (lambda s, a: (atoi(a[2]), OK)[1], (3,)),
    b"replicate": (_ok, (-3,)),
    b"error": (_error, (3,)),
    b"structsize": (_structsize, (2,)),
    b"htstats": (_htstats, (3,)),
    b"htstats-key": (_htstats_key, (3,)),
    b"change-repl-id": (_change_repl_id, (2,)),
    b"stringmatch-test": (_stringmatch_test, (2,)),
    b"set-disable-deny-scripts": (_flag("allow_deny_scripts"), (3,)),
    b"config-rewrite-force-all": (
        lambda s, a: ErrorReply(b"ERR CONFIG-REWRITE-FORCE-ALL failed: Bad address"),
        (2,),
    ),
    b"client-eviction": (lambda s, a: ErrorReply(b"ERR maxmemory-clients is disabled."), (2,)),
    b"mallctl": (_mallctl, (-3,)),
    b"mallctl-str": (_mallctl, (-3,)),
    b"pause-cron": (_flag("pause_cron"), (3,)),
    b"replybuffer": (_replybuffer, (4,)),
}


@command("debug", -2, ADMIN | Flag.LOADING | Flag.STALE)
def cmd_debug(s: Session, argv: list[bytes]) -> Reply:
    sub = argv[1].lower()
    n = len(argv)
    if sub == b"help" and n == 2:
        return _HELP_REPLY
    if sub == b"clusterlink" and n == 5 and argv[2].lower() == b"kill":
        return _clusterlink(s, argv)
    entry = _SUBCOMMANDS.get(sub)
    if entry is None or not any(n == c if c > 0 else n >= -c for c in entry[1]):
        raise _syntax(argv)
    return entry[0](s, argv)
