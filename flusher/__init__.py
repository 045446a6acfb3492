"""The durable log in object storage, and the running durable layer.

- `objectapi` (the `ObjectStore` interface, its errors and key rules: the contract,
  importing no store), `objectstore` (a local directory, the fault wrapper, and
  `open_object_store`, which chooses a store by URL), `s3` (S3 via aiobotocore, built
  on `objectapi`), `memory` (in-memory, for tests), `metered` (requests counted, PUT
  latency, for monitoring);
- `paths` (every object name), `segment` (the framed, compressed object format),
  `codec` (records and values as msgpack);
- `flusher` (the store's record sink: batching, group commit, retries,
  backpressure, fencing by put-if-absent);
- `log` (`SegmentLog`: listing, reading and verifying segments and walking them
  in LSN order, for recovery, as-of reads and inspect), `manifest` (writer
  epochs), `checkpoint` (checkpoint objects from `Store.export_image`),
  `compaction`;
- `durable` (`DurableStore`: the flusher, checkpoint scheduling, compaction,
  drain and as-of reads from storage, as commands see them through
  `commands.session.Durability`);
- `backlog` (the newest encoded records, for replica links), `coordination` (etcd:
  leadership on a lease, node registry, the raft log; the only module that talks to
  etcd), `raft` (raft durability: records committed in etcd before acknowledging);
  cluster mode's records in etcd, on `coordination`'s client: `slotmap` and `slotmove`
  (a cluster's slot map, nodes, storage registrations and slot move record) and
  `clustersnaps` (cluster snapshots: each shard's LSN of a cluster-wide TS.SEAL).

Imports only `store`.
"""

from store.native import extend as _extend

# The compiled build, when it is used, comes first on this package's path (store/native.py).
__path__ = _extend(__path__, __name__)
