"""Geohash arithmetic (Redis' geohash.c and geohash_helper.c): encoding a longitude and
latitude into a 52-bit score and back, neighbouring cells, distances, and the search
shapes of GEOSEARCH. The GEO commands are the `commands.geo` family's; the Redis
replication stream (`commands.redis_repl`) encodes with it too."""

from __future__ import annotations

import math
from typing import Any

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
