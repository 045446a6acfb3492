"""The HTTP listener (`--http-port`): `/metrics` for Prometheus and the history
explorer (`/` and its JSON under `/api/`), in the server's own event loop.

aiohttp (already installed with the S3 client) parses HTTP; this module adds what
RESP clients get: protected mode, and authentication against the same users —
HTTP Basic credentials are checked by running `AUTH user password` on the request's
own session, so a failure is logged to `ACL LOG` as AUTH's is, and every command an
endpoint runs passes the dispatcher's ACL checks for that user. With a `default`
user that needs no password, no credentials are needed, as over RESP.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib import resources

from aiohttp import BasicAuth, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from commands.acl import denied
from commands.cleanup import session_closed
from commands.dispatch import DISPATCHER, lookup
from commands.registry import Command
from commands.replies import ErrorReply
from commands.session import ServerCore, Session
from proxy.explorer import API_ROUTES, SESSION
from proxy.server import is_loopback

log = logging.getLogger("temporalstore")

REALM = 'Basic realm="temporalstore", charset="UTF-8"'
STATIC = {
    "/": ("explorer.html", "text/html"),
    "/explorer.js": ("explorer.js", "application/javascript"),
    "/explorer.css": ("explorer.css", "text/css"),
}
# The page loads our own files only: no inline script, nothing from elsewhere.
CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _static(name: str) -> bytes:
    return (resources.files("proxy") / "static" / name).read_bytes()


class HttpServer:
    """One aiohttp application on `host:port`, served until `close`."""

    def __init__(self, state: ServerCore, registry: CollectorRegistry) -> None:
        self.state = state
        self.registry = registry
        self.runner: web.AppRunner | None = None
        self.port = 0
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/metrics", self._metrics)
        for path in STATIC:
            app.router.add_get(path, self._static)
        for path, handler in API_ROUTES.items():
            app.router.add_get(path, handler)
        self.app = app

    async def start(self, host: str, port: int) -> int:
        """Listen on `port` (0: a free one); returns the port."""
        # At shutdown a response still being written gets a second, then is cut.
        self.runner = web.AppRunner(
            self.app, access_log=None, handle_signals=False, shutdown_timeout=1.0
        )
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port, reuse_address=True, backlog=128)
        await site.start()
        self.port = int(self.runner.addresses[0][1])
        return self.port

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    # -- authentication --------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Protected mode, then the request's session, logged in as its credentials say."""
        state = self.state
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if (
            state.config.params.get("protected-mode", "yes") == "yes"
            and state.config.requirepass is None
            and not is_loopback(peer)
        ):
            raise web.HTTPForbidden(
                text="protected mode: with no password set, only loopback clients are served\n"
            )
        session = Session(state, addr=_addr(peer), laddr=f"http:{self.port}")
        session.resp = 3
        header = request.headers.get("Authorization")
        if header is not None:
            try:
                creds = BasicAuth.decode(header)
            except ValueError:
                raise _unauthorized("malformed Basic credentials") from None
            argv = [b"AUTH", creds.login.encode(), creds.password.encode()]
            reply = DISPATCHER.execute(session, argv)
            if isinstance(reply, ErrorReply):
                raise _unauthorized(bytes(reply).decode("utf-8", "replace"))
        elif not session.authenticated and state.users.auth_required():
            raise _unauthorized("authentication required")
        request[SESSION] = session
        try:
            return await handler(request)
        finally:
            # Drop what the request's checkout holds (a view is freed with its last
            # holder), whatever else still refers to the request.
            del request[SESSION]
            session.view_lsn = None
            session.branch = None
            session.select(0)
            session_closed(session)

    # -- endpoints -------------------------------------------------------------------

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        """Prometheus' text format; the user must be allowed to run INFO (what it
        reveals is INFO's)."""
        session = request[SESSION]
        info = lookup([b"info"])
        assert isinstance(info, Command)
        if not session.acl_all and (refusal := denied(session, info, [b"info"])) is not None:
            raise web.HTTPForbidden(text=refusal.decode("utf-8", "replace") + "\n")
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name, kind = STATIC[request.path]
        return web.Response(
            body=_static(name),
            content_type=kind,
            charset="utf-8",
            headers={
                "Cache-Control": "no-cache",
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": CSP,
            },
        )


def _unauthorized(why: str) -> web.HTTPUnauthorized:
    return web.HTTPUnauthorized(text=why + "\n", headers={"WWW-Authenticate": REALM})


def _addr(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "")
