"""The server's defaults, written once.

Every layer reads them from here: the CLI's flags (`proxy/cli.py`), the settings
commands see (`commands.session.Config`), the durable layer and the flusher. This
module sits in `store`, the one package every other may import.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerDefaults:
    host: str = "127.0.0.1"
    port: int = 6379
    storage: str = "file://./data"
    databases: int = 16
    log_level: str = "info"
    history: str = "versions:64"
    durability: str = "async"  # "async" | "sync"
    flush_interval_ms: int = 100
    segment_max_bytes: int = 8 * 1024 * 1024
    max_unflushed_bytes: int = 256 * 1024 * 1024
    write_wait_ms: int = 5000
    checkpoint_every_records: int = 1_000_000
    checkpoint_every_seconds: int = 300
    # ...or after this many bytes of records (as encoded, before compression) logged
    # since the last one: the tail a restart replays stays bounded (flusher.durable).
    checkpoint_every_bytes: int = 32 * 1024 * 1024
    keep_checkpoints: int = 2  # 0: never compact
    maxclients: int = 10000
    timeout: int = 0
    protected_mode: str = "yes"


DEFAULTS = ServerDefaults()
