"""History out of memory: older versions moved to a local spill file (issue 13).

With `history-memory` set (bytes; 0, the default, keeps all history in memory), the
server moves version entries out of memory while the history it holds in memory is
past that budget (`Tierer.step`, run by the server between batches of commands). A key
whose entries went out keeps in memory one int, its *cold reference*: negated in its
slot of the chains dict while all its entries are out, in `Chains.cold` beside the
list of newer ones once it is written again. The entries sit in the spill file as
pickled runs, newest run first, each naming the run before it, so moving a key out
again after more writes costs only its new entries.

Readers see nothing of it: `Chains.get` (and `[]`, `items`, `values`) gives the whole
chain, the cold entries read back (`pread`) in front of the ones in memory. Writers
append to the part in memory; retention that cuts a chain first takes its cold entries
back in (`StoreCore.warm`, store.core), and the tierer flattens a key's runs into one,
cut by retention, once they hold twice what retention keeps.

The spill file is a cache of this process: object storage stays the durable copy
(checkpoints read the cold entries through `Chains.get`, in the checkpoint child too:
the file is only ever appended to, and a compaction writes a new one). It is created
unlinked in `history-spill-dir` (the system's temporary directory by default) and goes
with the process. Space that runs no longer use is taken back by `compact` once it is
more than half of the file.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import time
import weakref
from array import array
from itertools import accumulate, repeat
from operator import sub
from typing import TYPE_CHECKING, Any, Final

import zstandard

from store.accounting import PACKED_BYTES, chain_bytes
from store.core import StoreCore

if TYPE_CHECKING:
    from store.database import Database

# A cold reference packs, from the high bits down: the run's offset in the file, its
# length (32 bits), the key's cold entries when its runs were last flattened (`base`,
# 28 bits), all its cold entries now (`total`, 28 bits) and its runs (4 bits).
_RUN_BITS: Final = 4
_RUN_MASK: Final = (1 << _RUN_BITS) - 1
_COUNT_BITS: Final = 28
_COUNT_MASK: Final = (1 << _COUNT_BITS) - 1
_LEN_BITS: Final = 32
_LEN_MASK: Final = (1 << _LEN_BITS) - 1
_HEADER: Final = b"TSCOLD01"
# A flattened run of a key under `ms:N` or `all` retention is cut (or merely rewritten)
# once its runs hold twice what the last flattening left, and at least this many.
_FLATTEN_MIN: Final = 32
# Frozen in memory, a key's runs are written as one before they would be more than
# this many: each is in a page of its own for a reader to decompress.
_FREEZE_RUNS: Final = 4
# Frozen in memory: a page holds runs up to this many bytes before compression (a run
# alone may be longer): little enough that a reader of one key decompresses it in a few
# microseconds, while the pages' shared dictionary (`PageCodec`) gives zstd what runs
# have in common. Offsets in a page are below `_PAGE_BITS`; `_OPEN_PAGES` pages stay
# decompressed for readers.
_PAGE_BYTES: Final = 3072
_PAGE_BITS: Final = 32
_PAGE_MASK: Final = (1 << _PAGE_BITS) - 1
_OPEN_PAGES: Final = 64
# The file is rewritten when dead runs are more than half of it and at least this big.
_COMPACT_MIN: Final = 64 << 20


def ref_total(ref: int) -> int:
    """The cold entries a reference stands for."""
    return (ref >> _RUN_BITS) & _COUNT_MASK


def _ref_base(ref: int) -> int:
    return (ref >> (_RUN_BITS + _COUNT_BITS)) & _COUNT_MASK


def _ref_runs(ref: int) -> int:
    return ref & _RUN_MASK


def _ref_span(ref: int) -> tuple[int, int]:
    run = ref >> (_RUN_BITS + 2 * _COUNT_BITS)
    return run >> _LEN_BITS, run & _LEN_MASK


# Runs are compressed: zstd at level 1 (the tierer shares the server's core with the
# writes it follows; level 1 packs these runs within a few per cent of level 3).
_ZC: Final = zstandard.ZstdCompressor(level=1)
_ZD: Final = zstandard.ZstdDecompressor()
# Decoded runs kept at hand (a reader of the past mostly reads the same keys again):
# up to this many keys' runs, and this many entries in all (but always the last read).
# A key's runs are kept only when read a second time within the last `_SEEN_REFS` reads
# of runs: a one-off read (TS.ASOF at random keys) then costs no entries kept alive,
# whose memory the next decode would otherwise find cold (13 of ~40 us a read here).
_CACHE_RUNS: Final = 256
_CACHE_ENTRIES: Final = 1 << 18
_SEEN_REFS: Final = 4096
# A spill trains a zstd dictionary on its first runs (`_TRAIN_SAMPLES` of them) and
# keeps it where it packs them at least a tenth smaller: a run of a few versions is too
# short for zstd to learn its framing (pickle's opcodes, the LSN and time columns, the
# command names) on its own, and a prepared dictionary also costs less per call (5 us
# against 13 for a run of 9 versions of 100 bytes).
_TRAIN_SAMPLES: Final = 2000
_DICT_BYTES: Final = 16384
_PLAIN: Final = 0  # the first byte of a run: compressed without a dictionary
_DICT: Final = 1  # ... with its spill's dictionary
# Frozen in memory, pages are compressed with a dictionary trained on the first
# `_PAGE_SAMPLES` of them, kept where it packs them smaller. Measured on 20,000 keys x
# 10 versions of 100 random hex characters (24 MB of runs), an as-of read at a random
# key and point in process: pages of up to 8 KiB without one, 11.0 MB stored, ~10 us to
# decompress a page and 33-35 us CPU a read; of up to 3 KiB with one, 12.2 MB, ~5 us
# and 22-26 us (4 KiB: 11.6 MB). Training on 256 pages takes ~0.1 s, once.
_PAGE_SAMPLES: Final = 256


def run_payload(prev: int, entries: list[Any]) -> bytes:
    """One run before compression: `entries` (version entries, oldest first) as
    columns, LSNs and commit times delta-encoded in machine words, the commands, undos,
    metadata and full copies as pickled sequences (the metadata and copies as None
    when all are None); `prev` is the reference of the key's run before it (0: none)."""
    lsns, times, cmds, undos, metas, snaps = zip(*entries, strict=True)
    payload = (
        prev,
        lsns[0],
        array("q", map(sub, lsns[1:], lsns)).tobytes(),
        times[0],
        array("q", map(sub, times[1:], times)).tobytes(),
        cmds,
        undos,
        None if metas.count(None) == len(metas) else metas,
        None if snaps.count(None) == len(snaps) else snaps,
    )
    return pickle.dumps(payload, pickle.HIGHEST_PROTOCOL)


def decode_payload(payload: bytes) -> tuple[int, list[Any]]:
    """`run_payload`'s inverse: (the previous run's reference, the entries)."""
    prev, lsn0, dl, t0, dt, cmds, undos, metas, snaps = pickle.loads(payload)
    lsns = accumulate(array("q", dl), initial=lsn0)
    times = accumulate(array("q", dt), initial=t0)
    n = len(cmds)
    entries = list(
        zip(
            lsns,
            times,
            cmds,
            undos,
            repeat(None, n) if metas is None else metas,
            repeat(None, n) if snaps is None else snaps,
            strict=False,
        )
    )
    return prev, entries


class Codec:
    """Compresses runs (`run_payload`), with a dictionary trained on the first ones
    once it pays; shared by a spill and the one `compact` writes into."""

    def __init__(self) -> None:
        self.samples: list[bytes] | None = []  # None: trained, or given up
        self.cdict: Any = None
        self.ddict: Any = None

    def encode(self, prev: int, entries: list[Any]) -> bytes:
        payload = run_payload(prev, entries)
        if self.cdict is not None:
            out: bytes = self.cdict.compress(payload)
            return b"\x01" + out
        samples = self.samples
        if samples is not None:
            samples.append(payload)
            if len(samples) >= _TRAIN_SAMPLES:
                self.samples = None
                self._train(samples, 0.9)
        return b"\x00" + _ZC.compress(payload)

    def _train(self, samples: list[bytes], pays: float) -> None:
        """Train a dictionary on `samples` and use it from here on if it packs them
        to at most `pays` of their size without one."""
        try:
            trained = zstandard.train_dictionary(_DICT_BYTES, list[Any](samples))
        except zstandard.ZstdError:
            return  # too few or too alike: go on without one
        trained.precompute_compress(level=1)
        cdict = zstandard.ZstdCompressor(level=1, dict_data=trained)
        with_dict = sum(len(cdict.compress(s)) for s in samples[:200])
        without = sum(len(_ZC.compress(s)) for s in samples[:200])
        if with_dict < without * pays:
            self.cdict = cdict
            self.ddict = zstandard.ZstdDecompressor(dict_data=trained)

    def decode(self, data: bytes | bytearray) -> tuple[int, list[Any]]:
        view = memoryview(data)
        if view[0] == _DICT:
            return decode_payload(self.ddict.decompress(view[1:]))
        return decode_payload(_ZD.decompress(view[1:]))


class Spill:
    """The spill file: runs of compressed version entries (`Codec`), appended, read
    by offset."""

    kind = "file"
    # Rewritten (`compact`) when dead runs are more than half of it and at least this.
    compact_min = _COMPACT_MIN

    def __init__(self, directory: str | None = None, codec: Codec | None = None) -> None:
        self.directory = directory or None
        self.codec = codec or Codec()
        self._file = -1  # its descriptor, once made
        self._closer: weakref.finalize[Any, Any] | None = None
        self.size = 0  # bytes written
        self.dead = 0  # bytes of runs no reference names any more
        self.runs = 0
        # reference -> its runs decoded (oldest first), the newest `_CACHE_RUNS`, and
        # how many entries they hold
        self._cache: dict[int, list[Any]] = {}
        self.cached = 0
        self._seen: dict[int, None] = {}  # references read lately, not kept

    def fresh(self) -> Spill:
        """An empty spill of the same kind, place and codec (`compact` writes into it)."""
        return Spill(self.directory, self.codec)

    def held(self) -> int:
        """Bytes this spill holds: the file's size, or the compressed pages in memory."""
        return self.size

    def descriptors(self) -> list[int]:
        """The file descriptors reading this spill needs (a forked checkpoint child
        keeps them open)."""
        return [self._file] if self._file >= 0 else []

    def _fd(self) -> int:
        if self._file < 0:
            fd, path = tempfile.mkstemp(prefix="temporalstore-history-", dir=self.directory)
            os.unlink(path)  # nobody else opens it; it goes when the descriptor closes
            os.write(fd, _HEADER)
            self._file = fd
            self._closer = weakref.finalize(self, os.close, fd)
            self.size = len(_HEADER)
        return self._file

    def write(self, runs: list[Any]) -> list[tuple[int, int]]:
        """Append `runs` (`codec.encode`'s, one write); their (offset, length)."""
        fd = self._fd()  # made first: the file starts with its header
        offsets = []
        at = self.size
        for run in runs:
            offsets.append((at, len(run)))
            at += len(run)
        data = b"".join(runs)
        done = 0
        while done < len(data):
            done += os.pwrite(fd, data[done:], self.size + done)
        self.size = at
        self.runs += len(runs)
        return offsets

    def read(self, offset: int, length: int) -> bytes | bytearray:
        data = os.pread(self._fd(), length, offset)
        if len(data) != length:
            raise OSError(f"history spill file: short read at {offset} ({len(data)} of {length})")
        return data

    def entries(self, ref: int, free: bool = False) -> list[Any]:
        """The cold entries `ref` stands for, oldest first; `free`: its runs are no
        longer used once read (the list is the caller's). Otherwise the list may be
        the one kept at hand for the next reader: read it, never change it."""
        found = self._cache.pop(ref, None)
        hit = found is not None
        if found is not None:
            self.cached -= len(found)
        if found is None or free:  # read the runs: for their entries, or to free them
            entries, _ = self._runs(ref, -1, free)
            if found is None:
                found = entries
        if not free:
            self._keep(ref, found, hit)
        return found

    def since(self, ref: int, lsn: int) -> list[Any]:
        """The cold entries of `ref` newer than `lsn`, oldest first, with those of
        their oldest run before them: runs that start at or before `lsn` and the ones
        before them are not read (an as-of read's bisection needs no more). Never
        change the list."""
        found = self._cache.get(ref)
        if found is not None:
            return found
        found, whole = self._runs(ref, lsn, False)
        if whole:
            self._keep(ref, found)
        return found

    def _runs(self, ref: int, lsn: int, free: bool) -> tuple[list[Any], bool]:
        """The entries of `ref`'s runs, oldest first, read from the newest back to
        the first that starts at or before `lsn` (-1: all of them); and whether that
        was all of them. `free`: count their bytes dead."""
        runs: list[list[Any]] = []
        link = ref
        while link:
            offset, length = _ref_span(link)
            if free:
                self.dead += length
            link, run = self.codec.decode(self.read(offset, length))
            runs.append(run)
            if run[0][0] <= lsn:
                break
        found = runs[0] if len(runs) == 1 else [e for r in reversed(runs) for e in r]
        return found, not link

    def _keep(self, ref: int, found: list[Any], hit: bool = False) -> None:
        """`found`, `ref`'s entries, kept at hand as the newest: if they were taken
        from there (`hit`), or read a second time lately."""
        if not hit:
            seen = self._seen
            if ref not in seen:
                seen[ref] = None
                if len(seen) > _SEEN_REFS:
                    del seen[next(iter(seen))]
                return
            del seen[ref]
        cache = self._cache
        while cache and (len(cache) >= _CACHE_RUNS or self.cached > _CACHE_ENTRIES):
            self.cached -= len(cache.pop(next(iter(cache))))
        cache[ref] = found
        self.cached += len(found)

    def close(self) -> None:
        self._cache.clear()
        self._seen.clear()
        self.cached = 0
        if self._closer is not None:
            self._closer()
            self._closer = None
            self._file = -1


class PageCodec(Codec):
    """Runs pickled as they are, (previous reference, entries): `MemorySpill`
    compresses a page of them at once (`pack`), with a dictionary trained on its first
    pages once it packs them smaller (each page's first byte says which, as a run's in
    the spill file). Shared by a spill and the one `compact` writes into."""

    def __init__(self) -> None:
        super().__init__()
        self.samples = None  # runs are not compressed one by one
        self.page_samples: list[bytes] | None = []  # None: trained, or given up

    def encode(self, prev: int, entries: list[Any]) -> bytes:
        return pickle.dumps((prev, entries), pickle.HIGHEST_PROTOCOL)

    def decode(self, data: bytes | bytearray) -> tuple[int, list[Any]]:
        return pickle.loads(data)  # type: ignore[no-any-return]

    def pack(self, raw: bytes) -> bytes:
        """A page's runs, concatenated (`raw`), compressed: an exact-size copy (the
        result of python-zstandard's `compress()` keeps the allocation of zstd's
        bound for its input, for as long as it lives)."""
        if self.cdict is not None:
            packed: bytes = b"\x01" + self.cdict.compress(raw)
            return packed
        samples = self.page_samples
        if samples is not None:
            samples.append(raw)
            if len(samples) >= _PAGE_SAMPLES:
                self.page_samples = None
                self._train(samples, 1.0)  # it also makes decompressing faster
        return b"\x00" + _ZC.compress(raw)

    def unpack(self, page: bytes) -> bytes:
        """`pack`'s inverse."""
        view = memoryview(page)
        decompressor = self.ddict if view[0] == _DICT else _ZD
        out: bytes = decompressor.decompress(view[1:])
        return out


class MemorySpill(Spill):
    """Frozen history kept in memory (issue 29: history compact in memory). The runs of
    a `write` (a batch of the tierer's keys: each key's new entries and the reference
    of its run before, pickled) are concatenated into *pages* of up to `_PAGE_BYTES`,
    each compressed at once: freezing costs one pickle per key and one zstd call per
    page (most keys have one or two new versions when the tierer passes: with 1M keys
    and 64 MiB of plain entries, under one), and a run of one version costs no frame of
    its own. A reader decompresses the page and unpickles its run alone (the last
    `_OPEN_PAGES` pages stay decompressed: the tierer's flattening and readers of
    neighbouring keys find them there). A run's offset is its page's number above the
    offset in the page (`_PAGE_BITS`: a run alone in its page may be long). Used when
    `history-memory` is 0 and `history-hot-memory` is not."""

    kind = "memory"
    compact_min = 16 << 20

    def __init__(self, directory: str | None = None, codec: PageCodec | None = None) -> None:
        self.pages = codec or PageCodec()
        super().__init__(directory, self.pages)
        self._pages: list[bytes] = []
        self._open: dict[int, bytes] = {}  # page -> its bytes, the newest _OPEN_PAGES
        self.size = 0  # bytes of runs written, before compression (`dead` is of them)
        self.stored = 0  # the compressed pages' bytes

    def fresh(self) -> Spill:
        return MemorySpill(self.directory, self.pages)

    def held(self) -> int:
        return self.stored

    def write(self, runs: list[Any]) -> list[tuple[int, int]]:
        offsets: list[tuple[int, int]] = []
        page: list[bytes] = []
        at = 0
        for run in runs:
            if at and at + len(run) > _PAGE_BYTES:
                self._page(page)
                page, at = [], 0
            offsets.append((len(self._pages) << _PAGE_BITS | at, len(run)))
            page.append(run)
            at += len(run)
            self.size += len(run)
        if page:
            self._page(page)
        self.runs += len(runs)
        return offsets

    def _page(self, runs: list[bytes]) -> None:
        packed = self.pages.pack(b"".join(runs))
        self._pages.append(packed)
        self.stored += len(packed)

    def read(self, offset: int, length: int) -> bytes | bytearray:
        page = offset >> _PAGE_BITS
        at = offset & _PAGE_MASK
        opened = self._open
        data = opened.pop(page, None)
        if data is None:
            data = self.pages.unpack(self._pages[page])
            if len(opened) >= _OPEN_PAGES:
                del opened[next(iter(opened))]
        opened[page] = data
        return data[at : at + length]

    def close(self) -> None:
        super().close()
        self._open.clear()
        self._pages = []


def attach(store: StoreCore, directory: str | None, memory: bool = False) -> Spill:
    """Give `store`'s databases a spill file in `directory` (made when first used), or
    with `memory`, frozen history in memory (`MemorySpill`)."""
    spill = store.spill = MemorySpill(directory) if memory else Spill(directory)
    for db in store.dbs:
        db.chains.spill = spill
    return spill


def use_kind(store: StoreCore, kind: str) -> None:
    """Make `store`'s spill of `kind` ("memory" or "file"), moving what the other one
    holds (`compact`: stop-the-world, O(history out of plain entries)); a setting
    changed at run time (`history-memory`) takes effect this way."""
    old = store.spill
    if old is None or old.kind == kind:
        return
    new = MemorySpill(old.directory) if kind == "memory" else Spill(old.directory)
    compact(store, new)


def make_ref(offset: int, length: int, base: int, total: int, runs: int = 1) -> int:
    if total > _COUNT_MASK or length > _LEN_MASK:
        raise ValueError("history spill: run too large")
    span = offset << _LEN_BITS | length
    return ((span << _COUNT_BITS | base) << _COUNT_BITS | total) << _RUN_BITS | min(runs, _RUN_MASK)


def hot_bytes(store: StoreCore) -> int:
    """Estimated bytes of the main line's history in memory that could move out (not
    the packed creations: one int each, as small as a cold reference)."""
    mem = store.mem
    return mem.main_bytes - mem.cold_bytes - mem.main_packed * PACKED_BYTES


def _flatten_due(store: StoreCore, key: bytes, ref: int, n: int) -> bool:
    """Whether `key`'s runs (`ref`) and its `n` entries in memory are to be cut by
    retention and written as one run now. Frozen in memory, also before a key would
    have more than `_FREEZE_RUNS` runs: a reader decompresses a page for each."""
    keep = store.retention_of(key)
    total = ref_total(ref) + n
    if store.spill.kind == "memory" and _ref_runs(ref) >= _FREEZE_RUNS:
        return True
    if keep.kind == "versions":
        return total > 2 * keep.limit
    return total >= 2 * max(_ref_base(ref), _FLATTEN_MIN)


class Tierer:
    """Moves the main line's history out of memory while it is past a budget: walks
    the keys of every database in turn (a list of them taken per round), a step at a
    time (`step`)."""

    def __init__(self, store: StoreCore) -> None:
        self.store = store
        self._db = -1  # the database being walked (the first step starts at 0)
        self._keys: list[bytes] = []
        self._pos = 0
        # After two rounds over every key found nothing to move (what is left is
        # pinned, or being trimmed), no step before this time.
        self._rest_until = 0.0

    def step(self, budget: int, seconds: float) -> bool:
        """Move keys' entries out until history in memory is within `budget` bytes or
        `seconds` have passed; True while there is more to move."""
        store = self.store
        if hot_bytes(store) <= budget:
            return False
        now = time.monotonic()
        if now < self._rest_until:
            return False
        deadline = now + seconds
        dbs = store.dbs
        rounds = 0
        while True:
            if self._pos >= len(self._keys):
                self._db += 1
                if self._db >= len(dbs):
                    self._db = 0
                    rounds += 1
                    if rounds > 1:  # nothing left to move anywhere
                        self._rest_until = time.monotonic() + 1.0
                        return False
                self._keys = list(dbs[self._db].chains)
                self._pos = 0
                continue
            stop = min(self._pos + 256, len(self._keys))
            batch = self._keys[self._pos : stop]
            self._pos = stop
            if self._move(dbs[self._db], batch):
                rounds = 0
            if hot_bytes(store) <= budget:
                return False
            if time.monotonic() >= deadline:
                return True

    def _move(self, db: Database, keys: list[bytes]) -> int:
        """Move the entries in memory of those of `keys` that have a list of them and
        no deferred trim; returns how many keys moved."""
        store = self.store
        chains = db.chains
        cold = chains.cold
        spill = chains.spill
        if spill is None or db.overlay:
            return 0
        moved: list[tuple[bytes, list[Any], int, int, int]] = []
        runs: list[Any] = []
        trim_next = db.trim_next
        encode = spill.codec.encode
        slot_of = dict.get
        add_run = runs.append
        add_moved = moved.append
        for key in keys:  # the common cases inline: a step walks every key
            chain = slot_of(chains, key)
            if type(chain) is not list or not chain or key in trim_next:
                continue
            ref = cold.get(key, 0) if cold else 0
            if ref and _flatten_due(store, key, ref, len(chain)):
                store.warm(db, key, chain)
                cut = store._retention_cut(key, chain)
                if cut:
                    store._trim(db, key, chain, cut)
                    if key in trim_next:  # pinned: stays in memory
                        continue
                ref = 0
            if ref:
                add_run(encode(ref, chain))
                add_moved((key, chain, _ref_base(ref), ref_total(ref), _ref_runs(ref)))
            else:
                add_run(encode(0, chain))
                add_moved((key, chain, len(chain), 0, 0))
        if not moved:
            return 0
        offsets = spill.write(runs)
        cold_bytes = cold_versions = 0
        setslot = dict.__setitem__
        for (key, chain, base, total, n), (offset, length) in zip(moved, offsets, strict=True):
            # All of the key's entries are out now: its slot holds the reference,
            # negated, and `cold` none (store.chains.Chains).
            size = len(chain)
            setslot(chains, key, -make_ref(offset, length, base, total + size, n + 1))
            cold_bytes += chain_bytes(chain)
            cold_versions += size
        if cold:
            for key, *_rest in moved:
                cold.pop(key, None)
        mem = store.mem
        mem.cold_bytes += cold_bytes
        mem.cold_versions += cold_versions
        store.tiered = True
        if spill.dead > spill.compact_min and 2 * spill.dead > spill.size:
            compact(store)
        return len(moved)


def compact(store: StoreCore, into: Spill | None = None) -> None:
    """Write every key's cold entries, one run per key, to a new spill (`into`, else
    one of the same kind) and drop the old one (its dead runs with it)."""
    old: Spill | None = store.spill
    if old is None:
        return
    new = old.fresh() if into is None else into
    for db in store.dbs:
        chains = db.chains
        # (key, reference, in the slot?) of every key with entries out of memory
        refs = [(k, -v, True) for k, v in dict.items(chains) if type(v) is int and v < 0]
        refs += [(k, ref, False) for k, ref in chains.cold.items()]
        for i in range(0, len(refs), 1024):
            batch = refs[i : i + 1024]
            runs = [new.codec.encode(0, old.entries(ref)) for _k, ref, _s in batch]
            offsets = new.write(runs)
            for (key, ref, in_slot), (offset, length) in zip(batch, offsets, strict=True):
                total = ref_total(ref)
                ref = make_ref(offset, length, total, total)
                if in_slot:
                    dict.__setitem__(chains, key, -ref)
                else:
                    chains.cold[key] = ref
    for db in store.dbs:
        if db.chains.spill is old:
            db.chains.spill = new
    store.spill = new
    old.close()
