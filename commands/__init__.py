"""The command surface, Redis 7.0.15 exact, in three layers (import-linter contracts
in pyproject.toml; docs/design-notes.md, "Layers inside the packages"):

- The core, which imports nothing above it: the command table (`registry`: the
  `@command` decorator: name, arity, flags, key positions; lookups), per-connection and
  server-wide state (`session_state`: `Session` and `ServerCore`, every field of the
  server's state, compiled; `session`: `ServerState`, which fills it; `server_parts`:
  `Config`, the `Durability` Protocol through which commands reach the durable layer,
  ...; `limits` with `maxmemory`, `replstate`, `ops_state`, `users` and
  `acl_categories`),
  replies and errors (`replies`, `errors`: every error text in Redis' words), the RESP
  codec (`resp`), parsing (`parsing`, `longdouble`: numbers as Redis reads them; `glob`:
  Redis' glob patterns in bounded time), `common` (typed key lookups, SCAN options, HELP
  replies), `getkeys` (the keys of a command line), `redis_table` (Redis' command and
  config tables from `redis_commands.json`), `access`, `querybuf`, and the hooks the
  dispatcher calls: `notify` (keyspace notifications), `channels` (Pub/Sub delivery),
  `invalidation` (client-side caching's tracking table), `cleanup` (a closed
  connection's subscriptions, watches and blocks).
- The services two or more families share, built on the core: `dispatch` (running a
  request), `permissions` (ACL checks), `client_info`, `encodings`, `hotwrites`,
  `stream_args`, `zset_ranges`, `bitstrings`, `geohash`, `migrate_cache`, `points`
  (points in time: VERSION/TIME/SNAPSHOT/BACK), `branch_lookup`, `config_table`
  (CONFIG's parameters), `evict`, `propagate` (what each write propagates as, as
  redis-server 7.0 decides), the Lua engine (`lua_state`, `lua_engine`, `lua_convert`,
  `lua_library`, `lua_libs`, `lua_sandbox.lua`), the RDB codec (`rdb`, `rdb_write`,
  `rdb_file`, `rdb_import`), `slices`, `sampling`, `reload`, ...
- The command families, leaves that import no other family: `strings`, `hashes`,
  `lists`, `sets`, `zsets`, `streams` (consumer groups in `stream_groups`, XINFO and
  XSETID in `stream_info`), `keys`, `pubsub`, `connection`, `client` (with
  `client_control` and `tracking`, which add CLIENT subcommands to its container),
  `acl`, `server` (keyspace-wide commands, SAVE, SHUTDOWN), `info`, `config`,
  `introspection` (COMMAND), `transactions` (MULTI/EXEC), `durability` (WAITAOF,
  TS.WAITDURABLE, TS.FAULT), `scripting` (EVAL, SCRIPT, FUNCTION, FCALL), `redis_repl`
  (SYNC/PSYNC: Redis replicas), our own `temporal` (TS.*), `branches`, `tables` (with
  `ts_docs`, their COMMAND DOCS), ...; and `families`, which imports every family in
  registration order.

Handlers read and write only through `store`; they never touch sockets or storage, and
this package imports no other of ours but `store`.
"""

from store.native import extend as _extend

# The compiled build, when it is used, comes first on this package's path (store/native.py).
__path__ = _extend(__path__, __name__)
