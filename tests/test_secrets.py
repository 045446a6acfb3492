"""Secrets never leave the server: passwords (requirepass, masterauth) and object storage
credentials (AWS variables, user-info in --storage or --s3-endpoint-url URLs) appear in
no reply (INFO, CONFIG GET, errors) and in no log line, including storage errors.

CONFIG GET requirepass is the one deliberate difference from Redis 7.0, which shows the
password: it reads "<redacted>" here (README, Security)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable

import boto3

from tests.conftest import ROOT, make_bucket, start_temporalstore
from tests.resp_client import RawClient

PASSWORD = "pw-Zq8rT5vLx2"
NEW_PASSWORD = "pw2-Hn4cW9kPa7"
MASTERAUTH = "ma-Qe3sJ6dYt1"
AWS_KEY_ID = "AKIASECRETSTEST0001"
AWS_SECRET = "aws-Ur7mK2pXw9Fb5"
URL_SECRET = "url-Vd6gN8qTz3"
SECRETS = (PASSWORD, NEW_PASSWORD, MASTERAUTH, AWS_KEY_ID, AWS_SECRET, URL_SECRET)


def assert_no_secret(texts: Iterable[bytes | str]) -> None:
    for text in texts:
        raw = text if isinstance(text, bytes) else text.encode()
        for secret in SECRETS:
            assert secret.encode() not in raw, (secret, raw[:2000])


def aws_env() -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": AWS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def _s3(endpoint: str) -> object:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=AWS_KEY_ID,
        aws_secret_access_key=AWS_SECRET,
    )


def _wait_info(c: RawClient, section: str, needle: bytes) -> bytes:
    deadline = time.monotonic() + 20
    info = b""
    while time.monotonic() < deadline:
        info = c.call("INFO", section)
        if needle in info:
            return info
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} never appeared in INFO {section}:\n{info!r}")


def test_secrets_appear_in_no_reply_and_no_log(moto_s3: str) -> None:
    bucket = make_bucket(moto_s3)
    ours = start_temporalstore(
        [
            "--requirepass",
            PASSWORD,
            "--storage",
            f"s3://{bucket}/app",
            "--s3-endpoint-url",
            moto_s3,
            "--log-level",
            "debug",
        ],
        env=aws_env(),
    )
    replies: list[bytes] = []
    s3 = _s3(moto_s3)
    try:
        c = RawClient(ours.port)
        # Failed authentication in every form.
        for cmd in [
            ("PING",),
            ("AUTH", "wrong"),
            ("AUTH", "default", "wrong"),
            ("HELLO", "3", "AUTH", "default", "wrong"),
            ("CONFIG", "GET", "requirepass"),
        ]:
            replies.append(c.call(*cmd))
        assert replies[0].startswith(b"-NOAUTH")
        assert c.call("AUTH", PASSWORD) == b"+OK\r\n"
        assert c.call("SET", "k", "v") == b"+OK\r\n"
        for cmd in [
            ("INFO",),
            ("INFO", "all"),
            ("INFO", "everything"),
            ("INFO", "temporalstore"),
            ("CONFIG", "GET", "*"),
            ("CLIENT", "LIST"),
            ("CLIENT", "INFO"),
            ("CONFIG", "SET", "masterauth", MASTERAUTH),
            ("CONFIG", "SET", "requirepass", NEW_PASSWORD),
            ("CONFIG", "GET", "*pass*"),
            ("CONFIG", "GET", "masterauth"),
            ("CONFIG", "SET", "requirepass", NEW_PASSWORD, "requirepass", PASSWORD),
        ]:
            replies.append(c.call(*cmd))
        assert c.call("CONFIG", "GET", "requirepass") == (
            b"*2\r\n$11\r\nrequirepass\r\n$10\r\n<redacted>\r\n"
        )
        assert c.call("AUTH", NEW_PASSWORD) == b"+OK\r\n"  # the password did change
        # A storage error: the bucket goes away under the running server.
        # (The server may write an object between emptying and deleting: try again.)
        for attempt in range(20):
            listing = s3.list_objects_v2(Bucket=bucket)  # type: ignore[attr-defined]
            for obj in listing.get("Contents", []):
                s3.delete_object(Bucket=bucket, Key=obj["Key"])  # type: ignore[attr-defined]
            try:
                s3.delete_bucket(Bucket=bucket)  # type: ignore[attr-defined]
                break
            except s3.exceptions.ClientError:  # type: ignore[attr-defined]
                if attempt == 19:
                    raise
        assert c.call("SET", "k2", "v2") == b"+OK\r\n"
        replies.append(_wait_info(c, "persistence", b"last_flush_status:err"))
        replies.append(c.call("INFO", "everything"))
        s3.create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
        _wait_info(c, "persistence", b"last_flush_status:ok")
        c.close()
    finally:
        ours.stop()
        s3.close()  # type: ignore[attr-defined]
    assert_no_secret(replies)
    assert_no_secret(ours.log_lines)
    assert any(
        "object storage unavailable" in line or "NoSuchBucket" in line for line in ours.log_lines
    )


def test_password_from_the_environment_is_not_on_the_command_line() -> None:
    ours = start_temporalstore(env={"TEMPORALSTORE_REQUIREPASS": PASSWORD})
    try:
        with open(f"/proc/{ours.proc.pid}/cmdline", "rb") as f:
            assert PASSWORD.encode() not in f.read()
        c = RawClient(ours.port)
        assert c.call("AUTH", PASSWORD) == b"+OK\r\n"
        c.close()
    finally:
        ours.stop()
    assert_no_secret(ours.log_lines)


def _run(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ)
    env.update(aws_env())
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=60,
    )


def test_storage_errors_at_start_do_not_show_credentials() -> None:
    closed = "127.0.0.1:1"
    serve = ["serve", "--port", "0", "--storage"]
    cases = [
        # User-info in the endpoint URL is refused, and shown redacted.
        [*serve, "s3://bucket-x/p", "--s3-endpoint-url", f"http://k:{URL_SECRET}@{closed}"],
        # ... and in the storage URL.
        [*serve, f"s3://{AWS_KEY_ID}:{URL_SECRET}@bucket-x/p"],
        # An unreachable endpoint, credentials in the environment.
        [*serve, "s3://bucket-x/p", "--s3-endpoint-url", f"http://{closed}"],
        ["inspect", "--storage", f"s3://user:{URL_SECRET}@bucket-x/p"],
        [
            "inspect",
            "--storage",
            "s3://bucket-x/p",
            "--s3-endpoint-url",
            f"http://u:{URL_SECRET}@{closed}",
        ],
        ["inspect", "--storage", "s3://bucket-x/p", "--s3-endpoint-url", f"http://{closed}"],
    ]
    for args in cases:
        done = _run(args)
        assert done.returncode == 1, (args, done.stderr)
        assert_no_secret([done.stdout, done.stderr])
        if any("@" in a for a in args):
            assert b"***@" in done.stderr, done.stderr
        else:
            assert b"Could not connect" in done.stderr, done.stderr
