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
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.test_old_checkpoint import queries, workload


def _start(old: Path, data: Path) -> tuple[subprocess.Popen[bytes], redis.Redis]:
    cmd = [
        sys.executable,
        "-m",
        "proxy.cli",
        "serve",
        "--port",
        "0",
        "--storage",
        f"file://{data}",
        "--checkpoint-every-records",
        "100000000",
        "--checkpoint-every-seconds",
        "100000",
    ]
    env = dict(os.environ, TEMPORALSTORE_PURE="1")
    p = subprocess.Popen(cmd, cwd=old, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert p.stderr is not None
    port = 0
    while not port:
        line = p.stderr.readline().decode()
        if not line:
            raise SystemExit("the old server exited")
        if "listening on" in line:
            port = int(line.rsplit(":", 1)[1].split()[0])
    return p, redis.Redis(port=port, socket_timeout=30)


def main(old: Path, out: Path) -> None:
    work = Path(tempfile.mkdtemp(prefix="ts-old-image-"))
    p, r = _start(old, work / "data")
    workload(r)
    r.execute_command("TS.WAITDURABLE", "0")
    r.bgsave()
    deadline = time.monotonic() + 30
    while int(r.info("persistence")["checkpoints_written"]) < 1:
        if time.monotonic() > deadline:
            raise SystemExit("no checkpoint")
        time.sleep(0.05)
    r.close()
    p.send_signal(signal.SIGKILL)
    p.wait()
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(work / "data", out / "data")
    shutil.copytree(work / "data", work / "again")
    p, r = _start(old, work / "again")
    replies = queries(r)
    r.close()
    p.send_signal(signal.SIGKILL)
    p.wait()
    (out / "replies.json").write_text(json.dumps(replies, indent=0) + "\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
