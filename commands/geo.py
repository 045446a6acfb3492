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
from commands.parsing import get_float, get_int
from commands.pqsort import pqsort
from commands.registry import Flag, command
from commands.replies import NULL_ARRAY, Encoded, Reply
from commands.session import Session
from commands.zset_ranges import build_zset
from commands.zsets import _zadd
from store.values import LIMITS

# -- geohash arithmetic (geohash.c) ------------------------------------------------------

STEP_MAX = 26  # 52 bits
LAT_MIN = -85.05112878
LAT_MAX = 85.05112878
LONG_MIN = -180.0
LONG_MAX = 180.0
U64 = (1 << 64) - 1
U32 = (1 << 32) - 1
EVEN = 0x5555555555555555
ODD = 0xAAAAAAAAAAAAAAAA

D_R = math.pi / 180.0
EARTH_RADIUS = 6372797.560856
MERCATOR_MAX = 20037726.37

Hash = tuple[int, int]  # (bits, step); (0, 0) is "no box"
Area = tuple[float, float, float, float]  # lon min, lon max, lat min, lat max

_MASKS = (
    (16, 0x0000FFFF0000FFFF),
    (8, 0x00FF00FF00FF00FF),
    (4, 0x0F0F0F0F0F0F0F0F),
    (2, 0x3333333333333333),
    (1, EVEN),
)
_UNMASKS = (
    (1, 0x3333333333333333),
    (2, 0x0F0F0F0F0F0F0F0F),
    (4, 0x00FF00FF00FF00FF),
    (8, 0x0000FFFF0000FFFF),
    (16, U32),
)


def _spread(v: int) -> int:
    """The bits of a 32-bit value moved to the even positions of a 64-bit one."""
    for shift, mask in _MASKS:
        v = (v | v << shift) & mask
    return v


def _squash_slow(v: int) -> int:
    v &= EVEN
    for shift, mask in _UNMASKS:
        v = (v | v >> shift) & mask
    return v


_E8 = [_squash_slow(i) for i in range(256)]
_E16 = [lo | hi for hi in [e << 4 for e in _E8] for lo in _E8]  # even bits of 16


def _squash(v: int) -> int:
    """The even bits of a 64-bit value packed into 32 bits (the inverse of _spread)."""
    e = _E16
    return e[v & 0xFFFF] | e[v >> 16 & 0xFFFF] << 8 | e[v >> 32 & 0xFFFF] << 16 | e[v >> 48] << 24


def _encode(lon: float, lat: float, step: int, lat_min: float, lat_max: float) -> int:
    """geohashEncode: latitude bits in the even positions, longitude in the odd."""
    lat_off = (lat - lat_min) / (lat_max - lat_min) * (1 << step)
    lon_off = (lon - LONG_MIN) / (LONG_MAX - LONG_MIN) * (1 << step)
    return _spread(int(lat_off) & U32) | _spread(int(lon_off) & U32) << 1


def encode(lon: float, lat: float, step: int = STEP_MAX) -> int:
    return _encode(lon, lat, step, LAT_MIN, LAT_MAX)


def decode_area(bits: int, step: int) -> Area:
    """geohashDecode of a box in the WGS84 ranges Redis uses."""
    ilat = _squash(bits)
    ilon = _squash(bits >> 1)
    scale = 1 << step
    lat_scale = LAT_MAX - LAT_MIN
    lon_scale = LONG_MAX - LONG_MIN
    return (
        LONG_MIN + (ilon * 1.0 / scale) * lon_scale,
        LONG_MIN + (((ilon + 1) & U32) * 1.0 / scale) * lon_scale,
        LAT_MIN + (ilat * 1.0 / scale) * lat_scale,
        LAT_MIN + (((ilat + 1) & U32) * 1.0 / scale) * lat_scale,
    )


def _score_bits(score: float) -> int:
    """(uint64_t)score as x86-64 converts it."""
    if score != score or score == -math.inf:
        return 1 << 63
    if score >= 2.0**63:
        if score >= 2.0**64:  # inf included
            return 0
        return int(score - 2.0**63) | 1 << 63
    n = int(score)
    return n & U64 if n >= -(2**63) else 1 << 63


def decode_score(score: float) -> tuple[float, float]:
    """The (longitude, latitude) a geo set score stands for (the centre of its box):
    decode_area at step 26, its middle, clamped (inlined: searches decode every
    candidate)."""
    bits = int(score) if 0.0 <= score < 9.2e18 else _score_bits(score)
    ilat = _squash(bits)
    ilon = _squash(bits >> 1)
    lon = (
        LONG_MIN
        + (ilon * 1.0 / _SCALE26) * 360.0
        + (LONG_MIN + (((ilon + 1) & U32) * 1.0 / _SCALE26) * 360.0)
    ) / 2
    lat = (
        LAT_MIN
        + (ilat * 1.0 / _SCALE26) * _LAT_SCALE
        + (LAT_MIN + (((ilat + 1) & U32) * 1.0 / _SCALE26) * _LAT_SCALE)
    ) / 2
    lon = LONG_MIN if lon < LONG_MIN else LONG_MAX if lon > LONG_MAX else lon
    lat = LAT_MIN if lat < LAT_MIN else LAT_MAX if lat > LAT_MAX else lat
    return lon, lat


_SCALE26 = 1 << STEP_MAX
_LAT_SCALE = LAT_MAX - LAT_MIN


def _move(bits: int, step: int, d: int, moving: int, other: int) -> int:
    """geohash_move_x/_y: step the coordinate in the `moving` bits by d (+1/-1)."""
    if d == 0:
        return bits
    a = bits & moving
    b = bits & other
    zz = other >> (64 - step * 2)
    if d > 0:
        a = a + (zz + 1)
    else:
        a = (a | zz) - (zz + 1)
    a &= moving >> (64 - step * 2)
    return a | b


def neighbours(bits: int, step: int) -> list[int]:
    """north, south, east, west, north-east, north-west, south-east, south-west."""

    def at(dx: int, dy: int) -> int:
        return _move(_move(bits, step, dx, ODD, EVEN), step, dy, EVEN, ODD)

    return [at(0, 1), at(0, -1), at(1, 0), at(-1, 0), at(1, 1), at(-1, 1), at(1, -1), at(-1, -1)]


def _cos(x: float) -> float:
    """C's cos: NaN (not an exception) for an infinite argument."""
    return math.cos(x) if math.isfinite(x) else math.nan


def _asin_sqrt(a: float) -> float:
    """asin(sqrt(a)) as C computes it: NaN outside the domain."""
    if not 0.0 <= a <= 1.0:
        return 0.0 if a == 0.0 else math.nan
    return math.asin(math.sqrt(a))


def _deg_rad(a: float) -> float:
    return a * D_R


def lat_distance(lat1: float, lat2: float) -> float:
    return EARTH_RADIUS * abs(_deg_rad(lat2) - _deg_rad(lat1))


def distance(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Haversine great-circle distance in meters (geohashGetDistance); coordinates are
    always finite here (validated or decoded)."""
    lat1r = _deg_rad(lat1)
    return _from(_deg_rad(lon1), lat1r, math.cos(lat1r), lon2, lat2)


def _from(lon1r: float, lat1r: float, cos1: float, lon2: float, lat2: float) -> float:
    """distance() from a point given in radians with its latitude's cosine."""
    lon2r = _deg_rad(lon2)
    v = math.sin((lon2r - lon1r) / 2)
    lat2r = _deg_rad(lat2)
    if v == 0.0:
        return EARTH_RADIUS * abs(lat2r - lat1r)
    u = math.sin((lat2r - lat1r) / 2)
    a = u * u + cos1 * math.cos(lat2r) * v * v
    return 2.0 * EARTH_RADIUS * _asin_sqrt(a)


def _steps_for(range_m: float, lat: float) -> int:
    """geohashEstimateStepsByRadius."""
    if range_m == 0:
        return 26
    step = 1
    while range_m < MERCATOR_MAX:
        range_m *= 2
        step += 1
    step -= 2
    if lat > 66 or lat < -66:
        step -= 1
        if lat > 80 or lat < -80:
            step -= 1
    return min(max(step, 1), 26)


class Shape:
    """A search area: a circle (radius) or a box (width, height), in the given unit."""

    __slots__ = ("box", "centre", "conversion", "height", "lat", "lon", "radius", "width")

    def __init__(self) -> None:
        self.lon = self.lat = 0.0
        self.box = False
        self.radius = self.width = self.height = 0.0
        self.conversion = 0.0
        self.centre: tuple[float, float, float] | None = None  # radians, cos(latitude)

    def bounds(self) -> tuple[float, float, float, float]:
        """geohashBoundingBox: min lon, min lat, max lon, max lat."""
        lon, lat = self.lon, self.lat
        half_h = self.conversion * (self.height / 2 if self.box else self.radius)
        half_w = self.conversion * (self.width / 2 if self.box else self.radius)
        lat_delta = half_h / EARTH_RADIUS / D_R
        top = half_w / EARTH_RADIUS / _cos(_deg_rad(lat + lat_delta)) / D_R
        bottom = half_w / EARTH_RADIUS / _cos(_deg_rad(lat - lat_delta)) / D_R
        delta = bottom if lat < 0 else top
        return lon - delta, lat - lat_delta, lon + delta, lat + lat_delta

    def boxes(self) -> list[Hash]:
        """geohashCalculateAreasByShapeWGS84: the centre box and its eight neighbours
        (zeroed where they cannot hold a point of the shape)."""
        min_lon, min_lat, max_lon, max_lat = self.bounds()
        if self.box:
            r = math.sqrt(
                (self.width / 2) * (self.width / 2) + (self.height / 2) * (self.height / 2)
            )
        else:
            r = self.radius
        steps = _steps_for(r * self.conversion, self.lat)
        bits = encode(self.lon, self.lat, steps)
        near = neighbours(bits, steps)
        north = decode_area(near[0], steps)
        south = decode_area(near[1], steps)
        east = decode_area(near[2], steps)
        west = decode_area(near[3], steps)
        if steps > 1 and (
            north[3] < max_lat or south[2] > min_lat or east[1] < max_lon or west[0] > min_lon
        ):
            steps -= 1
            bits = encode(self.lon, self.lat, steps)
            near = neighbours(bits, steps)
        out: list[Hash] = [(bits, steps)] + [(b, steps) for b in near]
        if steps >= 2:
            area = decode_area(bits, steps)
            zero: set[int] = set()
            if area[2] < min_lat:
                zero |= {2, 8, 7}  # south, south-west, south-east
            if area[3] > max_lat:
                zero |= {1, 5, 6}  # north, north-east, north-west
            if area[0] < min_lon:
                zero |= {4, 8, 6}  # west, south-west, north-west
            if area[1] > max_lon:
                zero |= {3, 7, 5}  # east, south-east, north-east
            for i in zero:
                out[i] = (0, 0)
        return out

    def within(self, lon: float, lat: float) -> float | None:
        """The distance (meters) of a point inside the shape, None outside it."""
        if not self.box:
            c = self.centre
            if c is None:
                lat1r = _deg_rad(self.lat)
                c = self.centre = (_deg_rad(self.lon), lat1r, math.cos(lat1r))
            d = _from(c[0], c[1], c[2], lon, lat)
            return None if d > self.radius * self.conversion else d
        if lat_distance(lat, self.lat) > self.height * self.conversion / 2:
            return None
        if distance(lon, lat, self.lon, lat) > self.width * self.conversion / 2:
            return None
        return distance(self.lon, self.lat, lon, lat)


Point = tuple[bytes, float, float, float, float]  # member, distance, score, lon, lat


def search(z: Any, shape: Shape, limit: int) -> list[Point]:
    """membersOfAllNeighbors: the points in the shape, box by box in score order;
    with a limit (ANY), stop once that many are found."""
    found: list[Point] = []
    order = z.order
    last: Hash | None = None  # as Redis: a box equal to the centre box is still read
    for i, (bits, step) in enumerate(shape.boxes()):
        if bits == 0 and step == 0:
            continue
        if last is not None and (bits, step) == last:
            continue
        if limit and len(found) >= limit:
            break
        shift = 52 - step * 2
        lo = order.bisect_left((float(bits << shift),))
        hi = order.bisect_left((float((bits + 1) << shift),))
        for sc, m in order.islice(lo, hi):
            lon, lat = decode_score(sc)
            d = shape.within(lon, lat)
            if d is not None:
                found.append((m, d, sc, lon, lat))
            if limit and len(found) >= limit:
                break
        last = (bits, step) if i else None
    return found


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
