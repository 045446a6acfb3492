"""Every object name under a storage prefix, built in one place.

Numbers are zero-padded to 20 digits so that listing order is numeric order.

- `segments/<first-lsn>.seg`: a batch of update records starting at that LSN. The
  name carries only the first LSN so that two writers racing for the same place in
  the log collide on one name, and put-if-absent lets exactly one of them win.
- `checkpoints/<lsn>/store.ckpt`: a full image of the store at that LSN.
- `manifest/<epoch>-<seq>.json`: the newest names the checkpoint and the writer.
- `orphaned/<epoch>/<first-lsn>.seg`: a segment a crashed writer left past a hole
  in the log (never durable), set aside by the writer of that epoch when it took
  over; kept for inspection, read by nothing.
"""

from __future__ import annotations

import re

SEGMENTS = "segments/"
CHECKPOINTS = "checkpoints/"
MANIFESTS = "manifest/"
ORPHANED = "orphaned/"

_SEGMENT = re.compile(r"segments/(\d{20})\.seg")
_CHECKPOINT = re.compile(r"checkpoints/(\d{20})/store\.ckpt")
_MANIFEST = re.compile(r"manifest/(\d{20})-(\d{20})\.json")


def segment(first_lsn: int) -> str:
    return f"{SEGMENTS}{first_lsn:020d}.seg"


def orphaned(epoch: int, first_lsn: int) -> str:
    return f"{ORPHANED}{epoch:020d}/{first_lsn:020d}.seg"


def checkpoint(lsn: int) -> str:
    return f"{CHECKPOINTS}{lsn:020d}/store.ckpt"


def manifest(epoch: int, seq: int) -> str:
    return f"{MANIFESTS}{epoch:020d}-{seq:020d}.json"


def parse_segment(key: str) -> int | None:
    """The first LSN a segment name carries, or None for another object."""
    m = _SEGMENT.fullmatch(key)
    return int(m.group(1)) if m else None


def parse_checkpoint(key: str) -> int | None:
    m = _CHECKPOINT.fullmatch(key)
    return int(m.group(1)) if m else None


def parse_manifest(key: str) -> tuple[int, int] | None:
    m = _MANIFEST.fullmatch(key)
    return (int(m.group(1)), int(m.group(2))) if m else None
