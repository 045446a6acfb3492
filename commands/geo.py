"""Geo commands, Redis 7.0 exact: a geo set is a sorted set whose scores are 52-bit
interleaved geohashes.

GEOADD key [NX|XX] [CH] longitude latitude member [...]
GEODIST key member1 member2 [M|KM|FT|MI] · GEOHASH key [member ...] · GEOPOS key [member ...]
GEORADIUS[_RO] key longitude latitude radius unit [WITHCOORD] [WITHDIST] [WITHHASH]
    [COUNT count [ANY]] [ASC|DESC] [STORE key] [STOREDIST key]
GEORADIUSBYMEMBER[_RO] key member radius unit ...the same options...
GEOSEARCH key FROMMEMBER member|FROMLONLAT lon lat BYRADIUS r unit|BYBOX w h unit
    [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]
GEOSEARCHSTORE dst src ...as GEOSEARCH, without WITH*... [STOREDIST]

The arithmetic follows Redis' geohash.c/geohash_helper.c step by step (the same
double operations in the same order, so results agree to the last digit): a search
covers the geohash box of the centre and its eight neighbours at a step estimated from
the radius, reads each box's score range, and keeps the points within the shape.
"""

from __future__ import annotations

import math
from typing import Any

from commands.common import get_zset, store_result
from commands.errors import SYNTAX, CommandError
from commands.geohash import (
    LAT_MAX,
    LAT_MIN,
    LONG_MAX,
    LONG_MIN,
    Shape,
    _encode,
    decode_score,
    distance,
    encode,
    search,
)
from commands.parsing import get_float, get_int
from commands.pqsort import pqsort
from commands.registry import Flag, command
from commands.replies import NULL_ARRAY, Encoded, Reply
from commands.session import Session
from commands.zset_ranges import _zadd, build_zset
from store.values import LIMITS

# -- replies and argument parsing (geo.c) ------------------------------------------------

UNITS = {b"m": 1.0, b"km": 1000.0, b"ft": 0.3048, b"mi": 1609.34}
BAD_UNIT = "ERR unsupported unit provided. please use M, KM, FT, MI"
BAD_MEMBER = "ERR could not decode requested zset member"
COUNT_NOT_POSITIVE = "ERR COUNT must be > 0"
ANY_NEEDS_COUNT = "ERR the ANY argument requires COUNT argument"
STORE_WITH = "ERR {} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
NEED_FROM = "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}"
NEED_BY = "ERR exactly one of BYRADIUS and BYBOX can be specified for {}"


def format_distance(d: float) -> bytes:
    """fixedpoint_d2string(d, 4): rounded half to even at 4 decimals."""
    if d == 0:
        return b"0.0000"
    scaled = d * 10000.0
    # llrint: half to even; NaN, infinities and overflow give LLONG_MIN
    v = round(scaled) if math.isfinite(scaled) and abs(scaled) < 2.0**63 else -(2**63)
    digits = b"%05d" % abs(v)
    return b"%s%s.%s" % (b"-" if v < 0 else b"", digits[:-4], digits[-4:])


def format_coord(s: Session, x: float) -> Reply:
    """addReplyHumanLongDouble: '%.17Lf' trimmed; a bulk string in RESP2, a double in
    RESP3."""
    text = b"%.17f" % x
    text = text.rstrip(b"0").rstrip(b".") if b"." in text else text
    if text == b"-0":
        text = b"0"
    return text if s.resp == 2 else Encoded(b",%s\r\n" % text)


def unit(b: bytes) -> float:
    conv = UNITS.get(b.lower())
    if conv is None:
        raise CommandError(BAD_UNIT)
    return conv


def lon_lat(a: bytes, b: bytes) -> tuple[float, float]:
    """extractLongLatOrReply."""
    lon = get_float(a)
    lat = get_float(b)
    if lon < LONG_MIN or lon > LONG_MAX or lat < LAT_MIN or lat > LAT_MAX:
        raise CommandError(f"ERR invalid longitude,latitude pair {lon:f},{lat:f}")
    return lon, lat


def _distance_arg(shape: Shape, argv: list[bytes], i: int) -> None:
    r = get_float(argv[i], "ERR need numeric radius")
    if r < 0:
        raise CommandError("ERR radius cannot be negative")
    shape.radius = r
    shape.box = False
    shape.conversion = unit(argv[i + 1])


def _box_arg(shape: Shape, argv: list[bytes], i: int) -> None:
    w = get_float(argv[i], "ERR need numeric width")
    h = get_float(argv[i + 1], "ERR need numeric height")
    if h < 0 or w < 0:
        raise CommandError("ERR height or width cannot be negative")
    shape.width, shape.height = w, h
    shape.box = True
    shape.conversion = unit(argv[i + 2])


def _member_pos(z: Any, member: bytes) -> tuple[float, float]:
    sc = z.scores.get(member)
    if sc is None:
        raise CommandError(BAD_MEMBER)
    return decode_score(sc)


# -- commands ----------------------------------------------------------------------------

W = Flag.WRITE | Flag.DENYOOM


@command("geoadd", -5, W, 1, 1, 1)
def cmd_geoadd(s: Session, argv: list[bytes]) -> Reply:
    n = len(argv)
    i = 2
    nx = xx = False
    while i < n:
        opt = argv[i].lower()
        if opt == b"nx":
            nx = True
        elif opt == b"xx":
            xx = True
        elif opt != b"ch":
            break
        i += 1
    if (n - i) % 3 or (nx and xx):
        raise CommandError(SYNTAX)
    zargv = [b"zadd", *argv[1:i]]
    for j in range(i, n, 3):
        lon, lat = lon_lat(argv[j], argv[j + 1])
        zargv.append(b"%d" % encode(lon, lat))
        zargv.append(argv[j + 2])
    return _zadd(s, zargv, 0)


@command("geodist", -4, Flag.READONLY, 1, 1, 1)
def cmd_geodist(s: Session, argv: list[bytes]) -> Reply:
    conv = 1.0
    if len(argv) == 5:
        conv = unit(argv[4])
    elif len(argv) > 5:
        raise CommandError(SYNTAX)
    z = get_zset(s, argv[1])
    if z is None:
        return None
    a = z.scores.get(argv[2])
    b = z.scores.get(argv[3])
    if a is None or b is None:
        return None
    lon1, lat1 = decode_score(a)
    lon2, lat2 = decode_score(b)
    return format_distance(distance(lon1, lat1, lon2, lat2) / conv)


_ALPHABET = b"0123456789bcdefghjkmnpqrstuvwxyz"


def _positions(s: Session, argv: list[bytes]) -> list[tuple[float, float] | None]:
    """The (longitude, latitude) of each member argv[2:], None where missing."""
    z = get_zset(s, argv[1])
    out: list[tuple[float, float] | None] = []
    for m in argv[2:]:
        sc = None if z is None else z.scores.get(m)
        out.append(None if sc is None else decode_score(sc))
    return out


def _geohash_text(lon: float, lat: float) -> bytes:
    """The standard 11-character geohash (re-encoded over latitudes -90..90)."""
    bits = _encode(lon, lat, 26, -90.0, 90.0)
    chars = [_ALPHABET[(bits >> (52 - (i + 1) * 5)) & 0x1F] for i in range(10)]
    return bytes(chars) + b"0"


@command("geohash", -2, Flag.READONLY, 1, 1, 1)
def cmd_geohash(s: Session, argv: list[bytes]) -> Reply:
    return [None if p is None else _geohash_text(*p) for p in _positions(s, argv)]


@command("geopos", -2, Flag.READONLY, 1, 1, 1)
def cmd_geopos(s: Session, argv: list[bytes]) -> Reply:
    return [
        NULL_ARRAY if p is None else [format_coord(s, p[0]), format_coord(s, p[1])]
        for p in _positions(s, argv)
    ]


_COORDS, _MEMBER, _NOSTORE, _SEARCH, _SEARCHSTORE = 1, 2, 4, 8, 16


def _georadius(s: Session, argv: list[bytes], src: int, flags: int) -> Reply:
    """georadiusGeneric."""
    z = get_zset(s, argv[src])
    shape = Shape()
    store: bytes | None = None
    storedist = False
    if flags & _COORDS:
        base = 6
        shape.lon, shape.lat = lon_lat(argv[2], argv[3])
        _distance_arg(shape, argv, 4)
    elif flags & _MEMBER:
        base = 5
        if z is not None:
            shape.lon, shape.lat = _member_pos(z, argv[2])
            _distance_arg(shape, argv, 3)
    else:
        base = 2
        if flags & _SEARCHSTORE:
            base = 3
            store = argv[1]
    withdist = withhash = withcoord = any_ = False
    frommember = fromloc = byradius = bybox = False
    sort = 0  # 1 ascending, 2 descending
    count = 0
    search_cmd = bool(flags & _SEARCH)
    may_store = not flags & _NOSTORE and not search_cmd
    n = len(argv)
    i = base
    while i < n:
        arg = argv[i].lower()
        left = n - i - 1
        if arg == b"withdist":
            withdist = True
        elif arg == b"withhash":
            withhash = True
        elif arg == b"withcoord":
            withcoord = True
        elif arg == b"any":
            any_ = True
        elif arg == b"asc":
            sort = 1
        elif arg == b"desc":
            sort = 2
        elif arg == b"count" and left >= 1:
            count = get_int(argv[i + 1])
            if count <= 0:
                raise CommandError(COUNT_NOT_POSITIVE)
            i += 1
        elif arg in (b"store", b"storedist") and left >= 1 and may_store:
            store = argv[i + 1]
            storedist = arg == b"storedist"
            i += 1
        elif arg == b"storedist" and flags & _SEARCHSTORE:
            storedist = True
        elif arg == b"frommember" and left >= 1 and search_cmd and not fromloc:
            if z is not None:
                shape.lon, shape.lat = _member_pos(z, argv[i + 1])
            frommember = True
            i += 1
        elif arg == b"fromlonlat" and left >= 2 and search_cmd and not frommember:
            shape.lon, shape.lat = lon_lat(argv[i + 1], argv[i + 2])
            fromloc = True
            i += 2
        elif arg == b"byradius" and left >= 2 and search_cmd and not bybox:
            _distance_arg(shape, argv, i + 1)
            byradius = True
            i += 2
        elif arg == b"bybox" and left >= 3 and search_cmd and not byradius:
            _box_arg(shape, argv, i + 1)
            bybox = True
            i += 3
        else:
            raise CommandError(SYNTAX)
        i += 1
    if store is not None and (withdist or withhash or withcoord):
        what = "GEOSEARCHSTORE" if flags & _SEARCHSTORE else "STORE option in GEORADIUS"
        raise CommandError(STORE_WITH.format(what))
    name = argv[0].decode(errors="replace")
    if search_cmd and not (frommember or fromloc):
        raise CommandError(NEED_FROM.format(name))
    if search_cmd and not (byradius or bybox):
        raise CommandError(NEED_BY.format(name))
    if any_ and not count:
        raise CommandError(ANY_NEEDS_COUNT)
    if z is None:
        return [] if store is None else store_result(s, store, None)
    if count and not sort and not any_:
        sort = 1
    points = search(z, shape, count if any_ else 0)
    if not points and store is None:
        return []
    if sort:
        if count and count < len(points):
            sign = -1 if sort == 2 else 1
            pqsort(points, lambda a, b: sign * ((a[1] > b[1]) - (a[1] < b[1])), 0, count - 1)
        else:
            points.sort(key=lambda p: p[1], reverse=sort == 2)
    if count:
        points = points[:count]
    conv = shape.conversion
    if store is None:
        out: list[Reply] = []
        for m, d, sc, lon, lat in points:
            if not (withdist or withhash or withcoord):
                out.append(m)
                continue
            item: list[Reply] = [m]
            if withdist:
                item.append(format_distance(d / conv))
            if withhash:
                item.append(int(sc))
            if withcoord:
                item.append([format_coord(s, lon), format_coord(s, lat)])
            out.append(item)
        return out
    items = sorted((d / conv if storedist else sc, m) for m, d, sc, _, _ in points)
    big = len(items) > LIMITS.zset_entries or any(len(m) > LIMITS.zset_value for _, m in items)
    return store_result(s, store, build_zset(items, big) if items else None)


@command("georadius", -6, W, 1, 1, 1)
def cmd_georadius(s: Session, argv: list[bytes]) -> Reply:
    return _georadius(s, argv, 1, _COORDS)


@command("georadiusbymember", -5, W, 1, 1, 1)
def cmd_georadiusbymember(s: Session, argv: list[bytes]) -> Reply:
    return _georadius(s, argv, 1, _MEMBER)


@command("georadius_ro", -6, Flag.READONLY, 1, 1, 1)
def cmd_georadius_ro(s: Session, argv: list[bytes]) -> Reply:
    return _georadius(s, argv, 1, _COORDS | _NOSTORE)


@command("georadiusbymember_ro", -5, Flag.READONLY, 1, 1, 1)
def cmd_georadiusbymember_ro(s: Session, argv: list[bytes]) -> Reply:
    return _georadius(s, argv, 1, _MEMBER | _NOSTORE)


@command("geosearch", -7, Flag.READONLY, 1, 1, 1)
def cmd_geosearch(s: Session, argv: list[bytes]) -> Reply:
    return _georadius(s, argv, 1, _SEARCH)


@command("geosearchstore", -8, W, 1, 2, 1)
def cmd_geosearchstore(s: Session, argv: list[bytes]) -> Reply:
    return _georadius(s, argv, 2, _SEARCH | _SEARCHSTORE)
