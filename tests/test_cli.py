"""The `temporalstore serve` process: flags and environment variables, the
listening log line, graceful stop on SIGTERM, and real clients (redis-py,
redis-cli, redis-benchmark) talking to it unchanged."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import pytest
import redis

from tests.conftest import ROOT, start_temporalstore


def test_logs_listening_line_with_real_port() -> None:
    p = start_temporalstore()
    try:
        assert any(f"listening on 127.0.0.1:{p.port}" in line for line in p.log_lines)
    finally:
        p.stop()


def test_sigterm_stops_gracefully() -> None:
    p = start_temporalstore()
    r = redis.Redis(port=p.port)
    r.set("k", "v")
    r.close()
    p.proc.send_signal(signal.SIGTERM)
    assert p.proc.wait(10) == 0
    time.sleep(0.1)
    assert any("shut down" in line for line in p.log_lines)
    p.stop()


def test_flags_come_from_environment_too() -> None:
    p = start_temporalstore(
        env={"TEMPORALSTORE_REQUIREPASS": "s3cret", "TEMPORALSTORE_DATABASES": "2"}
    )
    try:
        r = redis.Redis(port=p.port)
        with pytest.raises(redis.AuthenticationError):
            r.get("k")
        r.close()
        r = redis.Redis(port=p.port, password="s3cret")
        assert r.set("k", "v") is True
        with pytest.raises(redis.ResponseError, match="DB index is out of range"):
            r.execute_command("SELECT", "2")
        r.close()
    finally:
        p.stop()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--port", "abc"], "--port must be an integer"),
        (["--databases", "0"], "--databases must be at least 1"),
        (["--history", "forever"], "--history"),
        (["--log-level", "loud"], "unknown --log-level"),
        (["--http-port", "web"], "--http-port must be an integer"),
        (["--http-port", "70000"], "--http-port must be at most 65535"),
        (["--s3-put-cost", "cheap"], "--s3-put-cost must be a number"),
        (["--s3-put-cost", "-1"], "--s3-put-cost must be a finite number, at least 0"),
    ],
)
def test_bad_flags_exit_with_a_message(args: list[str], message: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "serve", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode != 0
    assert message in proc.stderr


def test_port_in_use_fails_cleanly() -> None:
    p = start_temporalstore()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "proxy.cli", "serve", "--port", str(p.port)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 1
        assert "cannot serve" in proc.stderr
    finally:
        p.stop()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_works_unchanged(protocol: int) -> None:
    p = start_temporalstore()
    try:
        r = redis.Redis(port=p.port, protocol=protocol, decode_responses=True)
        assert r.ping() is True
        assert r.set("greeting", "hello") is True
        assert r.get("greeting") == "hello"
        assert r.incr("n") == 1
        assert r.hset("h", mapping={"a": "1", "b": "2"}) == 2
        assert r.hgetall("h") == {"a": "1", "b": "2"}
        pipe = r.pipeline(transaction=True)
        pipe.set("x", "1").incr("x").get("x")
        assert pipe.execute() == [True, 2, "2"]
        assert r.info("server")["redis_version"]
        r.close()
    finally:
        p.stop()


def test_redis_cli_and_benchmark_run_clean() -> None:
    cli = shutil.which("redis-cli")
    bench = shutil.which("redis-benchmark")
    assert cli and bench, "make test installs redis-tools"
    p = start_temporalstore()
    try:
        out = subprocess.run(
            [cli, "-p", str(p.port), "SET", "k", "v"], capture_output=True, text=True, timeout=30
        )
        assert out.stdout.strip() == "OK"
        out = subprocess.run(
            [cli, "-p", str(p.port), "INFO"], capture_output=True, text=True, timeout=30
        )
        assert "# Server" in out.stdout
        res = subprocess.run(
            [bench, "-p", str(p.port), "-t", "set,get,incr,lpush,hset,zadd", "-n", "2000", "-q"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        assert "requests per second" in res.stdout
        assert "error" not in (res.stdout + res.stderr).lower()
    finally:
        p.stop()
