"""ACL users as Redis 7.0.15 keeps them.

A user has flags (on/off, nopass, sanitize-payload), SHA-256 password hashes and
selectors: the root one plus any `(...)` ones. A selector holds a command bitmap, the
first arguments allowed for otherwise blocked commands (`+select|0`), key patterns
(`~p`, `%R~p`, `%W~p`) and channel patterns (`&p`). `Users` applies ACL SETUSER rules
(all or none), describes users the way ACL LIST, ACL GETUSER and ACL SAVE show them
(Redis' best-fit choice of categories, then single commands), reads and writes the
aclfile, and keeps the ACL LOG.

Rules act on the command catalog and categories of `commands.acl_categories`. A command
bitmap is a Python int; a negative one (`+@all`) also allows commands not in the table,
as Redis' reserved "future commands" bit does.

Permission checks against a running command live in `commands.acl`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
from dataclasses import dataclass, field

from commands.acl_categories import CATEGORIES, CATEGORY_INDEX, Catalog, CommandEntry, catalog
from commands.resp import ProtocolError, split_inline

log = logging.getLogger("temporalstore")

# -- rule errors (ACLSetUserStringError) ----------------------------------------------------------

UNKNOWN_NAME = "Unknown command or category name in ACL"
SYNTAX_ERROR = "Syntax error"
KEYS_AFTER_ALL = (
    "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not "
    "have any effect. Try 'resetkeys' to start with an empty list of patterns"
)
CHANNELS_AFTER_ALL = (
    "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does "
    "not have any effect. Try 'resetchannels' to start with an empty list of channels"
)
NO_SUCH_PASSWORD = "The password you are trying to remove from the user does not exist"
BAD_HASH = (
    "The password hash must be exactly 64 characters and contain only lowercase hexadecimal "
    "characters"
)
FIRSTARG_OF_SUBCOMMAND = "Allowing first-arg of a subcommand is not supported"


class RuleError(Exception):
    """A rule that cannot be applied; `reason` is Redis' text for it."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


# -- users ---------------------------------------------------------------------------------------

READ, WRITE_PERM = 1, 2
ALL_PERMS = READ | WRITE_PERM
_SPACES = frozenset(b" \t\n\v\f\r\x00")
_HEX = frozenset(b"0123456789abcdef")


def has_spaces(text: bytes) -> bool:
    """Redis' ACLStringHasSpaces: whitespace or NUL (not allowed in names and patterns)."""
    return any(c in _SPACES for c in text)


def _cstr(op: bytes) -> bytes:
    """What C string functions see of an argument: up to its first NUL."""
    return op.split(b"\0", 1)[0]


def hash_password(password: bytes) -> bytes:
    return hashlib.sha256(password).hexdigest().encode()


def _valid_hash(h: bytes) -> bool:
    return len(h) == 64 and all(c in _HEX for c in h)


@dataclass(eq=False, slots=True)
class KeyPattern:
    pattern: bytes
    perms: int  # READ | WRITE_PERM

    def describe(self) -> bytes:
        prefix = {ALL_PERMS: b"~", READ: b"%R~", WRITE_PERM: b"%W~"}[self.perms]
        return prefix + self.pattern


@dataclass(eq=False, slots=True)
class Selector:
    root: bool = False
    allkeys: bool = False
    allchannels: bool = False
    allcommands: bool = False
    allowed: int = 0  # command bitmap; negative: also every command not in the catalog
    firstargs: dict[int, list[bytes]] = field(default_factory=dict)
    patterns: list[KeyPattern] = field(default_factory=list)
    channels: list[bytes] = field(default_factory=list)

    def copy(self) -> Selector:
        return Selector(
            self.root,
            self.allkeys,
            self.allchannels,
            self.allcommands,
            self.allowed,
            {k: list(v) for k, v in self.firstargs.items()},
            [KeyPattern(p.pattern, p.perms) for p in self.patterns],
            list(self.channels),
        )

    @property
    def unrestricted(self) -> bool:
        return self.allcommands and self.allkeys and self.allchannels

    def set_bits(self, mask: int, allow: bool) -> None:
        if allow:
            self.allowed |= mask
        else:
            self.allowed &= ~mask
            self.allcommands = False

    def change_perm(self, entry: CommandEntry, allow: bool) -> None:
        self.set_bits(entry.perm_mask(), allow)
        self.firstargs.pop(entry.id, None)

    def change_category(self, cat: Catalog, j: int, allow: bool) -> None:
        self.set_bits(cat.apply_mask[j], allow)
        for e in cat.members[j]:
            self.firstargs.pop(e.id, None)

    def apply(self, op: bytes, cat: Catalog | None) -> None:
        """Redis' ACLSetSelector. `cat` may be None only for rules naming no command."""
        word = _cstr(op).lower()
        if word in (b"allkeys", b"~*"):
            self.allkeys = True
            self.patterns.clear()
        elif word == b"resetkeys":
            self.allkeys = False
            self.patterns.clear()
        elif word in (b"allchannels", b"&*"):
            self.allchannels = True
            self.channels.clear()
        elif word == b"resetchannels":
            self.allchannels = False
            self.channels.clear()
        elif word in (b"allcommands", b"+@all"):
            self.allowed = -1
            self.allcommands = True
            self.firstargs.clear()
        elif word in (b"nocommands", b"-@all"):
            self.allowed = 0
            self.allcommands = False
            self.firstargs.clear()
        elif op[:1] in (b"~", b"%"):
            self._add_key_pattern(op)
        elif op[:1] == b"&":
            if self.allchannels:
                raise RuleError(CHANNELS_AFTER_ALL)
            pattern = op[1:]
            if has_spaces(pattern):
                raise RuleError(SYNTAX_ERROR)
            if pattern not in self.channels:
                self.channels.append(pattern)
            self.allchannels = False
        elif op[:1] in (b"+", b"-"):
            cat = cat or catalog()
            if op[1:2] == b"@":
                j = CATEGORY_INDEX.get(_cstr(op)[2:].decode("latin-1").lower())
                if j is None:
                    raise RuleError(UNKNOWN_NAME)
                self.change_category(cat, j, op[:1] == b"+")
            elif op[:1] == b"-":
                entry = cat.lookup(_cstr(op)[1:])
                if entry is None:
                    raise RuleError(UNKNOWN_NAME)
                self.change_perm(entry, False)
            else:
                self._allow_command(_cstr(op)[1:], cat)
        else:
            raise RuleError(SYNTAX_ERROR)

    def _add_key_pattern(self, op: bytes) -> None:
        if self.allkeys:
            raise RuleError(KEYS_AFTER_ALL)
        perms = ALL_PERMS
        offset = 1
        if op[:1] == b"%":
            perms = 0
            while offset < len(op):
                ch = op[offset : offset + 1].upper()
                offset += 1
                if ch == b"R" and not perms & READ:
                    perms |= READ
                elif ch == b"W" and not perms & WRITE_PERM:
                    perms |= WRITE_PERM
                elif ch == b"~":
                    break
                else:
                    raise RuleError(SYNTAX_ERROR)
            if not perms:
                raise RuleError(SYNTAX_ERROR)
        pattern = op[offset:]
        if has_spaces(pattern):
            raise RuleError(SYNTAX_ERROR)
        for p in self.patterns:
            if p.pattern == pattern:
                p.perms |= perms
                break
        else:
            self.patterns.append(KeyPattern(pattern, perms))
        self.allkeys = False

    def _allow_command(self, name: bytes, cat: Catalog) -> None:
        if b"|" not in name:
            entry = cat.lookup(name)
            if entry is None:
                raise RuleError(UNKNOWN_NAME)
            self.change_perm(entry, True)
            return
        base, _, first = name.rpartition(b"|")
        entry = cat.lookup(base)
        if entry is None:
            raise RuleError(UNKNOWN_NAME)
        if entry.parent is not None:
            raise RuleError(FIRSTARG_OF_SUBCOMMAND)
        if not first:
            raise RuleError(SYNTAX_ERROR)
        if entry.subs is not None:
            sub = cat.lookup(name)
            if sub is None:
                raise RuleError(UNKNOWN_NAME)
            self.change_perm(sub, True)
            return
        log.warning(
            "Deprecation warning: Allowing a first arg of an otherwise blocked command is a "
            "misuse of ACL and may get disabled in the future (offender: +%s)",
            name.decode("utf-8", "replace"),
        )
        allowed = self.firstargs.setdefault(entry.id, [])
        if all(a.lower() != first.lower() for a in allowed):
            allowed.append(first)

    # -- description ---------------------------------------------------------------------------

    def describe_commands(self, cat: Catalog) -> bytes:
        """Redis' ACLDescribeSelectorCommandRules: +@all or -@all, the categories that fit
        best, then the single commands (and first arguments) still different."""
        additive = self.allowed >= 0
        rules = [b"-@all" if additive else b"+@all"]
        fake = 0 if additive else -1
        temp = self.allowed
        applied: set[int] = set()
        while True:
            best = -1
            mindiff, maxsame = 2**31 - 1, 0
            for j in range(len(CATEGORIES)):
                if j in applied:
                    continue
                on = (temp & cat.member_mask[j]).bit_count()
                off = cat.member_count[j] - on
                diff, same = (off, on) if additive else (on, off)
                if same > diff and (diff < mindiff or (diff == mindiff and same > maxsame)):
                    best, mindiff, maxsame = j, diff, same
            if best == -1:
                break
            mask = cat.apply_mask[best]
            fake = fake | mask if additive else fake & ~mask
            temp = temp & ~mask if additive else temp | mask
            rules.append((b"+@" if additive else b"-@") + CATEGORIES[best].encode())
            applied.add(best)
        for e in cat.entries:
            userbit = self.allowed >> e.id & 1
            if userbit != fake >> e.id & 1:
                rules.append((b"+" if userbit else b"-") + e.name.encode())
                mask = e.perm_mask()
                fake = fake | mask if userbit else fake & ~mask
            if not userbit:
                for first in self.firstargs.get(e.id, ()):
                    rules.append(b"+" + e.name.encode() + b"|" + first)
        if fake != self.allowed:  # as Redis, refuse to describe rules that would differ
            raise AssertionError(f"ACL rules do not match the command bitmap: {rules!r}")
        return b" ".join(rules)

    def describe(self, cat: Catalog) -> bytes:
        """Redis' ACLDescribeSelector: keys, channels, commands."""
        parts: list[bytes] = []
        if self.allkeys:
            parts.append(b"~*")
        else:
            parts += [p.describe() for p in self.patterns]
        if self.allchannels:
            parts.append(b"&*")
        else:
            parts.append(b"resetchannels")
            parts += [b"&" + c for c in self.channels]
        parts.append(self.describe_commands(cat))
        return b" ".join(parts)

    def keys_text(self) -> bytes:
        if self.allkeys:
            return b"~*"
        return b" ".join(p.describe() for p in self.patterns)

    def channels_text(self) -> bytes:
        if self.allchannels:
            return b"&*"
        return b" ".join(b"&" + c for c in self.channels)


# User flags, in the order Redis describes them.
ON, OFF, NOPASS, SKIP_SANITIZE, SANITIZE = 1, 2, 4, 8, 16
USER_FLAGS = (
    (ON, b"on"),
    (OFF, b"off"),
    (NOPASS, b"nopass"),
    (SKIP_SANITIZE, b"skip-sanitize-payload"),
    (SANITIZE, b"sanitize-payload"),
)


@dataclass(eq=False, slots=True)
class User:
    name: bytes
    flags: int = OFF
    passwords: list[bytes] = field(default_factory=list)  # SHA-256 hex digests
    selectors: list[Selector] = field(default_factory=list)

    @property
    def root(self) -> Selector:
        return self.selectors[0]

    @property
    def enabled(self) -> bool:
        return not self.flags & OFF

    @property
    def nopass(self) -> bool:
        return bool(self.flags & NOPASS)

    @property
    def login_free(self) -> bool:
        """A connection starts authenticated as this user (Redis' clientSetDefaultAuth)."""
        return bool(self.flags & NOPASS) and self.enabled

    @property
    def unrestricted(self) -> bool:
        """Every command, key and channel: the dispatcher need not check anything."""
        return self.root.unrestricted

    def copy_from(self, other: User) -> None:
        """Redis' ACLCopyUser: take `other`'s rules, keep the name."""
        self.flags = other.flags
        self.passwords = list(other.passwords)
        self.selectors = [s.copy() for s in other.selectors]

    def flag_names(self) -> list[bytes]:
        return [name for bit, name in USER_FLAGS if self.flags & bit]

    def apply(self, op: bytes, pubsub_all: bool, cat: Catalog | None = None) -> None:
        """Redis' ACLSetUser: one rule (RuleError, changing nothing, if it is invalid)."""
        if not op:
            return
        word = _cstr(op).lower()
        if word == b"on":
            self.flags = self.flags & ~OFF | ON
        elif word == b"off":
            self.flags = self.flags & ~ON | OFF
        elif word == b"skip-sanitize-payload":
            self.flags = self.flags & ~SANITIZE | SKIP_SANITIZE
        elif word == b"sanitize-payload":
            self.flags = self.flags & ~SKIP_SANITIZE | SANITIZE
        elif word == b"nopass":
            self.flags |= NOPASS
            self.passwords.clear()
        elif word == b"resetpass":
            self.flags &= ~NOPASS
            self.passwords.clear()
        elif op[:1] in (b">", b"#"):
            digest = hash_password(op[1:]) if op[:1] == b">" else op[1:]
            if not _valid_hash(digest):
                raise RuleError(BAD_HASH)
            if digest not in self.passwords:
                self.passwords.append(digest)
            self.flags &= ~NOPASS
        elif op[:1] in (b"<", b"!"):
            digest = hash_password(op[1:]) if op[:1] == b"<" else op[1:]
            if not _valid_hash(digest):
                raise RuleError(BAD_HASH)
            if digest not in self.passwords:
                raise RuleError(NO_SUCH_PASSWORD)
            self.passwords.remove(digest)
        elif op[:1] == b"(" and op[-1:] == b")":
            selector = Selector(allchannels=pubsub_all)
            try:
                ops = split_inline(op[1:-1])
            except ProtocolError:
                ops = []  # sdssplitargs fails: Redis adds an empty selector
            for inner in ops:
                selector.apply(inner, cat)
            self.selectors.append(selector)
        elif word == b"clearselectors":
            del self.selectors[1:]
        elif word == b"reset":
            for rule in (b"resetpass", b"resetkeys", b"resetchannels"):
                self.apply(rule, pubsub_all, cat)
            if pubsub_all:
                self.apply(b"allchannels", pubsub_all, cat)
            for rule in (b"off", b"sanitize-payload", b"clearselectors", b"-@all"):
                self.apply(rule, pubsub_all, cat)
        else:
            self.root.apply(op, cat)

    def check_password(self, password: bytes) -> bool:
        """Redis' ACLCheckUserCredentials, for an existing user."""
        if not self.enabled:
            return False
        if self.flags & NOPASS:
            return True
        digest = hash_password(password)
        return any(hmac.compare_digest(digest, p) for p in self.passwords)

    def describe(self, cat: Catalog) -> bytes:
        """Redis' ACLDescribeUser: the rules that recreate this user (ACL LIST, aclfile)."""
        parts = self.flag_names() + [b"#" + p for p in self.passwords]
        parts.append(self.root.describe(cat))
        parts += [b"(" + s.describe(cat) + b")" for s in self.selectors[1:]]
        return b" ".join(parts)


def new_user(name: bytes, pubsub_all: bool) -> User:
    """Redis' ACLCreateUser: off, no passwords, a root selector with no permissions."""
    return User(name, selectors=[Selector(root=True, allchannels=pubsub_all)])


def default_user() -> User:
    """Redis' ACLCreateDefaultUser: +@all ~* &* on nopass."""
    u = new_user(b"default", False)
    for rule in (b"+@all", b"~*", b"&*", b"on", b"nopass"):
        u.apply(rule, False)
    return u


def merge_selector_args(args: list[bytes]) -> list[bytes] | int:
    """Redis' ACLMergeSelectorArguments: a `(...)` selector spread over several arguments
    becomes one; an unclosed one gives the index of its opening argument."""
    merged: list[bytes] = []
    opening = -1
    selector = b""
    for j, op in enumerate(args):
        if op[:1] == b"(" and op[-1:] != b")":  # (restarts an unclosed one, as Redis)
            selector, opening = op, j
            continue
        if opening != -1:
            selector += b" " + op
            if op[-1:] == b")":
                merged.append(selector)
                opening = -1
            continue
        merged.append(op)
    return opening if opening != -1 else merged


# -- the ACL log ------------------------------------------------------------------------------

DENIED_CMD, DENIED_KEY, DENIED_AUTH, DENIED_CHANNEL = 1, 2, 3, 4
REASONS = {DENIED_CMD: b"command", DENIED_KEY: b"key", DENIED_CHANNEL: b"channel",
           DENIED_AUTH: b"auth"}  # fmt: skip
LOG_GROUPING_MS = 60_000


@dataclass(eq=False, slots=True)
class LogEntry:
    count: int
    reason: int
    context: bytes  # b"toplevel" or b"multi"
    object: bytes
    username: bytes
    ctime_ms: int
    client_info: bytes

    def same_event(self, other: LogEntry) -> bool:
        return (
            self.reason == other.reason
            and self.context == other.context
            and abs(self.ctime_ms - other.ctime_ms) <= LOG_GROUPING_MS
            and self.object == other.object
            and self.username == other.username
        )


# -- the user table ----------------------------------------------------------------------------


def _c(text: bytes) -> str:
    return _cstr(text).decode("utf-8", "surrogateescape")


class AclFileError(ValueError):
    """The aclfile cannot be loaded: the message lists every problem, as Redis does."""


class Users:
    """Every ACL user by name, the default user (always present) and the ACL LOG.
    `params` is the server's `Config.params` (acl-pubsub-default, acllog-max-len). As in
    Redis, an aclfile replaces the default user's rules (requirepass included) with its
    own `user default` line, or with the initial ones when it has none."""

    def __init__(
        self, params: dict[str, str], requirepass: str | None = None, aclfile: str | None = None
    ) -> None:
        self.params = params
        self.default = default_user()
        self.table: dict[bytes, User] = {b"default": self.default}
        self.log: list[LogEntry] = []  # newest first
        if requirepass is not None:
            self.set_default_password(requirepass)
        if aclfile:
            loaded = self.parse_file(aclfile)
            if isinstance(loaded, str):
                raise AclFileError(loaded)
            self.replace(loaded)

    @property
    def pubsub_all(self) -> bool:
        return self.params.get("acl-pubsub-default", "resetchannels") == "allchannels"

    def get(self, name: bytes) -> User | None:
        return self.table.get(name)

    def names(self) -> list[bytes]:
        return sorted(self.table)

    def auth_required(self) -> bool:
        """Redis' authRequired, for a connection not authenticated: unless the default
        user is on and nopass."""
        return not self.default.login_free

    def set_default_password(self, password: str | None) -> None:
        """requirepass: the default user's only password (None: nopass), as Redis'
        ACLUpdateDefaultUserPassword."""
        self.default.apply(b"resetpass", self.pubsub_all)
        if password is None:
            self.default.apply(b"nopass", self.pubsub_all)
        else:
            self.default.apply(b">" + password.encode("utf-8", "surrogateescape"), False)

    def set_user(self, name: bytes, args: list[bytes]) -> tuple[User, User | None]:
        """ACL SETUSER: apply every rule or none. Returns the user and, when it existed,
        a copy of it as it was; raises RuleError with Redis' whole message."""
        merged = merge_selector_args(args)
        if isinstance(merged, int):
            raise RuleError(
                f"Unmatched parenthesis in acl selector starting at '{_c(args[merged])}'."
            )
        user = self.table.get(name)
        temp = new_user(name, self.pubsub_all)
        if user is not None:
            temp.copy_from(user)
        cat = catalog()
        for op in merged:
            try:
                temp.apply(op, self.pubsub_all, cat)
            except RuleError as e:
                raise RuleError(f"Error in ACL SETUSER modifier '{_c(op)}': {e.reason}") from None
        before = None
        if user is None:
            user = self.table[name] = new_user(name, self.pubsub_all)
        else:
            before = new_user(name, False)
            before.copy_from(user)
        user.copy_from(temp)
        return user, before

    def delete(self, name: bytes) -> User | None:
        return self.table.pop(name, None)

    def describe(self, user: User) -> bytes:
        return user.describe(catalog())

    def list_lines(self) -> list[bytes]:
        """ACL LIST: `user <name> <rules>` for every user, by name."""
        cat = catalog()
        return [b"user " + n + b" " + self.table[n].describe(cat) for n in self.names()]

    # -- the aclfile ---------------------------------------------------------------------------

    def parse_file(self, path: str) -> dict[bytes, User] | str:
        """Redis' ACLLoadFromFile, without applying it: the users the file defines (the
        default user included), or every error found, as one line."""
        try:
            with open(path, "rb") as f:
                text = f.read()
        except OSError as e:
            return f"Error loading ACLs, opening file '{path}': {e.strerror}"
        errors: list[str] = []
        users: dict[bytes, User] = {}
        cat = catalog()
        for n, raw in enumerate(text.split(b"\n"), 1):
            line = raw.strip(b" \t\r\n")
            if not line:
                continue
            argv = line.split(b" ")
            if argv[0] != b"user" or len(argv) < 2:
                errors.append(
                    f"{path}:{n} should start with user keyword followed by the username. "
                )
                continue
            name = argv[1]
            if has_spaces(name):
                errors.append(f"'{path}:{n}: username '{_c(name)}' contains invalid characters. ")
                continue
            if name in users:
                errors.append(f"WARNING: Duplicate user '{_c(name)}' found on line {n}. ")
                continue
            user = users[name] = new_user(name, self.pubsub_all)
            merged = merge_selector_args(argv[2:])
            if isinstance(merged, int):
                errors.append(f"{path}:{n}: Unmatched parenthesis in selector definition.")
                continue
            syntax_error = False
            for op in merged:
                op = op.strip(b"\t\r\n")
                try:
                    user.apply(op, self.pubsub_all, cat)
                except RuleError as e:
                    if e.reason == UNKNOWN_NAME:
                        errors.append(
                            f"{path}:{n}: Error in applying operation '{_c(op)}': {e.reason}. "
                        )
                    elif not syntax_error:
                        errors.append(f"{path}:{n}: {e.reason}. ")
                        syntax_error = True
        if errors:
            return (
                "".join(errors) + "WARNING: ACL errors detected, no change to the previously "
                "active ACL rules was performed"
            )
        return users

    def replace(self, users: dict[bytes, User]) -> list[User]:
        """Install users read from the aclfile; the default user object stays (it takes
        the file's rules, or the initial ones). Returns the users replaced."""
        self.default.copy_from(users.pop(b"default") if b"default" in users else default_user())
        old = [u for n, u in self.table.items() if n != b"default"]
        self.table = {b"default": self.default, **users}
        return old

    def save_file(self, path: str) -> bool:
        """ACL SAVE: every user as an aclfile line, written to a temporary file and
        renamed over the aclfile."""
        data = b"".join(line + b"\n" for line in self.list_lines())
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError as e:
            log.warning("ACL SAVE: %s", e)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        return True

    # -- the log -------------------------------------------------------------------------------

    def add_log(self, entry: LogEntry) -> None:
        """Redis' addACLLogEntry: a recent matching entry (among the newest 10) is counted
        again and moved to the head; otherwise the new one goes first."""
        for i, current in enumerate(self.log[:10]):
            if current.same_event(entry):
                del self.log[i]
                current.client_info = entry.client_info
                current.ctime_ms = entry.ctime_ms
                current.count += 1
                self.log.insert(0, current)
                return
        self.log.insert(0, entry)
        try:
            max_len = int(self.params.get("acllog-max-len", "128"))
        except ValueError:
            max_len = 128
        del self.log[max_len:]
