"""Imports every command family so the command table is complete."""

from commands import (
    branches,
    client,
    connection,
    durability,
    hashes,
    keys,
    lists,
    pubsub,
    server,
    sets,
    streams,
    strings,
    tables,
    temporal,
    transactions,
    zsets,
)

__all__ = [
    "branches",
    "client",
    "connection",
    "durability",
    "hashes",
    "keys",
    "lists",
    "pubsub",
    "server",
    "sets",
    "streams",
    "strings",
    "tables",
    "temporal",
    "transactions",
    "zsets",
]
