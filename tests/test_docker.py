"""docker/: the compose file parses, wires MinIO (healthy before the bucket step), etcd
(healthy) and three nodes of one group that start once the bucket exists; every
TEMPORALSTORE_* variable it sets is a real flag, and `temporalstore serve` reads each
node's environment as that node; the image installs every package. (No Docker engine
runs here; `docker compose -f docker/compose.yaml config` is the check on a machine
that has one.)"""

from __future__ import annotations

import json
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
    assert set(services) == {"minio", "create-bucket", "etcd", *NODES}
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
        assert node["ports"] == [f"{published}:6379"]
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


@pytest.mark.parametrize("name", sorted(NODES))
def test_each_node_reads_its_environment_as_that_node(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image's command line (its CMD) with the node's environment."""
    for var, value in _services()[name]["environment"].items():
        monkeypatch.setenv(var, str(value))
    cmd = next(
        line for line in (DOCKER / "Dockerfile").read_text().splitlines() if line.startswith("CMD")
    )
    config = config_from_args(build_parser().parse_args(["serve", *json.loads(cmd[3:])]))
    assert (config.host, config.port) == ("0.0.0.0", 6379)
    assert config.group == "temporalstore"
    assert (config.announce_host, config.announce_port) == (name, 6379)
    assert config.storage == "s3://temporalstore/main"
    assert config.s3_endpoint_url == "http://minio:9000"
    assert config.params["protected-mode"] == "no"


def test_dockerfile_installs_every_package() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    for package in ("proxy", "commands", "store", "flusher", "replay"):
        assert f"COPY {package} ./{package}" in text
    assert "pip install" in text and "temporalstore" in text
