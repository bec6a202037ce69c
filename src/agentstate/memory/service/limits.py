"""What a stranger may send the memory server before its token is checked (issue 40, notebook 06).

Over HTTP anyone who can reach the port can open connections and send bytes
before the bearer token is read, so the server bounds that, each bound a
setting with a safe default (``agentstate memory serve --help`` and
``docs/memory-server.md``):

- **header size** (``--max-header-bytes``, 16 KiB): uvicorn's h11 protocol
  with ``h11_max_incomplete_event_size``: a request head, or one header line,
  larger than that gets 400 and the connection is closed; nothing more is
  buffered. (uvicorn's httptools protocol has no such bound, so h11 is used.)
- **request size** (``--max-request-bytes``, 4 MiB): :class:`BodyLimit`
  answers 413 to a ``Content-Length`` above it without reading the body, and
  stops a chunked body at the limit.
- **concurrent connections** (``--max-connections``, 256): past it, the
  oldest connection that is between requests (it never sent one, or waits
  idle after its reply) is closed to make room; if every connection is
  mid-request, the new one is closed. So idle connections, however many, never
  keep the token holder out.
- **idle connections** (``--idle-timeout``, 10 s): a connection that has not
  sent a complete request head within that time after it opened (or after its
  last reply) is closed. uvicorn's own ``timeout_keep_alive`` covers only the
  time after a reply; a connection that never sends anything would be kept forever.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

BURST = 64  # connections accepted per wake-up of the event loop (uvicorn's backlog)


@dataclass(frozen=True)
class Limits:
    """The bounds on unauthenticated traffic (see the module)."""

    max_header_bytes: int = 16 * 1024
    max_request_bytes: int = 4 * 1024 * 1024
    max_connections: int = 256
    idle_timeout: float = 10.0

    def uvicorn_options(self) -> dict[str, Any]:
        """The ``uvicorn.Config`` options that carry these limits."""
        return {
            "http": guarded_protocol(self),
            "h11_max_incomplete_event_size": self.max_header_bytes,
            "timeout_keep_alive": max(1, int(self.idle_timeout)),
            # asyncio accepts up to `backlog` sockets in one go before any of them runs
            # connection_made (where the cap closes one): a burst that size must fit in the
            # file limit, so it stays well under the cap and a common 1024-descriptor limit
            "backlog": BURST,
        }


def guarded_protocol(limits: Limits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the connection cap and the idle deadline of ``limits``."""

    class Guarded(_GuardedH11):
        max_connections = limits.max_connections
        idle_timeout = limits.idle_timeout

    return Guarded


class _GuardedH11(H11Protocol):
    max_connections = Limits.max_connections
    idle_timeout = Limits.idle_timeout
    _idle_timer: asyncio.TimerHandle | None = None
    _idle_since = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Past the cap, close the oldest idle connection (or this one); start its idle clock."""
        super().connection_made(transport)
        # A connection closed earlier in this burst stays in `connections` until the loop
        # runs its connection_lost: it no longer counts, and it is never chosen twice.
        live = [c for c in self.connections if not c.transport.is_closing()]
        if len(live) > self.max_connections:
            idle = [c for c in live if isinstance(c, _GuardedH11) and c._between()]
            idle = [c for c in idle if c is not self]
            if not idle:  # every other connection is mid-request: this one waits its turn
                transport.abort()
                return
            min(idle, key=lambda c: c._idle_since).transport.abort()
        self._arm()

    def _between(self) -> bool:
        """True while the connection is between requests (no request head received)."""
        return self.conn.their_state is h11.IDLE and self._idle_timer is not None

    def _arm(self) -> None:
        self._disarm()
        self._idle_since = time.monotonic()
        self._idle_timer = self.loop.call_later(self.idle_timeout, self._idle_expired)

    def _disarm(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle_expired(self) -> None:
        self._idle_timer = None
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        """As uvicorn, then stop the idle clock once a complete request head is in."""
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # a complete request head arrived
            self._disarm()

    def on_response_complete(self) -> None:
        """As uvicorn, then start the idle clock for the next request."""
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the idle clock, then as uvicorn."""
        self._disarm()
        super().connection_lost(exc)


class _TooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: a request body larger than ``max_bytes`` gets 413 (read no further)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0
        started = False

        async def counted_receive():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise _TooLarge
            return message

        async def watched_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except _TooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send) -> None:
        body = json.dumps({"error": f"request body over {self.max_bytes} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
