"""The command surface, Redis 7.0.15 exact.

- The command table: `registry` (the `@command` decorator: name, arity, flags, key
  positions; lookups), `dispatch` and `transactions` (running a request, MULTI/EXEC),
  `families` (imports every family, in registration order).
- One module per family: `strings`, `hashes`, `lists`, `sets`, `zsets` (with
  `zset_ranges`), `streams` (consumer groups in `stream_groups`, XINFO and XSETID
  in `stream_info`), `keys`, `pubsub`, `connection`, `client`, `acl`, `server`
  (keyspace-wide commands, SAVE, SHUTDOWN), `info`, `config`, `introspection` (COMMAND),
  `durability` (WAITAOF, TS.WAITDURABLE, TS.FAULT), `scripting` (EVAL, SCRIPT,
  FUNCTION, FCALL; Lua in `lua_engine`, `lua_convert`, `lua_library`, `lua_libs` and
  `lua_sandbox.lua`), `tracking` (CLIENT TRACKING/CACHING: client-side caching's
  invalidations), `redis_repl` (SYNC/PSYNC: Redis replicas, fed by `propagate`, which
  decides what each write propagates as redis-server 7.0 does), and our own `temporal`
  (TS.*),
  `branches`, `tables` (with `ts_docs`, their COMMAND DOCS).
- Shared parsing and lookups: `parsing` and `longdouble` (numbers as Redis reads them),
  `common` (typed key lookups, SCAN options, HELP replies), `glob` (Redis' glob
  patterns in bounded time), `points` (points in time: VERSION/TIME/SNAPSHOT/BACK),
  `branch_lookup`, `getkeys` (the keys of a command line), `redis_table` (Redis' command
  and config tables from `redis_commands.json`), `config_table` (CONFIG's parameters),
  `acl_categories` and `users` (ACL categories, rules and users).
- Per-connection and server-wide state: `session` (`Session`, `ServerState`, `Config`,
  and the `Durability` Protocol through which commands reach the durable layer),
  `limits` (maxmemory, buffer limits), `cleanup` (a closed connection's subscriptions,
  watches and blocks); replies and errors: `replies`,
  `errors` (every error text in Redis' words).

Handlers read and write only through `store`; they never touch sockets or storage, and
this package imports no other of ours but `store`.
"""

from store.native import extend as _extend

# The compiled build, when it is used, comes first on this package's path (store/native.py).
__path__ = _extend(__path__, __name__)
