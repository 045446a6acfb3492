"""LOLWUT and MODULE, as Redis 7.0.15 answers them.

LOLWUT [VERSION v] [args...]
    Without VERSION (or with one that names no art: Redis 7.0 has none of its own) the
    reply is "Redis ver. 7.0.15\\n". VERSION 5: Georg Nees' "Schotter" in Braille
    characters (LOLWUT VERSION 5 [cols [squares-per-row [squares-per-col]]]); VERSION 6:
    a skyline in terminal colours (LOLWUT VERSION 6 [cols [rows]]). Both are drawn as
    Redis draws them; their randomness comes from Python's generator, so the pictures
    differ from redis-server's (their shape does not).
MODULE LIST · MODULE HELP · MODULE LOAD path [arg ...] · MODULE LOADEX path ... ·
MODULE UNLOAD name
    No modules can be loaded here: LIST is empty. LOAD, LOADEX and UNLOAD are refused
    as Redis refuses them: while enable-module-command is `no` (the default; `local`:
    from beyond loopback) with Redis' "MODULE command not allowed" error, otherwise with
    the error Redis gives for a module that cannot be loaded or is not loaded.
"""

from __future__ import annotations

import logging
import math
import random

from commands.common import help_reply
from commands.errors import CommandError
from commands.parsing import string2ll
from commands.redis_table import REDIS_VERSION
from commands.registry import Flag, command, container
from commands.replies import Reply, Verbatim
from commands.session import Session

log = logging.getLogger("temporalstore")

NOT_INTEGER = "ERR value is not an integer or out of range"


class Canvas:
    def __init__(self, width: int, height: int, color: int) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray([color]) * (width * height)

    def draw(self, x: int, y: int, color: int) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            self.pixels[x + y * self.width] = color

    def get(self, x: int, y: int) -> int:
        if 0 <= x < self.width and 0 <= y < self.height:
            return self.pixels[x + y * self.width]
        return 0

    def line(self, x1: int, y1: int, x2: int, y2: int, color: int) -> None:
        """Bresenham, as lwDrawLine."""
        dx, dy = abs(x2 - x1), abs(y2 - y1)
        sx = 1 if x1 < x2 else -1
        sy = 1 if y1 < y2 else -1
        err = dx - dy
        while True:
            self.draw(x1, y1, color)
            if x1 == x2 and y1 == y2:
                return
            e2 = err * 2
            if e2 > -dy:
                err -= dy
                x1 += sx
            if e2 < dx:
                err += dx
                y1 += sy

    def square(self, x: int, y: int, size: float, angle: float, color: int) -> None:
        size = float(round(size / 1.4142135623))
        k = math.pi / 4 + angle
        px, py = [], []
        for _ in range(4):
            px.append(round(math.sin(k) * size + x))
            py.append(round(math.cos(k) * size + y))
            k += math.pi / 2
        for j in range(4):
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color)


# Braille characters by their dot bits.
_BRAILLE = {i: chr(0x2800 + i) for i in range(256)}
# The dot bit of each pixel of a 2x4 block: (column, row) -> bit, as lwTranslatePixelsGroup.
_DOTS = (((0, 0), 0), ((0, 1), 1), ((0, 2), 2), ((1, 0), 3), ((1, 1), 4), ((1, 2), 5),
         ((0, 3), 6), ((1, 3), 7))  # fmt: skip


def braille(canvas: Canvas) -> str:
    """lolwut5's renderCanvas: each 2x4 block of pixels as one Braille character. The
    eight dots of a row of blocks are combined as big integers (one byte per block:
    pixels are 0 or 1, so the shifted planes never carry into the next byte)."""
    width, height = canvas.width, canvas.height
    px = canvas.pixels
    blank = bytes(width + 1)
    chars = (width + 1) // 2
    rows = []
    for y in range(0, height, 4):
        code = 0
        for (dx, dy), bit in _DOTS:
            line = px[(y + dy) * width : (y + dy + 1) * width] + blank if y + dy < height else blank
            plane = bytes(line[dx : dx + 2 * chars : 2])
            code |= int.from_bytes(plane, "big") << bit
        rows.append(code.to_bytes(chars, "big").decode("latin-1").translate(_BRAILLE))
    text = "\n".join(rows)
    # Redis skips the newline after the last row only when the height is 1 mod 4.
    if (height - 1) % 4:
        text += "\n"
    return text


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def _longs(args: list[bytes], defaults: list[int]) -> list[int]:
    out = list(defaults)
    for i, a in enumerate(args[: len(defaults)]):
        n = string2ll(a)
        if n is None:
            raise CommandError(NOT_INTEGER)
        out[i] = n
    return out


def schotter(cols: int, per_row: int, per_col: int) -> str:
    width = cols * 2
    padding = 2 if width > 4 else 0
    side = (width - padding * 2) / per_row
    canvas = Canvas(width, int(side * per_col + padding * 2), 0)
    rnd = random.random
    for y in range(per_col):
        for x in range(per_row):
            sx = int(x * side + side / 2 + padding)
            sy = int(y * side + side / 2 + padding)
            angle = 0.0
            if y > 1:
                r1, r2, r3 = (rnd() / per_col * y for _ in range(3))
                r1, r2, r3 = (r if random.getrandbits(1) else -r for r in (r1, r2, r3))
                angle = r1
                sx = int(sx + r2 * side / 3)
                sy = int(sy + r3 * side / 3)
            canvas.square(sx, sy, side, angle, 1)
    return braille(canvas)


def _skyscraper(
    canvas: Canvas, xoff: int, width: int, height: int, windows: bool, color: int
) -> None:
    starty = canvas.height - 1
    endy = starty - height + 1
    for y in range(starty, endy - 1, -1):
        for x in range(xoff, xoff + width):
            if y == endy and (x <= xoff + 1 or x >= xoff + width - 2):
                continue  # the roof is four pixels narrower
            c = color
            if windows and xoff + 1 < x < xoff + width - 2 and endy + 1 < y < starty - 1:
                relx, rely = x - (xoff + 1), y - (endy + 1)
                if (relx // 2) % 2 and rely % 2:
                    c = color
                    while c == color:
                        c = 1 + random.randrange(2)
                    if relx % 2:
                        c = canvas.get(x - 1, y)
            canvas.draw(x, y, c)


def skyline(cols: int, rows: int) -> str:
    canvas = Canvas(cols, rows, 3)
    h = canvas.height
    for color in (2, 1):
        offset = -10
        while offset < canvas.width:
            offset += random.randrange(8)
            width = 10 + random.randrange(9)
            if color == 2:
                height = h // 2 + random.randrange(2**31) % h // 2
            else:
                height = h // 2 + random.randrange(2**31) % h // 3
            _skyscraper(canvas, offset, width, height, False, color)
            offset += width // 2 if color == 2 else width + 1
    offset = -10
    while offset < canvas.width:
        offset += random.randrange(8)
        width = 5 + random.randrange(14)
        if width % 4:
            width += width % 3
        height = h // 3 + random.randrange(2**31) % h // 2
        _skyscraper(canvas, offset, width, height, True, 0)
        offset += width + 5
    escapes = {0: "0;30;40m", 1: "0;90;100m", 2: "0;37;47m", 3: "0;97;107m"}
    return "\n".join(
        "".join(f"\033[{escapes[canvas.get(x, y)]} \033[0m" for x in range(canvas.width))
        for y in range(canvas.height)
    )


@command("lolwut", -1, Flag.READONLY | Flag.FAST)
def cmd_lolwut(s: Session, argv: list[bytes]) -> Reply:
    version = REDIS_VERSION
    args = argv[1:]
    if len(argv) >= 3 and argv[1].lower() == b"version":
        v = string2ll(argv[2])
        if v is None or not -(2**63) <= v < 2**63:
            raise CommandError(NOT_INTEGER)
        version = f"{v % 2**32}.0.0"
        args = argv[3:]
    if version[:2] == "5." or version[:3] == "4.9":
        cols, per_row, per_col = _longs(args, [66, 8, 12])
        art = schotter(_clamp(cols, 1, 1000), _clamp(per_row, 1, 200), _clamp(per_col, 1, 200))
        text = art + "\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. "
    elif version[:2] == "6." or version[:3] == "5.9":
        cols, rows = _longs(args, [80, 20])
        text = skyline(_clamp(cols, 1, 1000), _clamp(rows, 1, 1000)) + (
            "\nDedicated to the 8 bit game developers of past and present.\n"
            "Original 8 bit image from Plaguemon by hikikomori. Redis ver. "
        )
    else:
        text = "Redis ver. "
    return Verbatim((text + REDIS_VERSION + "\n").encode())


# -- MODULE ------------------------------------------------------------------------------

MODULE_HELP = [
    "LIST",
    "    Return a list of loaded modules.",
    "LOAD <path> [<arg> ...]",
    "    Load a module library from <path>, passing to it any optional arguments.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Load a module library from <path>, while passing it module configurations and "
    "optional arguments.",
    "UNLOAD <name>",
    "    Unload a module.",
]
LOAD_FAILED = "ERR Error loading the extension. Please check the server logs."
NO_SUCH_MODULE = "ERR Error unloading module: no such module with that name"
MODULE_FLAGS = Flag.ADMIN | Flag.NOSCRIPT

container("module", -2)


@command("module|list", 2, MODULE_FLAGS)
def cmd_module_list(s: Session, argv: list[bytes]) -> Reply:
    return []


@command("module|help", 2, Flag.LOADING | Flag.STALE)
def cmd_module_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], MODULE_HELP)


def _load(s: Session, argv: list[bytes]) -> Reply:
    log.warning(
        "Module %s failed to load: this server cannot load Redis modules",
        argv[2].decode("utf-8", "replace"),
    )
    raise CommandError(LOAD_FAILED)


@command("module|load", -3, MODULE_FLAGS | Flag.NO_ASYNC_LOADING)
def cmd_module_load(s: Session, argv: list[bytes]) -> Reply:
    return _load(s, argv)


@command("module|loadex", -3, MODULE_FLAGS | Flag.NO_ASYNC_LOADING)
def cmd_module_loadex(s: Session, argv: list[bytes]) -> Reply:
    return _load(s, argv)


@command("module|unload", 3, MODULE_FLAGS | Flag.NO_ASYNC_LOADING)
def cmd_module_unload(s: Session, argv: list[bytes]) -> Reply:
    raise CommandError(NO_SUCH_MODULE)
