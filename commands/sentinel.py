"""The Sentinel protocol, answered by every node of a group (`--group`), so that
Sentinel-aware clients (redis-py's `Sentinel`, ioredis with `sentinels`) find the
primary and the replicas by asking the nodes themselves.

SENTINEL GET-MASTER-ADDR-BY-NAME name   [ip, port] of the primary (nil: unknown name)
SENTINEL MASTERS | MASTER name          the primary, with Sentinel's fields
SENTINEL REPLICAS name | SLAVES name    the replicas, with Sentinel's fields
SENTINEL SENTINELS name                 the group's other nodes, as sentinels
SENTINEL MYID                           this node's id

What a node knows of its group (`GroupView`: the primary's address, the replicas,
the nodes) is kept up to date by the proxy: from etcd's leader key and node registry
in failover mode, or from the node's own role otherwise. When the primary changes,
`+switch-master` is published to subscribers, as Sentinel does:
`<name> <old-ip> <old-port> <new-ip> <new-port>`.
"""

from __future__ import annotations

import asyncio

from commands.channels import publish
from commands.errors import CommandError
from commands.registry import Flag, command, container
from commands.replies import Reply
from commands.replstate import GroupView
from commands.session import ServerCore, Session

NO_SUCH_MASTER = "ERR No such master with that name"
NOT_IN_GROUP = "ERR this node is in no group (start it with --group or --etcd-endpoints)"

S = Flag.ADMIN | Flag.SENTINEL | Flag.LOADING | Flag.STALE | Flag.NOSCRIPT

container("sentinel", -2, S)


def _group(s: Session, name: bytes | None = None) -> GroupView:
    group = s.server.replication.group
    if group is None:
        raise CommandError(NOT_IN_GROUP)
    if name is not None and name.decode(errors="replace") != group.name:
        raise CommandError(NO_SUCH_MASTER)
    return group


def _fields(pairs: list[tuple[str, object]]) -> dict[bytes, Reply]:
    """An instance's fields: a map (flat pairs in RESP2), every value a string."""
    return {k.encode(): str(v).encode() for k, v in pairs}


def _instance(
    group: GroupView, name: str, host: str, port: int, runid: str, flags: str
) -> list[tuple[str, object]]:
    """The fields Sentinel gives every instance first."""
    return [
        ("name", name),
        ("ip", host),
        ("port", port),
        ("runid", runid),
        ("flags", flags),
        ("link-pending-commands", 0),
        ("link-refcount", 1),
        ("last-ping-sent", 0),
        ("last-ok-ping-reply", 0),
        ("last-ping-reply", 0),
        ("down-after-milliseconds", group.down_after_ms),
    ]


def _master(group: GroupView) -> dict[bytes, Reply]:
    assert group.primary is not None
    host, port = group.primary
    return _fields(
        [
            *_instance(group, group.name, host, port, group.primary_id, "master"),
            ("info-refresh", 0),
            ("role-reported", "master"),
            ("role-reported-time", 0),
            ("config-epoch", group.epoch),
            ("num-slaves", len(group.replicas)),
            ("num-other-sentinels", max(0, len(group.nodes) - 1)),
            ("quorum", len(group.nodes) // 2 + 1),
            ("failover-timeout", group.down_after_ms * 2),
            ("parallel-syncs", 1),
        ]
    )


@command("sentinel|get-master-addr-by-name", 3, S)
def cmd_get_master_addr(s: Session, argv: list[bytes]) -> Reply:
    group = _group(s)
    if argv[2].decode(errors="replace") != group.name or group.primary is None:
        return None
    host, port = group.primary
    return [host.encode(), str(port).encode()]


@command("sentinel|masters", 2, S)
def cmd_masters(s: Session, argv: list[bytes]) -> Reply:
    group = _group(s)
    return [] if group.primary is None else [_master(group)]


@command("sentinel|master", 3, S)
def cmd_master(s: Session, argv: list[bytes]) -> Reply:
    group = _group(s, argv[2])
    if group.primary is None:
        raise CommandError(NO_SUCH_MASTER)
    return _master(group)


def _replicas(s: Session, argv: list[bytes]) -> Reply:
    group = _group(s, argv[2])
    primary = group.primary or ("", 0)
    return [
        _fields(
            [
                *_instance(group, f"{host}:{port}", host, port, node_id, "slave"),
                ("info-refresh", 0),
                ("role-reported", "slave"),
                ("role-reported-time", 0),
                ("master-link-down-time", 0),
                ("master-link-status", "ok"),
                ("master-host", primary[0]),
                ("master-port", primary[1]),
                ("slave-priority", 100),
                ("slave-repl-offset", offset),
                ("replica-announced", 1),
            ]
        )
        for host, port, node_id, offset in group.replicas
    ]


@command("sentinel|replicas", 3, S)
def cmd_replicas(s: Session, argv: list[bytes]) -> Reply:
    return _replicas(s, argv)


@command("sentinel|slaves", 3, S)
def cmd_slaves(s: Session, argv: list[bytes]) -> Reply:
    return _replicas(s, argv)


@command("sentinel|sentinels", 3, S)
def cmd_sentinels(s: Session, argv: list[bytes]) -> Reply:
    group = _group(s, argv[2])
    return [
        _fields(
            [
                *_instance(group, node_id, host, port, node_id, "sentinel"),
                ("last-hello-message", 0),
                ("voted-leader", "?"),
                ("voted-leader-epoch", 0),
            ]
        )
        for host, port, node_id in group.nodes
        if node_id != group.my_id
    ]


@command("sentinel|myid", 2, S)
def cmd_myid(s: Session, argv: list[bytes]) -> Reply:
    return _group(s).my_id.encode()


SWITCH_NOTICE_DELAY_S = 2.5
"""How long after the view names a new primary `+switch-master` is published. ioredis
(5.x, `failoverDetector: true`) ends a client for good ("Connection is closed.") when
its detector hears the notice while the client is resolving the primary from a
sentinel (SentinelConnector.connect throws when disconnected mid-resolve). After a
kill -9 the client is in its reconnect loop, resolving again at every try, until it
finds the new primary: published 0.25 s after the view changed, the notice still met
a resolve once (a fresh-clone run of test_an_ioredis_client_writes_on_after_a_group_
failover). By 2.5 s a client retrying as ioredis does by default
(at most 2 s between tries) has found the new primary, and its detector of the old one
is gone: the new one's notice costs a reconnect, never the client. Clients of an old
primary that is still alive need not wait for it: a node that stops being primary
closes its clients' connections (`Node.step_down`), as Sentinel has them killed."""


def set_group(server: ServerCore, view: GroupView) -> None:
    """Take a new view of the group; a new primary is announced on `+switch-master`
    (`SWITCH_NOTICE_DELAY_S` later, where an event loop runs)."""
    old = server.replication.group
    server.replication.group = view
    if old is not None and old.primary is not None and view.primary not in (None, old.primary):
        assert view.primary is not None
        msg = f"{view.name} {old.primary[0]} {old.primary[1]} {view.primary[0]} {view.primary[1]}"
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: the state driven directly
            publish(server, b"+switch-master", msg.encode())
            return
        loop.call_later(SWITCH_NOTICE_DELAY_S, publish, server, b"+switch-master", msg.encode())
