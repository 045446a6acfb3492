"""The encodings Redis never converts back from, as subclasses of the builtin containers.

Kept out of the compiled build (tools/compiled.py): mypyc cannot compile a class that
inherits from `dict` or `set`, and as plain Python classes they behave the same in
both builds. `store.values` re-exports them.
"""

from __future__ import annotations


class HashTable(dict[bytes, bytes]):
    """A hash that has outgrown the listpack encoding (Redis never converts back)."""

    __slots__ = ()


class HashSet(set[bytes]):
    """A set that has outgrown the intset encoding (Redis never converts back)."""

    __slots__ = ()
