"""docker/: the compose file parses, wires MinIO, a bucket step and the server, and
every TEMPORALSTORE_* variable it sets is a real flag; the image installs every
package. (No Docker engine runs here; `docker compose config` is the check on a
machine that has one.)"""

from __future__ import annotations

from pathlib import Path

import yaml

from proxy.cli import SERVE_FLAGS

DOCKER = Path(__file__).resolve().parent.parent / "docker"


def test_compose_wires_minio_bucket_and_server() -> None:
    doc = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    services = doc["services"]
    assert {"minio", "create-bucket", "temporalstore"} <= set(services)
    server = services["temporalstore"]
    env = server["environment"]
    flags = {"TEMPORALSTORE_" + name.upper().replace("-", "_") for name, _, _ in SERVE_FLAGS}
    for var in env:
        if var.startswith("TEMPORALSTORE_"):
            assert var in flags, var
    bucket = env["TEMPORALSTORE_STORAGE"].removeprefix("s3://").split("/")[0]
    assert f"local/{bucket}" in services["create-bucket"]["entrypoint"]
    assert env["TEMPORALSTORE_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert "create-bucket" in server["depends_on"]
    assert server["build"]["dockerfile"] == "docker/Dockerfile"


def test_dockerfile_installs_every_package() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    for package in ("proxy", "commands", "store", "flusher", "replay"):
        assert f"COPY {package} ./{package}" in text
    assert "pip install" in text and "temporalstore" in text
