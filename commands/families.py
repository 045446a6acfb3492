"""Imports every command family so the command table is complete."""

from commands import (
    client,
    connection,
    hashes,
    keys,
    lists,
    pubsub,
    server,
    sets,
    streams,
    strings,
    transactions,
    zsets,
)

__all__ = [
    "client",
    "connection",
    "hashes",
    "keys",
    "lists",
    "pubsub",
    "server",
    "sets",
    "streams",
    "strings",
    "transactions",
    "zsets",
]
