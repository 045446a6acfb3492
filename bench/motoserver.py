"""moto's S3 server, with HTTP/1.1 keep-alive: what the benchmark and the tests use as
a local object store.

    python -m bench.motoserver -H 127.0.0.1 -p PORT

The same application `python -m moto.server` serves (moto's `DomainDispatcherApplication`
over `create_backend_app`, debug on, one thread per connection, moto's own request
handler for the headers), served by the same werkzeug server classes, with two
differences: a connection stays open after a response, as it does with S3 or MinIO,
and moto's list of its modules is made once. In `python -m bench.run --items 6`
(2026-11-27, alternating runs) moto spent 1.96-2.04 ms of CPU per segment PUT this
way against 3.37-3.90 ms started as `python -m moto.server`.

Not explained yet: while other processes kept the machine busy (40-75 % of it in use
by others), a 1-client sync SET (the server's aiobotocore client on uvloop) measured
p50 7.3 ms over kept connections against 3.8-4.0 ms with moto.server, and aiobotocore
PUTs in a loop on uvloop had a longer tail (p90 7-16 ms against 3-8 ms), while raw PUTs
through bench/putlat.py (4.6 ms against 7.7-8.1 ms) and a blocking http.client (p50
1.1-1.3 ms against 2.5-3.9 ms) were faster kept; on a quieter run the 1-client sync SET
measured 2.1 ms against a raw PUT's 1.8 ms. It takes the SET client on moto's CPU (as
redis-benchmark is in the benchmark): with the client on the server's CPU instead, the
same 1-client sync SET measured p50 2.9-3.4 ms kept against 3.4-4.1 ms with
moto.server. A moto that served each request of a kept connection on a new thread was
slower still (p50 12 ms). `perf sched timehist` over 150 such SETs, with other
processes busy on both CPUs, put the time in scheduling: the wake-ups of the server and
of the SET client waited 285 ms and 120 ms in all (p90 3.7 and 3.5 ms) over kept
connections, 16 ms and 10 ms with moto.server; moto's own wake-ups waited little in
both. So it is a matter of CPUs shared with other work (2 cores for several sessions);
on a machine where only the benchmark runs it should not arise, which is still to be
measured there.

Why moto's own start closes every connection: werkzeug's development server (2.1 and
later) sends ``Connection: close`` with every response, since after the application has
run, its handler discards whatever the client may still send (an unread request body)
by reading the socket for 10 ms, which on a kept connection would swallow the next
request. So every PUT of a sync write paid a new TCP connection on both sides.

One more: moto's dispatcher (`DomainDispatcherApplication.get_backend_for_host`) asks
`moto.backends.list_of_moto_modules()` whether the Host header names a moto module,
which lists moto's package directory and calls isdir on each of its ~200 entries, twice
per request for an S3 request to ``127.0.0.1:port``, under the dispatcher's lock: a
fifth of moto's CPU per PUT in a py-spy profile. The directory does not change while
the server runs, so `main` lists it once (`cache_module_list`); what it answers is the
same.

`KeepAliveHandler.run_wsgi` replaces werkzeug's handler's: it reads the request's whole
body before the application runs (by Content-Length, or chunk by chunk for a chunked one),
so the next request starts exactly where the socket stands; it buffers the response
and sends it with a Content-Length. A client that asks for ``Connection: close`` (or
speaks HTTP/1.0) still gets its connection closed, as does one whose request cannot
be read whole or whose response fails.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
import traceback
from typing import Any

from moto import backends
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

IDLE_TIMEOUT_S = 120.0
"""A connection idle this long is closed by the server (clients close theirs first:
aiobotocore's pool after 12 s)."""

MAX_BODY = 1 << 30
"""Largest request body read into memory (moto keeps objects in memory anyway)."""


class KeepAliveHandler(MotoRequestHandler):
    """moto's request handler, answering over kept HTTP/1.1 connections."""

    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S
    # Headers and body go out in two writes: no wait for the ACK of the first.
    disable_nagle_algorithm = True

    def _read_body(self, environ: dict[str, Any]) -> bytes | None:
        """The request's whole body, None if it cannot be read whole."""
        if environ.get("wsgi.input_terminated"):  # chunked: werkzeug's dechunking reader
            try:
                return bytes(environ["wsgi.input"].read())
            except (OSError, ValueError):
                return None
        length = environ.get("CONTENT_LENGTH", "")
        if not length:
            return b""
        try:
            n = int(length)
        except ValueError:
            return None
        if n < 0 or n > MAX_BODY:
            return None
        body = bytes(self.rfile.read(n))
        return body if len(body) == n else None

    def run_wsgi(self) -> None:
        # http.server's parse_request has answered "Expect: 100-continue" already.
        self.environ = environ = self.make_environ()
        body = self._read_body(environ)
        if body is None:
            self.close_connection = True
            self.send_error(400, "request body not readable")
            return
        environ["wsgi.input"] = io.BytesIO(body)
        environ["wsgi.input_terminated"] = True
        environ["CONTENT_LENGTH"] = str(len(body))
        started: list[Any] = []
        chunks: list[bytes] = []

        def start_response(status: str, headers: list[Any], exc_info: Any = None) -> Any:
            started[:] = [status, headers]
            return chunks.append

        try:
            result = self.server.app(environ, start_response)
            try:
                for data in result:
                    chunks.append(data)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
            if not started:
                raise RuntimeError("the application did not start a response")
        except Exception:
            self.close_connection = True
            self.server.log("error", f"Error on request:\n{traceback.format_exc()}")
            self.send_error(500)
            return
        status, headers = started
        code, _, reason = status.partition(" ")
        payload = b"".join(chunks)
        head = self.command == "HEAD" or code.startswith("1") or code in ("204", "304")
        self.send_response(int(code), reason)
        length: str | None = None
        for name, value in headers:
            lower = name.lower()
            if lower == "connection" or lower == "transfer-encoding":
                continue
            if lower == "content-length":
                length = value
            self.send_header(name, value)
        if length is None and not head:
            self.send_header("Content-Length", str(len(payload)))
        elif not head and length != str(len(payload)):
            self.close_connection = True  # a wrong length would shift the next response
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if payload and self.command != "HEAD":
            self.wfile.write(payload)


def cache_module_list() -> None:
    """`moto.backends.list_of_moto_modules` from a list made once (the dispatcher calls
    it per request; see the module's docstring)."""
    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-H", "--host", default="127.0.0.1")
    ap.add_argument("-p", "--port", type=int, default=5000)
    a = ap.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(a.port))  # as moto.server sets it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    cache_module_list()
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # type: ignore[attr-defined]  # as moto.server does
    server = make_server(a.host, a.port, app, threaded=True, request_handler=KeepAliveHandler)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
