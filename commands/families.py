"""Imports every command family so the command table is complete.

The order is the order commands are registered in, which is the order COMMAND, COMMAND
LIST and COMMAND DOCS list them: keep it (new families go at the end). A family imports
no other family (commands/__init__.py), so each registers where it is listed here."""

# isort: off
from commands import durability, server, pubsub, client, acl, strings, keys, dump
from commands import migrate, scripting, info, config, introspection, branches
from commands import connection, hashes, lists, sets, streams, tables, temporal
from commands import transactions, zsets, replication, sentinel, geo, sort, lcs, bitops
from commands import hyperloglog, stream_groups, stream_info, snapshot_io, tracking
from commands import client_control, slowlog, latency, lolwut, debug, memory, cluster
from commands import redis_repl
# isort: on

__all__ = [
    "acl",
    "bitops",
    "branches",
    "client",
    "client_control",
    "cluster",
    "config",
    "connection",
    "debug",
    "dump",
    "durability",
    "geo",
    "hashes",
    "hyperloglog",
    "info",
    "introspection",
    "keys",
    "latency",
    "lcs",
    "lists",
    "lolwut",
    "memory",
    "migrate",
    "pubsub",
    "redis_repl",
    "replication",
    "scripting",
    "sentinel",
    "server",
    "sets",
    "slowlog",
    "snapshot_io",
    "sort",
    "stream_groups",
    "stream_info",
    "streams",
    "strings",
    "tables",
    "temporal",
    "tracking",
    "transactions",
    "zsets",
]
