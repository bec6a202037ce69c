"""A small HTTP/1.1 reverse proxy on another loopback address, for the "other host" tests.

``docs/memory-server.md`` puts each machine's memory replica behind that
machine's own proxy; here each "machine" is a loopback address (127.0.0.2,
127.0.0.3) and :class:`HostProxy` forwards to a replica on 127.0.0.1,
rewriting ``Host`` as a proxy does (the MCP server refuses a Host it does not
serve). It reads each request head, rewrites ``Host``, forwards the body by
its ``Content-Length`` and pipes the replies back byte for byte. ``close()``
stops listening and drops every connection: the machine is gone.
"""

from __future__ import annotations

import asyncio
import threading


class HostProxy:
    """Listen on ``host``:(a free port) and forward to 127.0.0.1:``target_port``."""

    def __init__(self, host: str, target_port: int) -> None:
        self.host = host
        self.target_port = target_port
        self.requests = 0
        self._loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = self._call(asyncio.start_server(self._serve, host, 0))
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    async def _serve(self, reader, writer) -> None:
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:  # the replica is gone: the connection just closes
            writer.close()
            return
        self._writers.add(up_writer)
        back = asyncio.create_task(self._pipe(up_reader, writer))
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                length = 0
                out = [lines[0]]
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    if name.lower() == b"host":
                        line = b"Host: 127.0.0.1:%d" % self.target_port
                    elif name.lower() == b"content-length":
                        length = int(value)
                    elif name.lower() == b"transfer-encoding":
                        raise AssertionError("the test proxy forwards Content-Length bodies only")
                    out.append(line)
                self.requests += 1
                up_writer.write(b"\r\n".join(out) + await reader.readexactly(length))
                await up_writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            back.cancel()
            for w in (writer, up_writer):
                w.close()
                self._writers.discard(w)

    @staticmethod
    async def _pipe(reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        """Stop listening and drop every connection (the machine went away)."""

        async def shut():
            self._server.close()
            for w in list(self._writers):
                w.transport.abort()
            await self._server.wait_closed()

        if self._loop.is_running():
            self._call(shut())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> HostProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
