"""`S3ObjectStore`: object storage on S3 or an S3-compatible service (MinIO, moto)
through one long-lived aiobotocore client. The interface, its errors and its
contract are `flusher.objectapi`'s; this module is imported only when an
``s3://`` URL is opened (see `flusher.objectstore.open_object_store`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import re
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import aiobotocore
import aiohttp
import botocore.exceptions
import botocore.handlers
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.utils import determine_content_length

from flusher.objectapi import (
    InvalidObjectStore,
    ObjectStore,
    ObjectStoreError,
    Unavailable,
    _check_key,
    _check_prefix,
)
from store.secrets import redact

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from types_aiobotocore_s3.client import S3Client

T = TypeVar("T")

# --------------------------------------------------------------------------- S3

_S3_UNAVAILABLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "RequestTimeout",
        "RequestTimeoutException",
        "InternalError",
        "ServiceUnavailable",
        "ConditionalRequestConflict",
        "OperationAborted",
        "XMinioServerNotInitialized",
        "XMinioStorageFull",
    }
)

_S3_INVALID_CODES = frozenset(
    {
        "NoSuchBucket",
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidBucketName",
        "AuthorizationHeaderMalformed",
        "PermanentRedirect",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "AccountProblem",
        "InvalidSecurity",
    }
)

# Connection-level trouble: refused, reset, DNS, TLS, timeouts, truncated bodies.
_S3_TRANSIENT_EXCEPTIONS: tuple[type[BaseException], ...] = (
    botocore.exceptions.HTTPClientError,  # EndpointConnectionError, timeouts, closed conns
    botocore.exceptions.IncompleteReadError,
    botocore.exceptions.ResponseStreamingError,
    botocore.exceptions.ConnectionError,
    botocore.exceptions.CredentialRetrievalError,
    aiohttp.ClientError,
    asyncio.TimeoutError,
    OSError,
)

# Configuration trouble: nothing to retry.
_S3_CONFIG_EXCEPTIONS: tuple[type[BaseException], ...] = (
    botocore.exceptions.NoCredentialsError,
    botocore.exceptions.PartialCredentialsError,
    botocore.exceptions.NoRegionError,
    botocore.exceptions.ParamValidationError,
    botocore.exceptions.InvalidConfigError,
    botocore.exceptions.ProfileNotFound,
    botocore.exceptions.UnknownCredentialError,
)


# What `_s3_error` classifies; anything else is a bug and propagates unchanged.
_S3_MAPPED_EXCEPTIONS: tuple[type[BaseException], ...] = (
    botocore.exceptions.ClientError,
    botocore.exceptions.BotoCoreError,
    aiohttp.ClientError,
    asyncio.TimeoutError,
    OSError,
)


def _client_error_info(exc: botocore.exceptions.ClientError) -> tuple[str, int]:
    response: Any = exc.response
    error = response.get("Error", {}) or {}
    code = str(error.get("Code", "") or "")
    status = int((response.get("ResponseMetadata", {}) or {}).get("HTTPStatusCode", 0) or 0)
    return code, status


def _s3_error(exc: BaseException, url: str, op: str, key: str) -> ObjectStoreError:
    """Classify an exception from an S3 call. The message carries the error code and
    status, never request details or credentials."""
    where = f"{url}: {op} {key!r}"
    if isinstance(exc, botocore.exceptions.ClientError):
        code, status = _client_error_info(exc)
        msg = f"{where} failed: {code or 'error'} (HTTP {status or '?'})"
        if code in _S3_UNAVAILABLE_CODES or status >= 500 or status in (408, 429):
            return Unavailable(msg)
        if code in _S3_INVALID_CODES or status in (301, 307, 400, 401, 403, 404, 405):
            return InvalidObjectStore(msg)
        if 400 <= status < 500:
            return InvalidObjectStore(msg)
        return Unavailable(msg)
    if isinstance(exc, _S3_CONFIG_EXCEPTIONS):
        return InvalidObjectStore(f"{where} failed: {type(exc).__name__}: {redact(str(exc))}")
    if isinstance(exc, _S3_TRANSIENT_EXCEPTIONS):
        return Unavailable(f"{where} failed: {type(exc).__name__}: {redact(str(exc))}")
    return Unavailable(f"{where} failed: {type(exc).__name__}")


EXPECT_CONTINUE_BYTES = 1024 * 1024
"""Bodies from this size on are sent after the store's ``100 Continue`` (botocore
asks for it on every PUT of a file-like body: one more round trip to the store, and
one more wake-up of the event loop, for each segment of a sync write)."""


def _expect_large_bodies(model: Any, params: dict[str, Any], **kwargs: Any) -> None:
    """Replaces botocore's `add_expect_header` on our client: ``Expect: 100-continue``
    only for a body of `EXPECT_CONTINUE_BYTES` or more, where not sending it to a
    store that refuses the request is worth a round trip."""
    if model.http.get("method", "") not in ("PUT", "POST"):
        return
    body = params.get("body")
    if body is None or not hasattr(body, "read"):
        return
    size = determine_content_length(body)
    if size is None or size >= EXPECT_CONTINUE_BYTES:
        params["headers"]["Expect"] = "100-continue"


SKIPPED_HANDLERS = frozenset(
    {
        # They do nothing for these requests:
        botocore.handlers.generate_idempotent_uuid,  # no idempotency-token member
        botocore.handlers.validate_ascii_metadata,  # no Metadata
        botocore.handlers.sse_md5,  # no SSE-C key
        botocore.handlers.inject_api_version_header_if_needed,  # no endpoint discovery in S3
        botocore.handlers.add_recursion_detection_header,  # only inside AWS Lambda
        # The SDK's telemetry headers (amz-sdk-invocation-id, amz-sdk-request): S3
        # serves the same without them.
        botocore.handlers.add_retry_headers,
    }
)
"""botocore's built-in handlers this store's client does without, for the requests it
makes (PutObject, GetObject, ListObjectsV2, DeleteObject with Bucket, Key, Body,
IfNoneMatch, Prefix, ContinuationToken): each costs a call or more per request, and so
does botocore's parameter validation (`parameter_validation=False`; the store checks
its bucket, keys and prefixes itself). Without them a PUT of 4,000 bytes to moto costs
the client 3.21M instructions instead of 3.41M (-6 %, callgrind, over a kept
connection)."""


def _lighten(client: Any) -> None:
    """``Expect: 100-continue`` only for large bodies on a new client
    (`_expect_large_bodies`); none of `SKIPPED_HANDLERS`."""
    events = client.meta.events
    events.unregister("before-call.s3", botocore.handlers.add_expect_header)
    events.register("before-call.s3", _expect_large_bodies)
    for spec in botocore.handlers.BUILTIN_HANDLERS:
        if spec[1] in SKIPPED_HANDLERS:
            events.unregister(spec[0], spec[1])


USER_AGENT = (
    f"temporalstore aiobotocore/{aiobotocore.__version__} python/{platform.python_version()}"
)
"""The User-Agent of every request (botocore appends its own name and version): fixed.
botocore's own is built twice per request, the second time after signing, from
feature metadata: a tenth of a segment PUT's CPU."""


_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class S3ObjectStore(ObjectStore):
    """Objects under ``s3://bucket/prefix`` through one lazily created aiobotocore client.

    Region: `region`, else AWS_DEFAULT_REGION / AWS_REGION / the AWS config file, else
    us-east-1. Credentials: botocore's default chain (environment, shared files, IMDS...).
    With a custom `endpoint_url` (MinIO, moto) path-style addressing is used.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        *,
        region: str | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_pool_connections: int = 32,
    ) -> None:
        if not _BUCKET_RE.match(bucket) or ".." in bucket:
            raise InvalidObjectStore(f"bad S3 bucket name {bucket!r}")
        prefix = prefix.strip("/")
        if prefix:
            try:
                _check_prefix(prefix + "/")
            except ValueError:
                raise InvalidObjectStore(f"bad S3 key prefix {prefix!r}") from None
        self.bucket = bucket
        self.prefix = prefix + "/" if prefix else ""
        self.url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        if endpoint_url is not None and not re.match(r"^https?://[^/]", endpoint_url):
            raise InvalidObjectStore(
                f"bad S3 endpoint URL {redact(endpoint_url)!r}: expected http(s)://host[:port]"
            )
        if endpoint_url is not None and "@" in urlsplit(endpoint_url).netloc:
            raise InvalidObjectStore(
                f"S3 endpoint URL {redact(endpoint_url)!r} must not contain credentials; "
                "use the AWS environment variables or files"
            )
        self.endpoint_url = endpoint_url
        self.region = region
        self._config = AioConfig(
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries={"total_max_attempts": 1, "mode": "standard"},  # the caller retries
            parameter_validation=False,  # see SKIPPED_HANDLERS
            max_pool_connections=max_pool_connections,
            # No CRC32 header computed and sent with every PUT: a segment carries its
            # own CRC-32 (checked on every read), over http the signature covers the
            # body's SHA-256, over https TLS does (botocore's behaviour before 1.36).
            request_checksum_calculation="when_required",
            user_agent=USER_AGENT,
            s3={"addressing_style": "path"} if endpoint_url else None,
        )
        self._client: S3Client | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def open(self) -> None:
        """Create the client now instead of on first use."""
        await self._get_client()

    async def _get_client(self) -> S3Client:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._closed:
                raise ObjectStoreError(f"{self.url}: store is closed")
            if self._client is None:
                stack = contextlib.AsyncExitStack()
                try:
                    session = get_session()
                    region = (
                        self.region
                        or os.environ.get("AWS_DEFAULT_REGION")
                        or os.environ.get("AWS_REGION")
                        or session.get_config_variable("region")
                        or "us-east-1"
                    )
                    client = await stack.enter_async_context(
                        session.create_client(
                            "s3",
                            region_name=region,
                            endpoint_url=self.endpoint_url,
                            config=self._config,
                        )
                    )
                except ValueError as exc:  # e.g. an endpoint botocore cannot parse
                    await stack.aclose()
                    raise InvalidObjectStore(f"{self.url}: cannot create S3 client") from exc
                except _S3_MAPPED_EXCEPTIONS as exc:
                    await stack.aclose()
                    raise _s3_error(exc, self.url, "connect", "") from exc
                _lighten(client)
                self._stack = stack
                self._client = client
            return self._client

    async def _call(self, op: str, key: str, fn: Callable[[S3Client], Awaitable[T]]) -> T:
        client = await self._get_client()
        try:
            return await fn(client)
        except _S3_MAPPED_EXCEPTIONS as exc:
            raise _s3_error(exc, self.url, op, key) from exc

    async def put(self, key: str, data: bytes) -> None:
        full = self.prefix + "/".join(_check_key(key))

        async def run(client: S3Client) -> None:
            await client.put_object(Bucket=self.bucket, Key=full, Body=data)

        await self._call("put", key, run)

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        full = self.prefix + "/".join(_check_key(key))

        async def run(client: S3Client) -> bool:
            try:
                await client.put_object(Bucket=self.bucket, Key=full, Body=data, IfNoneMatch="*")
            except botocore.exceptions.ClientError as exc:
                code, status = _client_error_info(exc)
                if code == "PreconditionFailed" or status == 412:
                    return False
                raise
            return True

        return await self._call("put_if_absent", key, run)

    async def get(self, key: str) -> bytes | None:
        full = self.prefix + "/".join(_check_key(key))

        async def run(client: S3Client) -> bytes | None:
            try:
                response = await client.get_object(Bucket=self.bucket, Key=full)
            except botocore.exceptions.ClientError as exc:
                code, status = _client_error_info(exc)
                if code in ("NoSuchKey", "NotFound") or (
                    status == 404 and code not in _S3_INVALID_CODES
                ):
                    return None
                raise
            async with response["Body"] as body:
                return await body.read()

        return await self._call("get", key, run)

    async def list(self, prefix: str) -> list[str]:
        _check_prefix(prefix)
        full = self.prefix + prefix
        strip = len(self.prefix)

        async def run(client: S3Client) -> list[str]:
            keys: list[str] = []
            paginator = client.get_paginator("list_objects_v2")
            async for page in paginator.paginate(Bucket=self.bucket, Prefix=full):
                for obj in page.get("Contents", []):
                    name = obj.get("Key", "")
                    if name.startswith(full):
                        keys.append(name[strip:])
            keys.sort()
            return keys

        return await self._call("list", prefix, run)

    async def delete(self, key: str) -> None:
        full = self.prefix + "/".join(_check_key(key))

        async def run(client: S3Client) -> None:
            try:
                await client.delete_object(Bucket=self.bucket, Key=full)
            except botocore.exceptions.ClientError as exc:
                code, _status = _client_error_info(exc)
                if code != "NoSuchKey":
                    raise

        await self._call("delete", key, run)

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()
