"""The network edge and the process entry point.

- `server`: the asyncio listeners (plain TCP and TLS, `tls` builds the context) and one
  `Connection` per client: I/O, pipelining (every reply of a batch written at once),
  flow control and output buffer limits, protected mode and maxclients, waits of
  blocking and deferred commands, replies held until their writes are durable (sync
  mode), and graceful shutdown (stop accepting, drain durability, send what became
  durable, close).
- `reader`: `RequestReader`, a connection's input as requests, sans I/O: hiredis' C
  reader as the fast path, the exact parser of `commands.resp` for the rest.
- `cli`: `temporalstore serve` and `inspect`, which wires the store, the commands, the
  node and the listeners together.
- `replication`: the node's role (`Node`): a primary (takeover, durable layer,
  backlog, streaming records to replica links) or a replica (`Follower`); promotion
  and stepping down. With `group` (a node of a group on etcd: leadership, failover),
  the only modules besides `cli` that wire the durable layers in.
- `cluster_node` (`--cluster-enabled yes`: registration in etcd, the slot map and the
  replicated shards' replicas kept current, a group's new primary written into the
  map, `temporalstore cluster create`), `cluster_time` (TS.SEAL and TS.UNSEAL
  across the shards: the other nodes asked, the cluster snapshot recorded in etcd) and
  `slotmove` (each node's part in moving a slot range, `temporalstore cluster move`
  and `cluster show`).
- `web` (`--http-port`): the HTTP listener (aiohttp, in the same loop): HTTP Basic
  credentials checked by AUTH, `/metrics` (`metrics`: a prometheus-client collector
  over the live figures), the history explorer's page (`static/`) and JSON API
  (`explorer`: TS.* verbs through the dispatcher), rendered by `jsonstream` in bounded
  chunks.

The RESP codec itself (reply encoding, the exact request parser, protocol errors)
lives in `commands.resp`; authentication, ACLs and every command in `commands`.
Knows nothing of data types or storage formats."""

from store.native import extend as _extend

# The compiled build, when it is used, comes first on this package's path (store/native.py).
__path__ = _extend(__path__, __name__)
