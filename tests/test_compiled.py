"""The compiled hot path (tools/compiled.py, store/native.py): in the compiled build every
module the build lists runs as an extension module, in this process and in the server;
with TEMPORALSTORE_PURE=1 none does; a build that no longer matches its sources is
never used.

Which build is expected: TEMPORALSTORE_PURE=1 (`make pytest-pure`) expects Python;
otherwise, on a machine that can compile (a C compiler and Python's headers, as
`make install` checks before building), the compiled build, current; else Python."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import redis

from store import native
from tests.conftest import ROOT, ServerProcess

_spec = importlib.util.spec_from_file_location("compiled_tool", ROOT / "tools" / "compiled.py")
assert _spec is not None and _spec.loader is not None
tool: ModuleType = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

LISTED = sorted(rel[: -len(".py")].replace("/", ".") for rel in tool.MODULES)
# The extension modules of the build: one per source, and the group's shared library.
EXTENSIONS = sorted([*LISTED, f"{tool.GROUP}__mypyc"])
PURE = os.environ.get("TEMPORALSTORE_PURE", "") not in ("", "0")
EXPECT = "pure" if PURE else "compiled" if tool.cannot_build() is None else "absent"
OURS = ("proxy", "commands", "store", "flusher", "replay")


def _compiled_of_ours() -> list[str]:
    return sorted(
        name
        for name, m in list(sys.modules.items())
        if name.split(".")[0] in OURS and m is not None and native.is_compiled(m)
    )


def test_this_process_runs_the_expected_build() -> None:
    assert native.STATE == EXPECT, (
        f"expected the {EXPECT} build, have {native.STATE} ({native.REASON}); "
        "`make install` (python tools/compiled.py build) builds it"
    )
    if EXPECT != "compiled":
        assert native.MODULES == []
        assert _compiled_of_ours() == []
        return
    assert native.MODULES == LISTED
    for name in LISTED:
        importlib.import_module(name)
    assert _compiled_of_ours() == EXTENSIONS
    assert native.loaded() == (len(LISTED), len(LISTED))
    # What stays Python, stays Python (the package inits, the build switch, views).
    for name in ("store", "store.native", "store.views", "commands.replies", "proxy.server"):
        assert not native.is_compiled(importlib.import_module(name)), name


def test_the_server_reports_its_build(ts_server: ServerProcess) -> None:
    r = redis.Redis(port=ts_server.port, decode_responses=True)
    info = r.info("temporalstore")
    r.close()
    n = len(LISTED) if EXPECT == "compiled" else 0
    assert str(info["compiled"]) == f"{n}/{n}"
    assert info["compiled_build"] == EXPECT


def _probe(pure: bool) -> dict[str, object]:
    """Which of our modules a fresh interpreter loads compiled, with or without
    TEMPORALSTORE_PURE (the server's imports: every command family, reader, codec,
    flusher, replay's walk)."""
    env = {k: v for k, v in os.environ.items() if k != "TEMPORALSTORE_PURE"}
    if pure:
        env["TEMPORALSTORE_PURE"] = "1"
    code = (
        "import json, sys\n"
        "import commands.families, proxy.reader, proxy.server, flusher.codec, flusher.flusher\n"
        "import flusher.plainunpack\n"
        "from store import native\n"
        "print(json.dumps({'state': native.STATE, 'compiled': sorted(n for n, m in "
        "list(sys.modules.items()) if m is not None and n.split('.')[0] in "
        f"{OURS!r} and native.is_compiled(m))}}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, check=True
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_pure_switch_runs_every_module_as_python() -> None:
    assert _probe(pure=True) == {"state": "pure", "compiled": []}
    default = _probe(pure=False)
    if PURE:
        return  # the default build of this machine is checked by the unswitched run
    assert default["state"] == EXPECT
    assert default["compiled"] == (EXTENSIONS if EXPECT == "compiled" else [])


def _fake_build(root: Path, source: bytes) -> None:
    (root / "store").mkdir(parents=True)
    (root / "store" / "ops.py").write_bytes(source)
    (root / "build" / "native").mkdir(parents=True)
    manifest = {
        "abi": sysconfig.get_config_var("EXT_SUFFIX"),
        "modules": {"store/ops.py": hashlib.sha256(source).hexdigest()},
    }
    (root / "build" / "native" / "manifest.json").write_text(json.dumps(manifest))


def test_a_build_is_used_only_while_it_matches_its_sources(tmp_path: Path) -> None:
    if PURE:
        assert native.state(tmp_path)[1] == "pure"
        return
    assert native.state(tmp_path)[1] == "absent"
    _fake_build(tmp_path, b"X = 1\n")
    assert native.state(tmp_path) == (["store.ops"], "compiled", "1 modules compiled by mypyc")
    (tmp_path / "store" / "ops.py").write_bytes(b"X = 2\n")  # edited after the build
    modules, state, why = native.state(tmp_path)
    assert (modules, state) == ([], "stale") and "store/ops.py" in why
    (tmp_path / "store" / "ops.py").unlink()
    assert native.state(tmp_path)[:2] == ([], "stale")
    manifest = tmp_path / "build" / "native" / "manifest.json"
    manifest.write_text(json.dumps({"abi": ".cpython-00-other.so", "modules": {}}))
    assert native.state(tmp_path)[1] == "other-interpreter"
    manifest.write_text("{not json")
    assert native.state(tmp_path)[1] == "absent"


def test_the_build_lists_what_the_docs_say() -> None:
    """docs/design-notes.md names every compiled module and every module left out."""
    notes = (ROOT / "docs" / "design-notes.md").read_text()
    for rel in [*tool.MODULES, *tool.EXCLUDED]:
        assert f"`{rel}`" in notes, rel
