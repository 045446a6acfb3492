"""Whether this process runs the compiled hot path (tools/compiled.py builds it).

The build lives in `build/native/<package>/` beside the packages, never next to the
sources: each package's `__init__` calls `extend(__path__, __name__)`, which puts
that directory first on the package's path when the build can be used, so the import
system finds the extension module of a compiled source before its `.py` file. The
build is used unless

- `TEMPORALSTORE_PURE` is set to anything but `0` or empty (`make pytest-pure`),
- there is no build (no C compiler, or never built), or it is for another interpreter,
- a compiled source changed since the build (its SHA-256 differs from the one in
  `build/native/manifest.json`): old code never runs; `make install` rebuilds.

In each of those cases every module runs as Python, all of them, as one build. This
module is never compiled, and imports nothing of ours.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "native"


def state(root: Path) -> tuple[list[str], str, str]:
    """For the sources under `root` and their build in `root/build/native`: (the
    modules the build compiled, as `package.module`; the state in one word, as INFO
    temporalstore shows it in `compiled_build`; why)."""
    if os.environ.get("TEMPORALSTORE_PURE", "") not in ("", "0"):
        return [], "pure", "TEMPORALSTORE_PURE is set"
    try:
        manifest = json.loads((root / "build" / "native" / "manifest.json").read_text())
    except (OSError, ValueError):
        return [], "absent", "no compiled build"
    if manifest.get("abi") != sysconfig.get_config_var("EXT_SUFFIX"):
        return [], "other-interpreter", "the build is for another interpreter"
    sources: dict[str, str] = manifest.get("modules", {})
    for rel, sha in sorted(sources.items()):
        try:
            now = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        except OSError:
            now = ""
        if now != sha:
            return [], "stale", f"{rel} changed since the build"
    names = [rel[: -len(".py")].replace("/", ".") for rel in sorted(sources)]
    return names, "compiled", f"{len(names)} modules compiled by mypyc"


MODULES, STATE, REASON = state(ROOT)


def extend(path: list[str], package: str) -> list[str]:
    """A package's `__path__` with its compiled directory first, if the build is used."""
    where = BUILD / package
    if MODULES and where.is_dir() and str(where) not in path:
        path.insert(0, str(where))
    return path


def is_compiled(module: ModuleType) -> bool:
    """Whether `module` was loaded from an extension module (compiled) or Python."""
    return str(getattr(module, "__file__", "") or "").endswith(tuple(EXTENSION_SUFFIXES))


def loaded() -> tuple[int, int]:
    """(modules of the build loaded compiled in this process, modules in the build)."""
    got = [sys.modules.get(name) for name in MODULES]
    return sum(1 for m in got if m is not None and is_compiled(m)), len(MODULES)
