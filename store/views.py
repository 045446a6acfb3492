"""Views: a database as it was just after an LSN, read-only, made in O(1).

A view computes a key as of its point the first time it is read (`value_as_of`)
and keeps the answer in a cache shared by every connection checked out at the same
point; nothing is copied when the view is made, and commits do not invalidate it
(history at a past LSN does not change). A view lives as long as a connection holds
it (`Store.views` keeps weak references); reading every key (KEYS, SCAN, DBSIZE)
fills the cache with every key, as a copy would.

A point's clock (when expiry is judged) is fixed when the view is made: the commit
time of its LSN, or the present for the newest LSN. Checking out a point older than
some key's retained history is refused at once (`PrunedError`), using each
database's floor watermark (the newest LSN trimming has dropped for any key).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from store.accounting import payload_bytes
from store.asof import PrunedError, lsn_by_time, value_as_of
from store.chains import V_LSN, VersionEntry, _entry_lsn
from store.core import StoreCore
from store.database import Database

_MISSING = (None, None)


class KeyTimes(NamedTuple):
    """A view's time for each key (cluster mode: the commit time its shard sealed a
    cluster snapshot at, or a TIME point's): the key reads as its versions committed
    by then have it (`lsn_by_time`), which is the view's LSN unless versions of the key
    moved in from another shard since (store.moves)."""

    name: Any  # what names them (with the LSN: the views' cache key)
    of: Callable[[bytes], int]
    # A snapshot's seal times: never before a moved key's floor (the seal pinned its
    # history then), so the state before its oldest retained version is the one.
    sealed: bool


class _PointStates:
    """Each key's (value, expire) at the point, computed on first use."""

    def __init__(
        self, store: StoreCore, dbi: int, lsn: int, at_ms: int, times: KeyTimes | None
    ) -> None:
        self.store = store
        self.dbi = dbi
        self.lsn = lsn
        self.at_ms = at_ms
        self.times = times
        self.cache: dict[bytes, tuple[Any, int | None]] = {}
        self.nbytes = 0  # estimated bytes of the cached values

    def state(self, key: bytes) -> tuple[Any, int | None]:
        st = self.cache.get(key)
        if st is None:
            lsn = self.lsn
            if self.times is not None:
                main = self.store.dbs[self.dbi]
                chain: Sequence[VersionEntry] = main.chains.get(key) or ()
                cut = lsn_by_time(chain, lsn, self.times.of(key))
                if cut != lsn and cut < chain[0][V_LSN] and key in main.floors:
                    # Before a moved key's oldest retained version: its state there is
                    # known from its floor's time on only, which the move did not keep.
                    if not self.times.sealed:
                        raise PrunedError(cut, key)
                lsn = cut
            value, expire = value_as_of(self.store, self.dbi, key, lsn)
            if value is None or (expire is not None and expire <= self.at_ms):
                st = _MISSING
            else:
                st = (value, expire)
                self.nbytes += payload_bytes(value)
            self.cache[key] = st
        return st

    def candidates(self) -> Iterator[bytes]:
        """Every key that may have existed then: live now, or with a history."""
        main = self.store.dbs[self.dbi]
        return iter(dict.fromkeys([*main.data, *main.chains]))


class _Values(Mapping[bytes, Any]):
    __slots__ = ("states",)

    def __init__(self, states: _PointStates) -> None:
        self.states = states

    def get(self, key: bytes, default: Any = None) -> Any:
        v = self.states.state(key)[0]
        return default if v is None else v

    def __getitem__(self, key: bytes) -> Any:
        v = self.states.state(key)[0]
        if v is None:
            raise KeyError(key)
        return v

    def __contains__(self, key: object) -> bool:
        return type(key) is bytes and self.states.state(key)[0] is not None

    def __iter__(self) -> Iterator[bytes]:
        state = self.states.state
        return iter([k for k in self.states.candidates() if state(k)[0] is not None])

    def __len__(self) -> int:
        state = self.states.state
        return sum(1 for k in self.states.candidates() if state(k)[0] is not None)

    def __bool__(self) -> bool:
        return True  # may hold keys; asking costs a pass over them


class _Expires(_Values):
    __slots__ = ()

    def get(self, key: bytes, default: Any = None) -> Any:
        at = self.states.state(key)[1]
        return default if at is None else at

    def __getitem__(self, key: bytes) -> Any:
        at = self.states.state(key)[1]
        if at is None:
            raise KeyError(key)
        return at

    def __contains__(self, key: object) -> bool:
        return type(key) is bytes and self.states.state(key)[1] is not None

    def __iter__(self) -> Iterator[bytes]:
        state = self.states.state
        return iter([k for k in self.states.candidates() if state(k)[1] is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Chains(Mapping[bytes, list[VersionEntry]]):
    """The main line's version chains, cut at the point."""

    __slots__ = ("chains", "lsn")

    def __init__(self, chains: Any, lsn: int) -> None:
        self.chains = chains
        self.lsn = lsn

    def get(self, key: bytes, default: Any = None) -> Any:
        chain = self.chains.get(key)
        if not chain:
            return default
        cut = chain[: bisect_right(chain, self.lsn, key=_entry_lsn)]
        return cut if cut else default

    def since(self, key: bytes, lsn: int) -> Any:
        """`Chains.since`, cut at the point."""
        chain = self.chains.since(key, lsn)
        return chain[: bisect_right(chain, self.lsn, key=_entry_lsn)]

    def __getitem__(self, key: bytes) -> list[VersionEntry]:
        chain = self.get(key)
        if chain is None:
            raise KeyError(key)
        return chain  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[bytes]:
        return iter([k for k in self.chains if self.get(k) is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class ViewDatabase(Database):
    """Database `dbi` just after `lsn`, read-only, with its clock stopped at `at_ms`
    (with `times`, each key as of its time: `KeyTimes`)."""

    def __init__(
        self, store: StoreCore, dbi: int, lsn: int, at_ms: int, times: KeyTimes | None = None
    ) -> None:
        super().__init__(dbi)
        main = store.dbs[dbi]
        self.lsn = lsn
        self.frozen_ms = at_ms
        self.states = _PointStates(store, dbi, lsn, at_ms, times)
        self.data = _Values(self.states)  # type: ignore[assignment]
        self.expires = _Expires(self.states)  # type: ignore[assignment]
        self.chains = _Chains(main.chains, lsn)
        self.floors = main.floors

    def cached_bytes(self) -> int:
        return self.states.nbytes


def make_view(
    store: StoreCore, dbi: int, lsn: int, at_ms: int, times: KeyTimes | None = None
) -> ViewDatabase:
    """A view of database `dbi` at `lsn` (O(1)); PrunedError if trimming has dropped
    some key's state there."""
    main = store.dbs[dbi]
    if main.floor_mark > lsn:
        key = next((k for k, f in main.floors.items() if f > lsn), b"")
        raise PrunedError(lsn, key)
    return ViewDatabase(store, dbi, lsn, at_ms, times)
