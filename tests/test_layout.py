"""The package layout the code review holds us to: modules of a readable size and no
project import hidden inside a function (the import-linter contracts in pyproject.toml,
run by `make test`, hold the direction of the imports)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("proxy", "commands", "store", "flusher", "replay", "temporalstore")
MODULES = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).glob("*.py"))
MAX_LINES = 800
# Imports deferred on purpose, not to dodge a cycle: the S3 client (aiobotocore) takes
# a second to import and only s3:// URLs need it; etcd's client (grpc, protobuf: ~24 MiB
# of RSS) only --etcd-endpoints, the HTTP server (aiohttp, prometheus_client) only
# --http-port.
DEFERRED = {
    ("flusher/objectstore.py", "flusher.s3"),
    ("proxy/replication.py", "proxy.group"),
    ("proxy/cli.py", "proxy.metrics"),
    ("proxy/cli.py", "proxy.web"),
    ("proxy/cli.py", "proxy.cluster_node"),  # --cluster-enabled: etcd's client
    # The command line's other subcommands (inspect: tqdm; export, import: redis-py).
    ("proxy/cli.py", "replay.inspect"),
    ("proxy/cli.py", "temporalstore.cli"),
}


def _ours(name: str | None) -> bool:
    return name is not None and name.split(".")[0] in PACKAGES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_size(path: Path) -> None:
    lines = path.read_text().count("\n")
    assert lines <= MAX_LINES, f"{path.name}: {lines} lines (split it by subject)"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_project_import_inside_a_function(path: Path) -> None:
    tree = ast.parse(path.read_text())
    hidden = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            where = str(path.relative_to(ROOT))
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and _ours(node.module)
                and (where, node.module) not in DEFERRED
            ):
                hidden.append(f"line {node.lineno}: from {node.module} import ...")
            elif isinstance(node, ast.Import):
                hidden += [
                    f"line {node.lineno}: import {a.name}" for a in node.names if _ours(a.name)
                ]
    assert not hidden, f"{path.name} imports project modules inside functions: {hidden}"


def test_every_package_says_what_it_owns() -> None:
    for pkg in PACKAGES:
        doc = ast.get_docstring(ast.parse((ROOT / pkg / "__init__.py").read_text()))
        assert doc and len(doc.split()) >= 10, (
            f"{pkg}/__init__.py needs a docstring saying what it owns"
        )


def test_the_server_command_line_imports_no_client_or_optional_library() -> None:
    """What `temporalstore serve` imports before it serves (file:// storage, no etcd,
    no HTTP port) holds none of the libraries only other subcommands or options use:
    each is megabytes of every server's memory (DEFERRED above says who imports them)."""
    optional = ["redis", "tqdm", "aiobotocore", "aetcd", "grpc", "aiohttp", "prometheus_client"]
    probe = "import sys, proxy.cli; print(' '.join(m for m in sys.argv[1:] if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe, *optional],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [], f"imported by the server's command line: {out}"
