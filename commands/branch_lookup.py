"""Finding a branch by name, and pointing a connection at one: shared by TS.BRANCH and
TS.MERGE (`commands.branches`) and TS.CHECKOUT / TS.DIFF BRANCH (`commands.temporal`)."""

from __future__ import annotations

from commands.errors import CommandError
from commands.session import Session
from store.branches import Branch

NO_BRANCH = "ERR no such branch '{}'"


def branch_name(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def get_branch(s: Session, name: bytes) -> Branch:
    b = s.store.branches.get(name)
    if b is None:
        raise CommandError(NO_BRANCH.format(branch_name(name)))
    assert isinstance(b, Branch)
    return b


def checkout_branch(s: Session, name: bytes) -> None:
    """TS.CHECKOUT <branch>: this connection reads and writes the branch."""
    get_branch(s, name)
    s.view_lsn = None
    s.branch = name
    s.select(s.dbi)
