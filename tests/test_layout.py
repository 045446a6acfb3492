"""The package layout the code review holds us to: modules of a readable size, no
project import hidden inside a function, and no import loop between project modules
(the import-linter contracts in pyproject.toml, run by `make test`, hold the direction
of the imports between packages and between the layers of `commands`, of `store` and of `proxy`)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("proxy", "commands", "store", "flusher", "replay", "temporalstore")
MODULES = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
# The cycle test reads `bench` too: its items and its runner are project modules.
GRAPHED = (*PACKAGES, "bench")
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


def _module_names() -> dict[str, Path]:
    names = {}
    for pkg in GRAPHED:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def import_graph() -> dict[str, set[str]]:
    """Which project modules each project module imports: every import statement
    counts, at module level, under `if TYPE_CHECKING:` (annotations are read too) and
    inside functions (the DEFERRED ones). `from package import name` is an import of
    `package.name` when that is a module, else of `package`; the package a module sits
    in, which Python imports first, is not counted (as import-linter does not)."""
    names = _module_names()

    def module(name: str) -> str | None:
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        targets: set[str | None] = set()
        for node in ast.walk(tree):
            found: list[str | None] = []
            if isinstance(node, ast.Import):
                found = [module(a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                for a in node.names:
                    full = f"{base}.{a.name}"
                    found.append(full if full in names else module(base))
            targets.update(found)
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def import_loops(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    loops.append(frozenset(component))
    return loops


def test_no_import_loop_between_project_modules() -> None:
    """No two project modules import each other, directly or through others (issue
    30): counting the imports made for annotations only (`if TYPE_CHECKING:`), so
    also none of the imports that run."""
    loops = [sorted(loop) for loop in import_loops(import_graph())]
    assert not loops, f"modules that import each other (directly or through others): {loops}"


def test_the_loop_finder_finds_loops() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert import_loops(graph) == [frozenset({"a", "b", "c"})]
