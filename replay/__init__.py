"""Starting from what object storage holds.

- `replay` (`recover`: the newest manifest, its checkpoint, then every segment
  after it through `flusher.log.SegmentLog`, into the store, with progress; also
  catching a replica up; `replay_body`: records encoded back to back, from a
  replica link or the raft log);
- `startup` (`take_over`: recover, then write the next writer epoch's manifest
  and claim the next place in the log, fencing a previous writer);
- `inspect` (`temporalstore inspect`: list and verify a prefix).

The running durable layer is `flusher.durable`; the CLI starts it after
`take_over`. Imports only `flusher` and `store`.
"""

from store.native import extend as _extend

# The compiled build, when it is used, comes first on this package's path (store/native.py).
__path__ = _extend(__path__, __name__)
