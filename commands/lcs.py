"""LCS and SUBSTR, Redis 7.0 exact.

LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
    The longest common subsequence of two strings (a missing key is ""), by Redis'
    dynamic programming table and its walk back from the end: with IDX, the matched
    ranges from last to first, each as [[a_start, a_end], [b_start, b_end]] (and its
    length WITHMATCHLEN), ranges shorter than MINMATCHLEN left out.
SUBSTR key start end
    GETRANGE by its old name.
"""

from __future__ import annotations

from commands.common import get_string, string_range
from commands.errors import SYNTAX, CommandError
from commands.parsing import get_int
from commands.registry import Flag, command
from commands.replies import Reply
from commands.session import Session

NOT_STRINGS = "ERR The specified keys must contain string values"
LEN_AND_IDX = "ERR If you want both the length and indexes, please just use IDX."
TOO_LONG = "ERR String too long for LCS"
TOO_BIG = "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"
UINT32_MAX = 2**32 - 1


def _table(a: bytes, b: bytes) -> list[list[int]]:
    """LCS lengths of every prefix pair: rows[i][j] for a[:i], b[:j]."""
    rows = [[0] * (len(b) + 1)]
    for ca in a:
        prev = rows[-1]
        row = [0]
        left = 0
        for j, cb in enumerate(b):
            left = prev[j] + 1 if ca == cb else max(prev[j + 1], left)
            row.append(left)
        rows.append(row)
    return rows


@command("lcs", -3, Flag.READONLY, 1, 2, 1)
def cmd_lcs(s: Session, argv: list[bytes]) -> Reply:
    try:
        a = get_string(s, argv[1])
        b = get_string(s, argv[2])
    except CommandError:
        raise CommandError(NOT_STRINGS) from None
    a = a or b""
    b = b or b""
    getlen = getidx = withmatchlen = False
    minmatchlen = 0
    n = len(argv)
    j = 3
    while j < n:
        opt = argv[j].lower()
        if opt == b"idx":
            getidx = True
        elif opt == b"len":
            getlen = True
        elif opt == b"withmatchlen":
            withmatchlen = True
        elif opt == b"minmatchlen" and j < n - 1:
            minmatchlen = max(get_int(argv[j + 1]), 0)
            j += 1
        else:
            raise CommandError(SYNTAX)
        j += 1
    if getlen and getidx:
        raise CommandError(LEN_AND_IDX)
    alen, blen = len(a), len(b)
    if alen >= UINT32_MAX - 1 or blen >= UINT32_MAX - 1:
        raise CommandError(TOO_LONG)
    if (alen + 1) * (blen + 1) * 4 > s.server.limits.proto_max_bulk:
        raise CommandError(TOO_BIG)
    lcs = _table(a, b)
    total = lcs[alen][blen]
    if getlen:
        return total
    result = bytearray(total)
    idx = total
    matches: list[Reply] = []
    a_start = alen  # alen: no range open
    a_end = b_start = b_end = 0
    i, k = alen, blen
    while i > 0 and k > 0:
        emit = False
        if a[i - 1] == b[k - 1]:
            result[idx - 1] = a[i - 1]
            if a_start == alen:
                a_start = a_end = i - 1
                b_start = b_end = k - 1
            elif a_start == i and b_start == k:
                a_start -= 1
                b_start -= 1
            else:
                emit = True
            if a_start == 0 or b_start == 0:
                emit = True
            idx -= 1
            i -= 1
            k -= 1
        else:
            if lcs[i - 1][k] > lcs[i][k - 1]:
                i -= 1
            else:
                k -= 1
            if a_start != alen:
                emit = True
        if emit:
            match_len = a_end - a_start + 1
            if getidx and (minmatchlen == 0 or match_len >= minmatchlen):
                m: list[Reply] = [[a_start, a_end], [b_start, b_end]]
                if withmatchlen:
                    m.append(match_len)
                matches.append(m)
            a_start = alen
    if getidx:
        return {b"matches": matches, b"len": total}
    return bytes(result)


@command("substr", 4, Flag.READONLY, 1, 1, 1)
def cmd_substr(s: Session, argv: list[bytes]) -> Reply:
    return string_range(s, argv)
