"""docker/: the compose file parses, wires MinIO (healthy before the bucket step), etcd
(healthy) and three nodes of one group that start once the bucket exists, Prometheus
scraping each node's /metrics and Grafana with a provisioned dashboard whose every
query names metrics we export; every
TEMPORALSTORE_* variable it sets is a real flag, and `temporalstore serve` reads each
node's environment as that node; the image installs every package. The three-shard
example (compose.cluster.yaml) is checked the same way, with its `cluster create`
script. (No Docker engine runs here; `docker compose -f docker/compose.yaml config`
is the check on a machine that has one.)"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.cli import SERVE_FLAGS, build_parser, config_from_args

DOCKER = Path(__file__).resolve().parent.parent / "docker"
NODES = {"node1": "6379", "node2": "6380", "node3": "6381"}


def _services() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())["services"]  # type: ignore[no-any-return]


def test_compose_wires_minio_bucket_etcd_and_three_nodes() -> None:
    services = _services()
    assert set(services) == {"minio", "create-bucket", "etcd", *NODES, "prometheus", "grafana"}
    assert "ready" in services["minio"]["healthcheck"]["test"]
    assert services["create-bucket"]["depends_on"] == {"minio": {"condition": "service_healthy"}}
    etcd = services["etcd"]
    assert etcd["healthcheck"]["test"][-2:] == ["endpoint", "health"]
    assert "--advertise-client-urls=http://etcd:2379" in etcd["command"]
    flags = {"TEMPORALSTORE_" + name.upper().replace("-", "_") for name, _, _ in SERVE_FLAGS}
    storages = set()
    for name, published in NODES.items():
        node = services[name]
        assert node["depends_on"] == {
            "create-bucket": {"condition": "service_completed_successfully"},
            "etcd": {"condition": "service_healthy"},
        }
        assert node["build"]["dockerfile"] == "docker/Dockerfile"
        # node1 also publishes its explorer and /metrics
        http = ["9121:9121"] if name == "node1" else []
        assert node["ports"] == [f"{published}:6379", *http]
        env = node["environment"]
        for var in env:
            if var.startswith("TEMPORALSTORE_"):
                assert var in flags, var
        assert env["TEMPORALSTORE_ETCD_ENDPOINTS"] == "http://etcd:2379"
        assert env["TEMPORALSTORE_S3_ENDPOINT_URL"] == "http://minio:9000"
        storages.add(env["TEMPORALSTORE_STORAGE"])
    (storage,) = storages  # one prefix for the group
    bucket = storage.removeprefix("s3://").split("/")[0]
    assert f"local/{bucket}" in services["create-bucket"]["entrypoint"]


def _image_config(environment: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The server's config from the image's command line (its CMD) with a service's
    environment."""
    for var, value in environment.items():
        monkeypatch.setenv(var, str(value))
    cmd = next(
        line for line in (DOCKER / "Dockerfile").read_text().splitlines() if line.startswith("CMD")
    )
    return config_from_args(build_parser().parse_args(["serve", *json.loads(cmd[3:])]))


@pytest.mark.parametrize("name", sorted(NODES))
def test_each_node_reads_its_environment_as_that_node(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _image_config(_services()[name]["environment"], monkeypatch)
    assert (config.host, config.port) == ("0.0.0.0", 6379)
    assert config.group == "temporalstore"
    assert (config.announce_host, config.announce_port) == (name, 6379)
    assert config.storage == "s3://temporalstore/main"
    assert config.s3_endpoint_url == "http://minio:9000"
    assert config.params["protected-mode"] == "no"
    assert (config.http_bind, config.http_port) == ("0.0.0.0", 9121)
    assert config.s3_put_cost == 0.005


def test_dockerfile_installs_every_package() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    for package in ("proxy", "commands", "store", "flusher", "replay"):
        assert f"COPY {package} ./{package}" in text
    assert "pip install" in text and "temporalstore" in text


def test_prometheus_scrapes_every_node() -> None:
    services = _services()
    assert "./prometheus.yml:/etc/prometheus/prometheus.yml:ro" in services["prometheus"]["volumes"]
    config = yaml.safe_load((DOCKER / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    (static,) = job["static_configs"]
    port = services["node1"]["environment"]["TEMPORALSTORE_HTTP_PORT"]
    assert static["targets"] == [f"{name}:{port}" for name in NODES]


def _exported() -> set[str]:
    """Every metric name /metrics can show (families and their samples' names)."""
    from commands.session import ServerState
    from flusher.metered import RequestStats
    from proxy.metrics import ServerCollector
    from store import Store

    names: set[str] = set()
    for family in ServerCollector(ServerState(Store()), RequestStats(), 0.005).collect():
        names.add(family.name)
        names.update(s.name for s in family.samples)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names.update(family.name + x for x in ("_bucket", "_sum", "_count"))
    return names


def test_grafana_dashboard_is_provisioned_and_names_only_our_metrics() -> None:
    grafana = _services()["grafana"]
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in grafana["volumes"]
    assert "./grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana["volumes"]
    provider = yaml.safe_load(
        (DOCKER / "grafana/provisioning/dashboards/temporalstore.yaml").read_text()
    )
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    datasource = yaml.safe_load(
        (DOCKER / "grafana/provisioning/datasources/prometheus.yaml").read_text()
    )["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090"
    dashboard = json.loads((DOCKER / "grafana/dashboards/temporalstore.json").read_text())
    exported = _exported()
    seen: set[str] = set()
    assert dashboard["panels"]
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == datasource["uid"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(re.findall(r"\btemporalstore_[a-z_]+", target["expr"]))
            assert names, target["expr"]
            assert names <= exported, (panel["title"], names - exported)
            seen |= names
    # The figures each have a panel.
    for name in (
        "temporalstore_commands_total",
        "temporalstore_command_errors_total",
        "temporalstore_command_seconds_total",
        "temporalstore_connected_clients",
        "temporalstore_memory_used_bytes",
        "temporalstore_lsn",
        "temporalstore_durable_lsn",
        "temporalstore_unflushed_bytes",
        "temporalstore_flush_lag_seconds",
        "temporalstore_object_put_seconds_bucket",
        "temporalstore_object_request_errors_total",
        "temporalstore_segments_written_total",
        "temporalstore_segment_bytes_written_total",
        "temporalstore_checkpoint_age_seconds",
        "temporalstore_replay_records",
        "temporalstore_replay_seconds",
        "temporalstore_replica_lag_versions",
        "temporalstore_object_put_cost_dollars_total",
    ):
        assert name in seen, name


# --------------------------------------------------------------------------- cluster

SHARDS = ("shard1", "shard2", "shard3")


def _cluster_services() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.cluster.yaml").read_text())["services"]  # type: ignore[no-any-return]


def _create_script() -> str:
    """The cluster-create service's shell script, as the shell gets it (compose turns
    `$$` into `$`)."""
    (script,) = _cluster_services()["cluster-create"]["command"]
    return str(script).replace("$$", "$")


def test_cluster_compose_wires_three_shards_and_cluster_create() -> None:
    """docker/compose.cluster.yaml: MinIO, etcd, three shards (--cluster-enabled yes,
    each on its own storage prefix), and a one-shot `temporalstore cluster create`
    naming each shard by the address it announces; its script is valid shell."""
    services = _cluster_services()
    assert set(services) == {
        "minio",
        "create-bucket",
        "etcd",
        *SHARDS,
        "cluster-create",
        "redis-cli",
    }
    flags = {"TEMPORALSTORE_" + name.upper().replace("-", "_") for name, _, _ in SERVE_FLAGS}
    announced, storages = [], set()
    for name in SHARDS:
        shard = services[name]
        assert shard["depends_on"] == {
            "create-bucket": {"condition": "service_completed_successfully"},
            "etcd": {"condition": "service_healthy"},
        }
        env = shard["environment"]
        assert all(var in flags for var in env if var.startswith("TEMPORALSTORE_")), env
        assert "TEMPORALSTORE_GROUP" not in env  # not with --cluster-enabled yet
        announced.append(
            f"{env['TEMPORALSTORE_ANNOUNCE_HOST']}:{env['TEMPORALSTORE_ANNOUNCE_PORT']}"
        )
        storages.add(env["TEMPORALSTORE_STORAGE"])
    assert len(storages) == 3  # a prefix per shard
    create = services["cluster-create"]
    assert create["image"] == services["shard1"]["image"]
    assert set(create["depends_on"]) == set(SHARDS)
    script = _create_script()
    assert subprocess.run(["sh", "-n", "-c", script], check=False).returncode == 0
    # The temporalstore command line in it parses, naming every shard as announced.
    found = re.search(r"temporalstore (cluster create [^)]*?) 2>&1", script)
    assert found is not None, script
    ns = build_parser().parse_args(shlex.split(found[1]))
    assert (ns.action, ns.nodes) == ("create", announced)
    assert ns.etcd_endpoints == services["shard1"]["environment"]["TEMPORALSTORE_ETCD_ENDPOINTS"]
    cli = services["redis-cli"]
    assert cli["profiles"] == ["tools"] and "-c" in cli["entrypoint"]


@pytest.mark.parametrize("name", SHARDS)
def test_each_shard_reads_its_environment_as_a_cluster_node(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _image_config(_cluster_services()[name]["environment"], monkeypatch)
    assert (config.cluster_etcd, config.cluster_name) == ("http://etcd:2379", "temporalstore")
    assert (config.announce_host, config.announce_port) == (name, 6379)
    assert config.storage == f"s3://temporalstore/{name}"
    assert config.params["protected-mode"] == "no"
