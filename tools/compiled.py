"""Build the compiled hot path with mypyc: `python tools/compiled.py build`.

The modules of `MODULES` (the request reader, dispatch and the command table, the
command handlers of the common families, the store and the record codec) are compiled
by mypyc as ONE group: one shared library `store/_hot__mypyc*.so` holding all their
code (calls between them are C calls) and one small extension module per source, all
under `build/native/<package>/`, never next to the sources. At import, `store.native`
puts `build/native/<package>` at the front of each package's `__path__` when the build
matches the sources (the SHA-256 of every compiled source, recorded in
`build/native/manifest.json`), so the extension modules load instead of the `.py`
files; with `TEMPORALSTORE_PURE=1`, without a build, or with a build that no longer
matches the sources, every module runs as Python (see store/native.py).

    python tools/compiled.py build     # (re)build if a compiled source changed
    python tools/compiled.py status    # up to date / stale / absent / cannot build
    python tools/compiled.py clean     # remove build/native

`build` does nothing but say why when there is no C compiler or no Python headers
(the pure-Python build is then the one in use), and removes a stale build it cannot
replace, so old code never runs.

Left out (they stay Python in the compiled build):
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "native"
MANIFEST = BUILD / "manifest.json"
GROUP = "store._hot"

MODULES = [
    "proxy/reader.py",
    "proxy/pipeline.py",
    "commands/dispatch.py",
    "commands/registry.py",
    "commands/errors.py",
    "commands/resp.py",
    "commands/parsing.py",
    "commands/common.py",
    "commands/glob.py",
    "commands/strings.py",
    "commands/hotwrites.py",
    "commands/hashes.py",
    "commands/lists.py",
    "commands/sets.py",
    "commands/zsets.py",
    "commands/zset_ranges.py",
    "commands/keys.py",
    "commands/encodings.py",
    "commands/limits.py",
    "commands/maxmemory.py",
    "commands/notify.py",
    "commands/querybuf.py",
    "commands/transactions.py",
    "commands/session_state.py",
    "commands/longdouble.py",
    "commands/points.py",
    "store/accounting.py",
    "store/asof.py",
    "store/branches.py",
    "store/bulkreplay.py",
    "store/chains.py",
    "store/commitpath.py",
    "store/core.py",
    "store/database.py",
    "store/dataset.py",
    "store/image.py",
    "store/keyspace.py",
    "store/ops.py",
    "store/opnames.py",
    "store/policy.py",
    "store/records.py",
    "store/settings.py",
    "store/stream.py",
    "store/values.py",
    "store/windex.py",
    "flusher/capacity.py",
    "flusher/codec.py",
    "flusher/plainpack.py",
    "flusher/plainunpack.py",
]

# Modules of the hot path's neighbourhood that stay Python, and why (docs/design-notes.md).
EXCLUDED = {
    "store/native.py": "it decides whether the compiled build is used, before any of it loads",
    "*/__init__.py": "package initialisation puts the build on the package's path",
    "store/containers.py": "subclasses of dict and set (mypyc compiles no builtin subclass)",
    "commands/replies.py": "subclasses of bytes, list and set (the reply types)",
    "store/views.py": "a view database is shared through weak references (Store.views), "
    "which a compiled class does not take",
    "commands/session.py": "ServerState keys a WeakKeyDictionary (one Lua engine per server): "
    "it derives from the compiled ServerCore (commands/session_state.py)",
    "proxy/server.py": "Connection derives from asyncio.Protocol, a Python class",
}


def digest(rel: str) -> str:
    return hashlib.sha256((ROOT / rel).read_bytes()).hexdigest()


def wanted() -> dict[str, object]:
    """What a build of the current sources records: a build is current iff equal."""
    try:
        import mypy.version

        mypy_version = mypy.version.__version__
    except ImportError:
        mypy_version = "not installed"
    return {
        "group": GROUP,
        "abi": sysconfig.get_config_var("EXT_SUFFIX"),
        "mypy": mypy_version,
        "script": digest("tools/compiled.py"),
        "modules": {rel: digest(rel) for rel in MODULES},
    }


def cannot_build() -> str | None:
    """Why this machine cannot compile, or None."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc})"
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        return f"no Python headers ({include}/Python.h)"
    try:
        import mypyc  # noqa: F401
    except ImportError:
        return "mypyc is not installed"
    return None


def current() -> bool:
    if not MANIFEST.exists():
        return False
    try:
        return bool(json.loads(MANIFEST.read_text()) == wanted())
    except ValueError:
        return False


def build() -> None:
    from mypyc.build import mypycify
    from setuptools import setup

    out = Path(tempfile.mkdtemp(prefix="native-", dir=ROOT / "build"))
    # The sources' hashes as they are compiled: a source edited during the build
    # leaves the build stale (pure Python runs), never passing for the new source.
    hashes = wanted()
    try:
        old = Path.cwd()
        os.chdir(ROOT)
        try:
            exts = mypycify(
                list(MODULES),
                group_name=GROUP,
                target_dir=str(out / "c"),
                opt_level="3",
                debug_level="1",
            )
            setup(
                name="temporalstore-native",
                ext_modules=exts,
                script_args=[
                    "-q",
                    "build_ext",
                    "--build-lib",
                    str(out / "lib"),
                    "--build-temp",
                    str(out / "tmp"),
                    "--parallel",
                    "2",
                ],
            )
        finally:
            os.chdir(old)
        lib = out / "lib"
        built = sorted(str(p.relative_to(lib)) for p in lib.rglob("*.so"))
        if len(built) != len(MODULES) + 1:
            raise SystemExit(f"mypyc built {len(built)} libraries, expected {len(MODULES) + 1}")
        (lib / "manifest.json").write_text(json.dumps(hashes, indent=1, sort_keys=True))
        shutil.rmtree(BUILD, ignore_errors=True)
        shutil.move(str(lib), BUILD)
        keep = os.environ.get("TEMPORALSTORE_KEEP_C")
        if keep:  # the generated C, for line-level profiles (callgrind_annotate -I)
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(out / "c", keep)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "status"
    if what == "clean":
        shutil.rmtree(BUILD, ignore_errors=True)
        return 0
    why = cannot_build()
    if what == "status":
        if current():
            print(f"compiled: {len(MODULES)} modules, up to date")
        elif why:
            print(f"pure Python: {why}")
        else:
            print("stale or absent: `python tools/compiled.py build`")
        return 0
    if what != "build":
        print(__doc__)
        return 2
    if why:
        shutil.rmtree(BUILD, ignore_errors=True)
        print(f"compiled build skipped, pure Python: {why}")
        return 0
    if current() and not os.environ.get("TEMPORALSTORE_KEEP_C"):
        return 0  # (asked for the generated C, it builds even when up to date)
    (ROOT / "build").mkdir(exist_ok=True)
    print(f"mypyc: compiling {len(MODULES)} modules as one group (a few minutes)")
    build()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
