"""Redis' partial quicksort (pqsort.c: Bentley & McIlroy's qsort that only recurses
into parts overlapping the wanted range). SORT ... BY ... LIMIT and GEO* ... COUNT
use it instead of a full sort, and it is not stable: where elements compare equal,
only the same algorithm puts them in the order Redis replies with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Cmp = Callable[[Any, Any], int]


def pqsort(v: list[Any], cmp: Cmp, lrange: int, rrange: int) -> None:
    """Sort `v` in place enough that positions lrange..rrange (inclusive) hold what a
    full sort would put there, exactly as Redis' pqsort leaves them."""
    _pqsort(v, 0, len(v), cmp, lrange, rrange)


def _med3(v: list[Any], a: int, b: int, c: int, cmp: Cmp) -> int:
    if cmp(v[a], v[b]) < 0:
        if cmp(v[b], v[c]) < 0:
            return b
        return c if cmp(v[a], v[c]) < 0 else a
    if cmp(v[b], v[c]) > 0:
        return b
    return a if cmp(v[a], v[c]) < 0 else c


def _vecswap(v: list[Any], a: int, b: int, n: int) -> None:
    for i in range(n):
        v[a + i], v[b + i] = v[b + i], v[a + i]


def _outside(lo: int, n: int, lrange: int, rrange: int) -> bool:
    """The part [lo, lo + n) holds none of the wanted range."""
    hi = lo + n
    return (lrange < lo and rrange < lo) or (lrange >= hi and rrange >= hi)


def _pqsort(v: list[Any], a: int, n: int, cmp: Cmp, lrange: int, rrange: int) -> None:
    while True:
        if n < 7:
            for pm in range(a + 1, a + n):
                pl = pm
                while pl > a and cmp(v[pl - 1], v[pl]) > 0:
                    v[pl], v[pl - 1] = v[pl - 1], v[pl]
                    pl -= 1
            return
        pm = a + n // 2
        if n > 7:
            pl = a
            pn = a + n - 1
            if n > 40:
                d = n // 8
                pl = _med3(v, pl, pl + d, pl + 2 * d, cmp)
                pm = _med3(v, pm - d, pm, pm + d, cmp)
                pn = _med3(v, pn - 2 * d, pn - d, pn, cmp)
            pm = _med3(v, pl, pm, pn, cmp)
        v[a], v[pm] = v[pm], v[a]
        pa = pb = a + 1
        pc = pd = a + n - 1
        while True:
            while pb <= pc:
                c = cmp(v[pb], v[a])
                if c > 0:
                    break
                if c == 0:
                    v[pa], v[pb] = v[pb], v[pa]
                    pa += 1
                pb += 1
            while pb <= pc:
                c = cmp(v[pc], v[a])
                if c < 0:
                    break
                if c == 0:
                    v[pc], v[pd] = v[pd], v[pc]
                    pd -= 1
                pc -= 1
            if pb > pc:
                break
            v[pb], v[pc] = v[pc], v[pb]
            pb += 1
            pc -= 1
        pn = a + n
        r = min(pa - a, pb - pa)
        _vecswap(v, a, pb - r, r)
        r = min(pd - pc, pn - pd - 1)
        _vecswap(v, pb, pn - r, r)
        r = pb - pa
        if r > 1 and not _outside(a, r, lrange, rrange):
            _pqsort(v, a, r, cmp, lrange, rrange)
        r = pd - pc
        if r <= 1:
            return
        a = pn - r
        n = r
        if _outside(a, n, lrange, rrange):
            return
