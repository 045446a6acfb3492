"""Hiding secrets in text shown to people: replies, log lines, error messages.

A neutral home: the object stores (`flusher`) redact the URLs they name, and the
commands that show the storage URL (INFO) import it without reaching `flusher`.
"""

from __future__ import annotations

import re

_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s'\"]*@")


def redact(text: str) -> str:
    """`text` with the user-info of every URL in it hidden
    (``scheme://user:secret@host`` -> ``scheme://***@host``)."""
    return _USERINFO.sub(r"\1***@", text)
