"""Imports every command family so the command table is complete.

The order is the order commands are registered in, which is the order COMMAND, COMMAND
LIST and COMMAND DOCS list them: keep it (new families go at the end)."""

# isort: off
from commands import durability, server, info, config, introspection
from commands import client, pubsub, acl, branches, connection, strings, hashes, keys
from commands import lists, sets, streams, tables, temporal, transactions, zsets
from commands import replication, sentinel
from commands import geo, sort, lcs
from commands import bitops, hyperloglog
from commands import scripting
from commands import stream_groups, stream_info
from commands import snapshot_io
from commands import dump
from commands import migrate
from commands import tracking
from commands import client_control, slowlog, latency, lolwut
from commands import debug, memory
from commands import cluster
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
