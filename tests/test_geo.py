"""Differential tests of the geo family against redis-server, RESP2 and RESP3: scores,
positions, hashes and distances to the last digit, searches around the poles and the
antimeridian, every option and error."""

from __future__ import annotations

import random

from tests.conftest import Differ

UNITS = ["m", "km", "ft", "mi", "KM"]


def test_geoadd_and_point_reads(diff: Differ) -> None:
    diff.run("""
        GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
        GEOADD Sicily 13.361389 38.115556 Palermo
        GEOADD Sicily CH 13.361390 38.115556 Palermo 12 37 Other
        GEOADD Sicily NX 1 1 Palermo 2 2 New
        GEOADD Sicily XX CH 1 1 Palermo 3 3 Newer
        GEOADD Sicily XX NX 1 1 a
        GEOADD Sicily NX
        GEOADD Sicily nx ch ch
        GEOADD Sicily 1 2
        GEOADD Sicily 1 2 a 3
        GEOADD Sicily abc 2 a
        GEOADD Sicily 1 abc a
        GEOADD Sicily 181 2 a
        GEOADD Sicily 1 86 a
        GEOADD Sicily -180.5 -85.06 a
        GEOADD Sicily 1 1 ok 200 1 bad
        GEOADD Sicily inf 1 a
        GEOADD Sicily nan 1 a
        ZRANGE Sicily 0 -1 WITHSCORES
        GEOADD Edges 180 85.05112878 ne -180 -85.05112878 sw 0 0 zero -0 -0 negzero
        GEOADD Edges 179.99999999 85.05112877 nearne 1e-300 -1e-300 tiny
        ZRANGE Edges 0 -1 WITHSCORES
        GEOPOS Edges ne sw zero negzero nearne tiny missing
        GEOHASH Edges ne sw zero negzero nearne tiny missing
        GEOPOS Sicily Palermo Catania NonExisting
        GEOPOS Sicily
        GEOPOS nokey a b
        GEOHASH Sicily Palermo Catania NonExisting
        GEOHASH Sicily
        GEOHASH nokey a
        GEODIST Sicily Palermo Catania
        GEODIST Sicily Palermo Catania km
        GEODIST Sicily Palermo Catania MI
        GEODIST Sicily Palermo Catania ft
        GEODIST Sicily Palermo Catania m
        GEODIST Sicily Palermo Catania yards
        GEODIST Sicily Palermo Catania km extra
        GEODIST Sicily Palermo Palermo
        GEODIST Sicily Palermo Nope
        GEODIST nokey a b
        GEODIST nokey a b parsec
        GEODIST Edges ne sw
        GEODIST Edges zero negzero
        SET str x
        GEOADD str 1 1 a
        GEOPOS str a
        GEOHASH str a
        GEODIST str a b
        GEORADIUS str 1 1 1 km
        GEOSEARCH str FROMLONLAT 1 1 BYRADIUS 1 km
    """)


def test_odd_scores_decode(diff: Differ) -> None:
    """Members added by ZADD with scores that are no geohash still decode as Redis does."""
    diff.run("""
        ZADD z 0 zero -1 neg 1.5 frac 4503599627370495 max52 4503599627370496 over 1e30 huge
        ZADD z -1e30 nhuge 9.3e18 top 1.9e19 beyond +inf pinf -inf ninf -9.3e18 ntop
        GEOPOS z zero neg frac max52 over huge nhuge top beyond pinf ninf ntop
        GEOHASH z zero neg frac max52 over huge nhuge top beyond pinf ninf ntop
        GEORADIUS z 0 0 20000 km WITHCOORD WITHHASH
        GEOSEARCH z FROMMEMBER pinf BYRADIUS 1 m WITHDIST
        GEOSEARCH z FROMMEMBER ninf BYBOX 1 1 m WITHDIST
        GEODIST z zero max52
        GEODIST z neg frac km
    """)


def _random_points(rng: random.Random, n: int) -> list[str]:
    args: list[str] = []
    for i in range(n):
        lon = rng.uniform(-180, 180)
        lat = rng.uniform(-85.05112878, 85.05112878)
        args += [
            repr(round(lon, rng.randrange(0, 12))),
            repr(round(lat, rng.randrange(0, 12))),
            f"p{i}",
        ]
    return args


def test_random_points_worldwide(diff: Differ) -> None:
    rng = random.Random(14)
    diff.check("GEOADD", "world", *_random_points(rng, 300))
    diff.check("ZRANGE", "world", 0, -1, "WITHSCORES")
    members = [f"p{i}" for i in range(300)]
    diff.check("GEOPOS", "world", *members)
    diff.check("GEOHASH", "world", *members)
    for _ in range(40):
        a, b = rng.sample(members, 2)
        diff.check("GEODIST", "world", a, b, rng.choice(UNITS))
    for _ in range(40):
        lon = round(rng.uniform(-180, 180), 6)
        lat = round(rng.uniform(-85, 85), 6)
        unit = rng.choice(UNITS)
        radius = rng.choice([1, 50, 500, 2000, 5000, 15000]) * {"m": 1000, "ft": 3000}.get(
            unit.lower(), 1
        )
        opts = rng.sample(["WITHCOORD", "WITHDIST", "WITHHASH"], rng.randrange(4))
        opts += rng.choice([[], ["ASC"], ["DESC"]])
        diff.check("GEORADIUS", "world", lon, lat, radius, unit, *opts)
        diff.check("GEOSEARCH", "world", "FROMLONLAT", lon, lat, "BYRADIUS", radius, unit, *opts)
        width = radius * rng.choice([0.5, 1, 2, 3])
        diff.check(
            "GEOSEARCH", "world", "FROMLONLAT", lon, lat, "BYBOX", width, radius, unit, *opts
        )
        member = rng.choice(members)
        diff.check("GEORADIUSBYMEMBER", "world", member, radius, unit, *opts)
        diff.check("GEOSEARCH", "world", "FROMMEMBER", member, "BYBOX", radius, width, unit, *opts)


def test_poles_and_antimeridian(diff: Differ) -> None:
    rng = random.Random(7)
    args: list[str] = []
    for i in range(200):
        lon = rng.choice([rng.uniform(170, 180), rng.uniform(-180, -170), rng.uniform(-180, 180)])
        lat = rng.choice([rng.uniform(80, 85.05), rng.uniform(-85.05, -80), rng.uniform(-5, 5)])
        args += [f"{lon:.7f}", f"{lat:.7f}", f"q{i}"]
    args += [
        "180",
        "0",
        "am_e",
        "-180",
        "0",
        "am_w",
        "0",
        "85.05112878",
        "np",
        "0",
        "-85.05112878",
        "sp",
    ]
    diff.check("GEOADD", "edge", *args)
    centres = [(180, 0), (-180, 0), (179.9, 84), (-179.9, -84), (0, 85.05), (0, -85.05),
               (90, 82), (-90, -81), (179.5, -3), (-179.5, 3)]  # fmt: skip
    for lon, lat in centres:
        for radius in (1, 100, 800, 3000, 12000):
            for unit in ("km", "mi"):
                diff.check("GEORADIUS", "edge", lon, lat, radius, unit, "WITHDIST", "WITHCOORD")
                diff.check(
                    "GEOSEARCH", "edge", "FROMLONLAT", lon, lat, "BYBOX",
                    radius * 2, radius, unit, "WITHDIST", "WITHHASH", "ASC",
                )  # fmt: skip
                diff.check("GEORADIUS", "edge", lon, lat, radius, unit, "COUNT", 5, "DESC")


def test_count_any_sort_and_store(diff: Differ) -> None:
    diff.run("""
        GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
        GEOADD Sicily 12.758489 38.788135 edge1 17.241510 38.788135 edge2
        GEOADD Sicily 13.583333 37.316667 Agrigento
        GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD
        GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC
        GEORADIUS Sicily 15 37 200 km withhash withdist withcoord desc
        GEORADIUS Sicily 15 37 400 km COUNT 2
        GEORADIUS Sicily 15 37 400 km COUNT 2 DESC
        GEORADIUS Sicily 15 37 400 km COUNT 2 ANY
        GEORADIUS Sicily 15 37 400 km COUNT 3 ANY ASC WITHDIST
        GEORADIUS Sicily 15 37 400 km COUNT 30 ANY DESC
        GEORADIUS Sicily 15 37 400 km ANY
        GEORADIUS Sicily 15 37 400 km COUNT 0
        GEORADIUS Sicily 15 37 400 km COUNT -3
        GEORADIUS Sicily 15 37 400 km COUNT abc
        GEORADIUS Sicily 15 37 400 km COUNT
        GEORADIUS Sicily 15 37 0 km
        GEORADIUS Sicily 13.361389 38.115556 0 km
        GEORADIUS Sicily 15 37 -1 km
        GEORADIUS Sicily 15 37 abc km
        GEORADIUS Sicily 15 37 10 parsec
        GEORADIUS Sicily 200 37 10 km
        GEORADIUS Sicily 15 37 200 km STORE dst
        ZRANGE dst 0 -1 WITHSCORES
        GEORADIUS Sicily 15 37 200 km STOREDIST dst2 COUNT 2 DESC
        ZRANGE dst2 0 -1 WITHSCORES
        GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST
        GEORADIUS Sicily 0 0 1 km STORE dst
        EXISTS dst
        GEORADIUS_RO Sicily 15 37 200 km STORE dst
        GEORADIUS_RO Sicily 15 37 200 km WITHDIST
        GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST COUNT 3
        GEORADIUSBYMEMBER Sicily Nope 200 km
        GEORADIUSBYMEMBER Sicily Palermo -200 km
        GEORADIUSBYMEMBER Sicily Palermo 200 km STOREDIST bym
        ZRANGE bym 0 -1 WITHSCORES
        GEORADIUSBYMEMBER_RO Sicily Palermo 200 km STOREDIST bym
        GEORADIUSBYMEMBER_RO Sicily Palermo 200 km WITHCOORD
        GEORADIUSBYMEMBER nokey m abc xx
        GEORADIUSBYMEMBER nokey m 1 km STORE dst
        SET dst3 x
        GEORADIUS nokey 1 1 1 km STORE dst3
        EXISTS dst3
        GEORADIUS nokey 1 1 1 km
        GEORADIUS nokey 1 1 1 km WITHDIST STORE dst3
        GEORADIUS nokey 1 1 1 km BYBOX 1 1 km
        GEORADIUS Sicily 15 37 200 km FROMLONLAT 1 1
    """)


def test_geosearch_options_and_errors(diff: Differ) -> None:
    diff.run("""
        GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
        GEOADD Sicily 12.758489 38.788135 edge1 17.241510 38.788135 edge2
        GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC
        GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD WITHDIST WITHHASH
        GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km DESC COUNT 2 WITHDIST
        GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 100 mi COUNT 1 ANY
        GEOSEARCH Sicily FROMMEMBER Nope BYRADIUS 100 mi
        GEOSEARCH Sicily FROMLONLAT 15 37 FROMMEMBER Palermo BYRADIUS 1 km
        GEOSEARCH Sicily FROMMEMBER Palermo FROMLONLAT 15 37 BYRADIUS 1 km
        GEOSEARCH Sicily BYRADIUS 1 km BYBOX 1 1 km FROMLONLAT 1 1
        GEOSEARCH Sicily BYBOX 1 1 km BYRADIUS 1 km FROMLONLAT 1 1
        GEOSEARCH Sicily FROMLONLAT 15 37 COUNT 2
        geosearch Sicily BYRADIUS 1 km ASC
        GeoSearch Sicily FROMLONLAT 15 37 ASC
        GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX -1 1 km
        GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 -1 km
        GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX a 1 km
        GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 b km
        GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 1 lightyears
        GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 1
        GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1
        GEOSEARCH Sicily FROMLONLAT 15 BYRADIUS 1 km
        GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km STORE x
        GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km STOREDIST
        GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km ANY
        GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 0 0 km
        GEOSEARCH nokey FROMMEMBER x BYRADIUS 1 km
        GEOSEARCH nokey FROMMEMBER x
        GEOSEARCH nokey FROMLONLAT 1 1 BYBOX 1 1 km
        GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC COUNT 3
        ZRANGE dst 0 -1 WITHSCORES
        GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC COUNT 3 STOREDIST
        ZRANGE dst 0 -1 WITHSCORES
        GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km WITHDIST
        GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYBOX 400 400 km STORE x
        GEOSEARCHSTORE dst Sicily FROMLONLAT 0 0 BYRADIUS 1 km
        EXISTS dst
        GEOSEARCHSTORE dst nokey FROMLONLAT 0 0 BYRADIUS 1 km
        GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 1 km STOREDIST STOREDIST
        GEOSEARCHSTORE Sicily Sicily FROMLONLAT 15 37 BYRADIUS 200 km
        ZRANGE Sicily 0 -1 WITHSCORES
    """)


def test_store_encodings(diff: Differ) -> None:
    """Stored results change encoding past 128 entries or a 64-byte member, as ZADD does."""
    rng = random.Random(3)
    args: list[str] = []
    for i in range(150):
        args += [f"{rng.uniform(10, 11):.6f}", f"{rng.uniform(10, 11):.6f}", f"m{i}"]
    args += ["10.5", "10.5", "x" * 70]
    diff.check("GEOADD", "g", *args)
    diff.check("GEOSEARCHSTORE", "d1", "g", "FROMLONLAT", 10.5, 10.5, "BYRADIUS", 500, "km")
    diff.check("OBJECT", "ENCODING", "d1")
    diff.check("GEOSEARCHSTORE", "d2", "g", "FROMLONLAT", 10.5, 10.5, "BYRADIUS", 500, "km",
               "COUNT", 10, "STOREDIST")  # fmt: skip
    diff.check("OBJECT", "ENCODING", "d2")
    diff.check("ZRANGE", "d2", 0, -1, "WITHSCORES")
    diff.check("GEORADIUS", "g", 10.5, 10.5, 20, "km", "STORE", "d3", "COUNT", 128)
    diff.check("OBJECT", "ENCODING", "d3")
    diff.check("GEORADIUS", "g", 10.5, 10.5, 500, "km", "WITHDIST", "WITHCOORD", "WITHHASH")


def test_count_with_equal_distances(diff: Differ) -> None:
    """COUNT below the number found uses Redis' partial quicksort, which is not stable:
    members at the same spot come out in the order it leaves them."""
    rng = random.Random(11)
    spots = [(f"{rng.uniform(2, 3):.5f}", f"{rng.uniform(40, 41):.5f}") for _ in range(6)]
    args: list[str] = []
    for i in range(120):
        lon, lat = rng.choice(spots)
        args += [lon, lat, f"s{i:03d}"]
    diff.check("GEOADD", "same", *args)
    for count in (1, 3, 7, 8, 20, 41, 60, 119, 120, 200):
        for order in ("ASC", "DESC"):
            diff.check("GEORADIUS", "same", 2.5, 40.5, 300, "km", "COUNT", count, order)
            diff.check(
                "GEOSEARCH", "same", "FROMLONLAT", 2.5, 40.5, "BYBOX", 300, 300, "km",
                "COUNT", count, order, "WITHDIST",
            )  # fmt: skip
        diff.check("GEORADIUS", "same", 2.5, 40.5, 300, "km", "COUNT", count, "STORE", "d")
        diff.check("ZRANGE", "d", 0, -1, "WITHSCORES")


def test_infinite_and_huge_shapes(diff: Differ) -> None:
    """Radii and boxes past the planet (inf, 1e308 km) go through NaN bounds as in C."""
    diff.run("""
        GEOADD g 0 0 a 180 0 b -180 0 c 0 85 d 100 -85 e 179.999 0.0001 f
        GEORADIUS g 0 0 inf km WITHDIST
        GEORADIUS g 0 0 1e308 km WITHDIST WITHHASH
        GEORADIUS g 180 0 20015.1 km WITHDIST
        GEOSEARCH g FROMLONLAT 0 0 BYBOX inf inf km WITHDIST
        GEOSEARCH g FROMLONLAT 0 0 BYBOX 1 inf km WITHDIST
        GEOSEARCH g FROMLONLAT 0 0 BYBOX inf 1 mi WITHDIST
        GEOSEARCH g FROMLONLAT 0 0 BYBOX 1e300 1e300 km WITHDIST
        GEORADIUSBYMEMBER g e inf km WITHDIST
        GEODIST g a b
        GEODIST g a c
        GEODIST g d e mi
    """)
