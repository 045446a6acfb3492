"""COMMAND DOCS for the commands Redis 7.0 does not have (WAITAOF and our TS.*
verbs), in the typed form `commands.introspection` re-encodes, so redis-cli shows hints."""

from __future__ import annotations

from typing import Any


def arg(
    name: str,
    kind: str,
    token: str | None = None,
    optional: bool = False,
    multiple: bool = False,
    args: list[dict[str, Any]] | None = None,
    key_spec: int | None = None,
) -> dict[str, Any]:
    pairs: list[list[Any]] = [["name", name], ["type", kind]]
    if key_spec is not None:
        pairs.append(["key_spec_index", key_spec])
    if token is not None:
        pairs.append(["token", token])
    flags = [{"+": f} for f, on in (("optional", optional), ("multiple", multiple)) if on]
    if flags:
        pairs.append(["flags", {"~": flags}])
    if args is not None:
        pairs.append(["arguments", args])
    return {"%": pairs}


KEY = arg("key", "key", key_spec=0)


def at(name: str = "at", key_scoped: bool = False, token: str | None = None,
       optional: bool = False) -> dict[str, Any]:  # fmt: skip
    choices = [
        arg("lsn", "integer", token="VERSION"),
        arg("unix-time-milliseconds", "unix-time", token="TIME"),
        arg("snapshot", "string", token="SNAPSHOT"),
    ]
    if key_scoped:
        choices.append(arg("versions-back", "integer", token="BACK"))
    else:
        choices.append(arg("branch", "string", token="BRANCH"))
    if token is None:
        return arg(name, "oneof", optional=optional, args=choices)
    return arg(name, "block", token=token, optional=optional,
               args=[arg("point", "oneof", args=choices)])  # fmt: skip


def policy_args() -> list[dict[str, Any]]:
    return [
        arg("durability", "oneof", token="DURABILITY", optional=True,
            args=[arg("async", "pure-token", token="ASYNC"),
                  arg("sync", "pure-token", token="SYNC")]),
        arg("retain", "oneof", token="RETAIN", optional=True,
            args=[arg("all", "pure-token", token="ALL"),
                  arg("versions", "integer", token="VERSIONS"),
                  arg("milliseconds", "integer", token="MS")]),
        arg("snapshot-every", "integer", token="SNAPSHOT-EVERY", optional=True),
    ]  # fmt: skip


TABLE = arg("namespace:table", "string")

# name -> (summary, complexity, arguments)
DOCS: dict[str, tuple[str, str, list[dict[str, Any]]]] = {
    "waitaof": (
        "Wait until this connection's writes are durable in object storage",
        "O(1)",
        [arg("numlocal", "integer"), arg("numreplicas", "integer"), arg("timeout", "integer")],
    ),
    "ts.waitdurable": (
        "Wait until this connection's writes are durable; return the durable LSN",
        "O(1)",
        [arg("timeout", "integer")],
    ),
    "ts.fault": (
        "Inject object storage faults (servers started with --fault-injection yes)",
        "O(1)",
        [
            arg(
                "fault",
                "oneof",
                args=[
                    arg(
                        "outage",
                        "oneof",
                        token="OUTAGE",
                        args=[
                            arg("on", "pure-token", token="ON"),
                            arg("off", "pure-token", token="OFF"),
                        ],
                    ),
                    arg("milliseconds", "integer", token="LATENCY"),
                    arg("max-milliseconds", "integer", token="JITTER"),
                    arg("probability", "double", token="ERROR-RATE"),
                    arg("count", "integer", token="FAIL-AFTER-PUT"),
                    arg("reset", "pure-token", token="RESET"),
                ],
            )
        ],
    ),
    "ts.version": ("Return the current version (LSN)", "O(1)", []),
    "ts.asof": (
        "Return a key's value at a point in time",
        "O(log N) to find the version plus at most SNAPSHOT-EVERY undos",
        [KEY, at(key_scoped=True)],
    ),
    "ts.history": (
        "List a key's versions",
        "O(log N + M) where M is the versions returned",
        [
            KEY,
            at("from", True, "FROM", True),
            at("to", True, "TO", True),
            arg("count", "integer", token="COUNT", optional=True),
            arg("rev", "pure-token", token="REV", optional=True),
            arg("author", "string", token="AUTHOR", optional=True),
            arg("withvalues", "pure-token", token="WITHVALUES", optional=True),
        ],
    ),
    "ts.meta": (
        "Attach an author and message to this connection's following writes",
        "O(1)",
        [
            arg(
                "meta",
                "oneof",
                args=[
                    arg(
                        "author",
                        "block",
                        args=[
                            arg("name", "string", token="AUTHOR"),
                            arg("text", "string", token="MESSAGE", optional=True),
                        ],
                    ),
                    arg("reset", "pure-token", token="RESET"),
                ],
            )
        ],
    ),
    "ts.seal": (
        "Seal a named snapshot of the current version",
        "O(1)",
        [arg("name", "string"), arg("text", "string", token="TRIGGER", optional=True)],
    ),
    "ts.unseal": ("Drop a sealed snapshot", "O(1)", [arg("name", "string")]),
    "ts.shardseal": (
        "Seal a named snapshot on this shard only (cluster mode: what TS.SEAL sends the others)",
        "O(1)",
        [arg("name", "string"), arg("text", "string", token="TRIGGER", optional=True)],
    ),
    "ts.shardunseal": (
        "Drop a sealed snapshot on this shard only",
        "O(1)",
        [arg("name", "string")],
    ),
    "ts.snapshots": ("List sealed snapshots", "O(N)", []),
    "ts.checkout": (
        "Point this connection at a branch, a past point in time, or HEAD",
        "O(1) for a branch or HEAD; O(keys) to build a past view",
        [
            arg(
                "target",
                "oneof",
                args=[
                    arg("head", "pure-token", token="HEAD"),
                    at("at", False, "AT"),
                    arg("branch", "string"),
                ],
            )
        ],
    ),
    "ts.diff": (
        "List keys that differ between two points in time or branches, in key order",
        "O(K log K) where K is the number of keys written between the two points",
        [
            at("from"),
            at("to"),
            arg("pattern", "pattern", token="MATCH", optional=True),
            arg("count", "integer", token="COUNT", optional=True),
            arg("after", "string", token="AFTER", optional=True),
        ],
    ),
    "ts.revert": (
        "Write a key's value at a point in time as a new version",
        "O(log N) plus the value's size",
        [KEY, at(key_scoped=True)],
    ),
    "ts.restore": (
        "Revert every matching key to a point in time",
        "O(keys)",
        [at(), arg("pattern", "pattern", token="MATCH", optional=True)],
    ),
    "ts.export": (
        "One page of a point of history as JSON Lines (docs/export-format.md)",
        "O(keys) for the first page, then O(log N + COUNT)",
        [
            at(),
            arg("pattern", "pattern", token="MATCH", optional=True),
            arg("count", "integer", token="COUNT", optional=True),
            arg("cursor", "string", token="CURSOR", optional=True),
        ],
    ),
    "ts.import": (
        "Write exported key lines as one new version",
        "O(N) for the N lines",
        [
            arg("check", "pure-token", token="CHECK", optional=True),
            arg("replace", "pure-token", token="REPLACE", optional=True),
            arg("line", "string", multiple=True),
        ],
    ),
    "ts.branch": ("Create, drop and list branches", "Depends on subcommand.", []),
    "ts.branch|create": (
        "Create a branch of the main line or of a branch (O(1): nothing is copied)",
        "O(1)",
        [
            arg("name", "string"),
            arg(
                "from",
                "oneof",
                token="FROM",
                optional=True,
                args=[
                    at("point"),
                    arg(
                        "parent",
                        "block",
                        args=[arg("branch", "string", token="BRANCH"), at("at", False, "AT", True)],
                    ),
                ],
            ),
        ],
    ),
    "ts.branch|drop": (
        "Drop a branch (CASCADE: and the branches forked from it)",
        "O(1)",
        [arg("name", "string"), arg("cascade", "pure-token", token="CASCADE", optional=True)],
    ),
    "ts.branch|list": ("List branches", "O(N)", []),
    "ts.merge": (
        "Apply a branch's changes to the main line or another branch",
        "O(keys changed)",
        [
            arg("source", "string"),
            arg("target", "string", token="INTO", optional=True),
            arg(
                "strategy",
                "oneof",
                token="STRATEGY",
                optional=True,
                args=[
                    arg("fail", "pure-token", token="FAIL"),
                    arg("ours", "pure-token", token="OURS"),
                    arg("theirs", "pure-token", token="THEIRS"),
                ],
            ),
        ],
    ),
    "ts.table": ("Declare and inspect tables", "Depends on subcommand.", []),
    "ts.table|create": (
        "Declare a table with its own durability and retention",
        "O(1)",
        [TABLE, *policy_args()],
    ),
    "ts.table|alter": ("Change a table's policy", "O(1)", [TABLE, *policy_args()]),
    "ts.table|info": ("Show a table's policy and state", "O(keys)", [TABLE]),
    "ts.table|list": ("List tables", "O(N)", []),
    "ts.table|drop": ("Forget a table (its keys stay)", "O(1)", [TABLE]),
}


def docs_for(name: str) -> dict[str, Any] | None:
    entry = DOCS.get(name)
    if entry is None:
        return None
    summary, complexity, args = entry
    pairs: list[list[Any]] = [
        ["summary", summary],
        ["since", "7.2.0" if name == "waitaof" else "1.0.0"],
        ["group", "generic"],
        ["complexity", complexity],
    ]
    if args:
        pairs.append(["arguments", args])
    return {"%": pairs}
