"""Write the storage image of tests/test_old_checkpoint.py with an older server.

    python tools/old_image.py OLD_CHECKOUT OUT_DIR

OLD_CHECKOUT is a checkout of the older commit (`git worktree add --detach DIR COMMIT`);
its server runs as pure Python (TEMPORALSTORE_PURE=1: a checkout has no compiled
build) with this interpreter. It is given the test's `workload`, checkpoints (BGSAVE)
and is killed with -9; its storage directory is copied to OUT_DIR/data. Then the old
server is started again on a copy of that directory (a restart takes a new writer
epoch and LSN, so the reference is the old server restarted, as the new one will be)
and its answers to the test's `queries` are kept as OUT_DIR/replies.json.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import ServerProcess, start_temporalstore
from tests.test_durability import kill9
from tests.test_old_checkpoint import queries, workload

NO_CHECKPOINTS = ["--checkpoint-every-records", "100000000", "--checkpoint-every-seconds", "100000"]


def _start(old: Path, workdir: Path) -> tuple[ServerProcess, redis.Redis]:
    """The old checkout's server (pure Python) on `workdir`/data, and a client of it."""
    p = start_temporalstore(
        NO_CHECKPOINTS, env={"TEMPORALSTORE_PURE": "1"}, workdir=workdir, cwd=old
    )
    return p, redis.Redis(port=p.port, socket_timeout=30)


def main(old: Path, out: Path) -> None:
    first = Path(tempfile.mkdtemp(prefix="ts-old-image-"))
    p, r = _start(old, first)
    workload(r)
    r.execute_command("TS.WAITDURABLE", "0")
    r.bgsave()
    deadline = time.monotonic() + 30
    while int(r.info("persistence")["checkpoints_written"]) < 1:
        if time.monotonic() > deadline:
            raise SystemExit("no checkpoint")
        time.sleep(0.05)
    r.close()
    kill9(p)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(first / "data", out / "data")
    again = Path(tempfile.mkdtemp(prefix="ts-old-image-"))
    shutil.copytree(first / "data", again / "data")
    p, r = _start(old, again)
    replies = queries(r)
    r.close()
    kill9(p)
    (out / "replies.json").write_text(json.dumps(replies, indent=0) + "\n")
    shutil.rmtree(first)
    shutil.rmtree(again)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
