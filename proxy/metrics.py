"""`/metrics`: the server's live figures in Prometheus' format.

A custom prometheus-client Collector reads, at scrape time, the figures INFO reads:
the dispatcher's per-command counters (`ServerState.command_stats`, `error_stats`),
the connections, the resident set, the store's LSN, the durable stream's
(`Durability.info()`: durable LSN, backlog, segments, checkpoints, replay), the
replica links, and the object storage requests (`flusher.metered`). Nothing is
counted on a command's path for it: a scrape costs O(commands + replicas).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from commands.config_table import config_get_value
from commands.limits import rss_bytes
from commands.redis_table import REDIS_VERSION
from commands.session import ServerCore
from flusher.metered import PUT_LATENCY_BUCKETS, RequestStats

P = "temporalstore_"


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(P + name, doc, value=value)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(P + name, doc, value=value)


class ServerCollector(Collector):
    """Everything `/metrics` shows, read from `state` (and `requests`) per scrape."""

    def __init__(
        self, state: ServerCore, requests: RequestStats | None, put_cost: float = 0.0
    ) -> None:
        self.state = state
        self.requests = requests
        self.put_cost = put_cost

    def collect(self) -> Iterator[Metric]:
        yield from self._server()
        yield from self._commands()
        yield from self._durability()
        yield from self._requests()
        yield from self._replication()

    def _server(self) -> Iterator[Metric]:
        state = self.state
        info = InfoMetricFamily(P + "build", "The server's version and role")
        info.add_metric([], {"redis_version": REDIS_VERSION, "role": state.replication.role})
        yield info
        yield _gauge("uptime_seconds", "Seconds since the server started", state.uptime())
        yield _gauge("connected_clients", "RESP connections open", len(state.clients))
        yield _gauge(
            "blocked_clients",
            "Connections waiting in a blocking command",
            sum(1 for c in state.clients.values() if c.blocked),
        )
        yield _counter(
            "connections_received", "RESP connections accepted", state.stats.connections_received
        )
        yield _gauge("memory_used_bytes", "Resident set size of the process", rss_bytes())
        yield _gauge(
            "maxmemory_bytes",
            "The maxmemory limit (0: none)",
            int(config_get_value(state, "maxmemory")),
        )
        yield _gauge("lsn", "The newest committed version (LSN)", state.store.lsn)
        keys = GaugeMetricFamily(P + "keys", "Keys per database", labels=["db"])
        for db in state.store.dbs:
            if db.data:
                keys.add_metric([str(db.index)], len(db.data))
        yield keys
        yield _gauge("loading", "1 while replaying from object storage", int(state.loading))
        progress = state.loading_progress
        yield _gauge(
            "loading_records",
            "Records replayed so far by the replay under way (or the last one)",
            progress.get("loading_records", 0),
        )
        yield _gauge(
            "loading_segments_left",
            "Segments the replay under way has still to read",
            progress.get("loading_segments_left", 0) if state.loading else 0,
        )

    def _commands(self) -> Iterator[Metric]:
        stats = self.state.command_stats
        calls = CounterMetricFamily(P + "commands", "Calls by command", labels=["command"])
        errors = CounterMetricFamily(
            P + "command_errors",
            "Calls that failed (an error from the command) or were rejected (before it ran)",
            labels=["command", "kind"],
        )
        seconds = CounterMetricFamily(
            P + "command_seconds",
            "Time spent in each command (estimated from a sample of timed calls, as INFO "
            "commandstats' usec)",
            labels=["command"],
        )
        for name in sorted(stats):
            st = stats[name]
            calls.add_metric([name], st.calls)
            errors.add_metric([name, "failed"], st.failed)
            errors.add_metric([name, "rejected"], st.rejected)
            seconds.add_metric([name], st.usec / 1e6)
        yield calls
        yield errors
        yield seconds
        by_kind = CounterMetricFamily(P + "errors", "Error replies by kind", labels=["error"])
        for kind, n in sorted(self.state.error_stats.items()):
            by_kind.add_metric([kind], n)
        yield by_kind
        yield _counter(
            "error_replies", "Error replies of every kind", self.state.stats.error_replies
        )

    def _durability(self) -> Iterator[Metric]:
        dur = self.state.durability
        info: dict[str, Any] = dur.info() if dur is not None else {}

        def num(name: str) -> float:
            return float(info.get(name, 0))

        yield _gauge("durable_lsn", "The newest LSN in object storage", num("durable_lsn"))
        yield _gauge(
            "unflushed_bytes", "Committed bytes not yet in object storage", num("unflushed_bytes")
        )
        yield _gauge(
            "flush_lag_seconds",
            "Age of the oldest record not yet in object storage",
            num("flush_lag_ms") / 1000,
        )
        yield _counter("segments_written", "Segments written", num("segments_written"))
        yield _counter("records_written", "Records written in segments", num("records_written"))
        written = CounterMetricFamily(
            P + "segment_bytes_written",
            "Bytes of records written in segments, before and after compression",
            labels=["form"],
        )
        written.add_metric(["raw"], num("bytes_written_raw"))
        written.add_metric(["compressed"], num("bytes_written_compressed"))
        yield written
        yield _counter(
            "segment_put_failures", "Segment PUTs that failed (retried)", num("object_put_failures")
        )
        yield _gauge("fenced", "1 when another writer owns the storage", num("fenced"))
        yield _gauge(
            "checkpoint_age_seconds",
            "Seconds since the last checkpoint (or since the start)",
            num("last_checkpoint_age_s"),
        )
        yield _gauge("checkpoint_lsn", "LSN of the last checkpoint", num("last_checkpoint_lsn"))
        yield _counter("checkpoints_written", "Checkpoints written", num("checkpoints_written"))
        yield _gauge("replay_records", "Records replayed at the start", num("replay_records"))
        yield _gauge(
            "replay_segments", "Segments read by the replay at the start", num("replay_segments")
        )
        yield _gauge(
            "replay_seconds", "How long the replay at the start took", num("replay_seconds")
        )

    def _requests(self) -> Iterator[Metric]:
        st = self.requests
        if st is None:
            return
        requests = CounterMetricFamily(
            P + "object_requests", "Requests to object storage", labels=["op"]
        )
        errors = CounterMetricFamily(
            P + "object_request_errors", "Requests to object storage that failed", labels=["op"]
        )
        for op in sorted(st.requests):
            requests.add_metric([op], st.requests[op])
            errors.add_metric([op], st.errors[op])
        yield requests
        yield errors
        buckets: list[tuple[str, float]] = []
        total = 0
        for bound, n in zip([*PUT_LATENCY_BUCKETS, float("inf")], st.put_buckets, strict=True):
            total += n
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), total))
        latency = HistogramMetricFamily(
            P + "object_put_seconds",
            "Time each PUT to object storage took",
            buckets=buckets,
            sum_value=st.put_seconds,
        )
        yield latency
        yield _gauge(
            "object_put_cost_per_1000_dollars",
            "--s3-put-cost: the price of 1,000 PUTs",
            self.put_cost,
        )
        yield _counter(
            "object_put_cost_dollars",
            "Estimated cost of the PUTs so far (PUTs x --s3-put-cost / 1000)",
            st.put_cost(self.put_cost),
        )

    def _replication(self) -> Iterator[Metric]:
        repl = self.state.replication
        lsn = self.state.store.lsn
        yield _gauge(
            "replication_lag_seconds",
            "On a replica: how far behind its primary its data is (0 on a primary)",
            repl.lag_ms() / 1000,
        )
        yield _gauge("connected_replicas", "Replicas streaming from this node", len(repl.links))
        behind = GaugeMetricFamily(
            P + "replica_lag_versions",
            "Per replica: versions committed here that it has not acknowledged",
            labels=["replica"],
        )
        silent = GaugeMetricFamily(
            P + "replica_ack_age_seconds",
            "Per replica: seconds since its last acknowledgement",
            labels=["replica"],
        )
        now = time.time()
        for link in repl.links.values():
            name = f"{link.ip}:{link.port}"
            behind.add_metric([name], max(lsn - link.acked, 0))
            silent.add_metric([name], max(now - link.last_ack, 0.0))
        yield behind
        yield silent


def registry_for(
    state: ServerCore, requests: RequestStats | None, put_cost: float
) -> CollectorRegistry:
    """A registry of our own (not the library's global one) with the collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServerCollector(state, requests, put_cost))
    return registry
