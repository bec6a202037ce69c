"""The agent side of the memory server: MCP tools through langchain-mcp-adapters.

``MemoryClient(url)`` loads the server's tools with ``load_mcp_tools`` and
routes every call through one long-lived MCP session (a new session per call
costs ~100 ms here; the server keeps its side of the session too, see
``scripts/bench_memory.py`` for what a call costs). The session lives in its own asyncio
task, because when the server dies the MCP client cancels the task that owns
the session: that must not be the notebook's or the graph's task.

If the server goes away, a call waits for it to come back and retries. A
write retried blindly could land twice (the server may have queued it just
before dying), so before retrying ``add_entry`` or ``put_context`` the client
asks the server (``await_consistency`` then a read) whether the write is
already there. Queued writes survive a server kill (the queue is in SQLite),
so the answer is exact.

When the server requires a bearer token, the client sends
``AGENTSTATE_MEMORY_TOKEN`` (or ``token=``); a refused token is a
``MemoryAccessDenied`` at once, never a retry. Taught in notebook 06.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from typing import Any

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.sessions import create_session
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, TextContent

from agentstate.memory.cli import TOKEN_ENV, port_of, start_hint
from agentstate.memory.process import port_open

WRITE_TOOLS = ("add_entry", "put_context")
SESSION_TERMINATED = 32600  # what the MCP client reports when the server forgot the session
CONNECTION_CLOSED = -32000  # ... and for calls in flight when the transport closed


class MemoryServerUnavailable(ConnectionError):
    """No memory server answers; the message says how to start one."""


class MemoryAccessDenied(PermissionError):
    """The server requires a bearer token and this client's was missing or wrong."""


class MemoryToolError(RuntimeError):
    """The server rejected a call (bad input, unknown memory...)."""


def http_connection(url: str, token: str | None = None) -> dict[str, Any]:
    """The langchain-mcp-adapters connection for a streamable HTTP server (with its token)."""
    connection: dict[str, Any] = {"transport": "streamable_http", "url": url}
    if token:
        connection["headers"] = {"Authorization": f"Bearer {token}"}
    return connection


def text_of(result: CallToolResult) -> str:
    """The text parts of a tool result, joined."""
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


class _SessionTask:
    """One MCP session owned by a background task; callers hand it their requests.

    Requests run concurrently over the session (JSON-RPC ids keep the replies
    apart), so several conversations can be captured at once; each caller
    still awaits its own call, which keeps one memory's calls in order.
    """

    def __init__(self, connection: dict[str, Any], timeout: float) -> None:
        self.connection = connection
        self.timeout = timeout
        self._requests: asyncio.Queue = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._inflight: set[asyncio.Future] = set()

    async def call(self, name: str, args: dict[str, Any]) -> CallToolResult:
        """Send one tool call through the session (opened on first use) and await its result."""
        future = asyncio.get_running_loop().create_future()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="memory-mcp-session")
        self._inflight.add(future)
        await self._requests.put((name, args, future))
        try:
            return await future
        finally:
            self._inflight.discard(future)

    def _fail_all(self, exc: BaseException) -> None:
        """Every waiting caller gets ``exc``; requests not sent yet are dropped."""
        while not self._requests.empty():
            self._requests.get_nowait()
        for future in list(self._inflight):
            if not future.done():
                future.set_exception(exc)

    async def _run(self) -> None:
        workers: set[asyncio.Task] = set()
        url = self.connection.get("url", "?")
        try:
            async with create_session(self.connection) as session:
                await session.initialize()
                while True:
                    request = await self._requests.get()
                    if request is None:  # the server ended the session: open a new one
                        self._fail_all(MemoryServerUnavailable(f"{url} ended the session"))
                        return
                    worker = asyncio.create_task(self._one(session, *request))
                    workers.add(worker)
                    worker.add_done_callback(workers.discard)
        except asyncio.CancelledError:
            self._fail_all(MemoryServerUnavailable("memory client closed"))
            raise
        except BaseException as exc:  # the transport died: ExceptionGroup from the MCP client
            if _status(exc) == 401:
                self._fail_all(
                    MemoryAccessDenied(
                        f"the memory server at {url} refused the request: it needs a bearer "
                        f"token; set {TOKEN_ENV} to the server's token"
                    )
                )
                return
            self._fail_all(MemoryServerUnavailable(f"{start_hint(url)} ({_root_cause(exc)})"))
        finally:
            for worker in workers:
                worker.cancel()

    async def _one(self, session, name: str, args: dict[str, Any], future) -> None:
        def settle(exc: BaseException | None = None, result: Any = None) -> None:
            if not future.done():
                future.set_exception(exc) if exc is not None else future.set_result(result)

        try:
            result = await session.call_tool(
                name, args, read_timeout_seconds=timedelta(seconds=self.timeout)
            )
        except McpError as exc:
            if exc.error.code in (SESSION_TERMINATED, CONNECTION_CLOSED):  # server restarted/died
                settle(MemoryServerUnavailable(f"{exc.error.message} ({start_hint(self._url)})"))
                self._requests.put_nowait(None)
                return
            settle(exc)  # a protocol error: the session itself is fine
            return
        except asyncio.CancelledError:
            settle(MemoryServerUnavailable("the memory session closed during the call"))
            raise
        except Exception as exc:
            settle(exc)
            return
        settle(result=result)

    @property
    def _url(self) -> str:
        return self.connection.get("url", "?")

    async def close(self) -> None:
        """Cancel the session's task; waiting callers get ``MemoryServerUnavailable``."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._task = None


def _root(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _root_cause(exc: BaseException) -> str:
    root = _root(exc)
    return f"{type(root).__name__}: {root}"


def _status(exc: BaseException) -> int | None:
    """The HTTP status behind a transport failure, if it was an HTTP error."""
    response = getattr(_root(exc), "response", None)
    return getattr(response, "status_code", None)


class MemoryClient:
    """Tools and direct calls against one memory server, with retry after a restart.

    ``retry_for`` is how long a call waits for a missing server (0: fail at
    once with the hint that says how to start it). ``stats`` counts retries and
    writes found already applied, for the notebook's restart lesson. ``token``
    defaults to ``$AGENTSTATE_MEMORY_TOKEN``.
    """

    def __init__(
        self,
        url: str,
        *,
        retry_for: float = 30.0,
        timeout: float = 60.0,
        token: str | None = None,
    ) -> None:
        self.url = url
        self.retry_for = retry_for
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self.connection = http_connection(url, token)
        self._session = _SessionTask(self.connection, timeout)
        self.stats = {"retries": 0, "already_written": 0}

    async def __aenter__(self) -> MemoryClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        """End the MCP session (its background task)."""
        await self._session.close()

    async def tools(self) -> list[BaseTool]:
        """The server's tools as LangChain tools, every call routed through this client."""
        if not port_open(port_of(self.url)):
            raise MemoryServerUnavailable(start_hint(self.url))
        return await load_mcp_tools(
            None,
            connection=self.connection,
            tool_interceptors=[self._intercept],
            server_name="memory",
        )

    async def _intercept(self, request, handler) -> CallToolResult:
        return await self.call_result(request.name, dict(request.args))

    async def call(self, name: str, **args: Any) -> Any:
        """Call a tool directly; return its structured content (a dict) or its text.

        Raises ``MemoryToolError`` with the server's message when the call is refused.
        """
        result = await self.call_result(name, args)
        if result.isError:
            raise MemoryToolError(f"{name}: {text_of(result)}")
        if result.structuredContent is not None and "result" not in result.structuredContent:
            return result.structuredContent
        return text_of(result)

    async def call_result(self, name: str, args: dict[str, Any]) -> CallToolResult:
        """Call a tool through the kept session, waiting for a restarted server (see class)."""
        deadline = time.monotonic() + self.retry_for
        failed = False
        while True:
            try:
                if failed and name in WRITE_TOOLS and await self.already_written(name, args):
                    self.stats["already_written"] += 1
                    return CallToolResult(content=[TextContent(type="text", text="enqueued")])
                return await self._session.call(name, args)
            except MemoryServerUnavailable:
                if time.monotonic() >= deadline:
                    raise
                failed = True
                self.stats["retries"] += 1
                await self._wait_for_server(deadline)

    async def _wait_for_server(self, deadline: float) -> None:
        port = port_of(self.url)
        while not port_open(port):
            if time.monotonic() >= deadline:
                raise MemoryServerUnavailable(start_hint(self.url))
            await asyncio.sleep(0.1)

    async def already_written(self, name: str, args: dict[str, Any]) -> bool:
        """After a lost reply: is the write in the store? (queued writes survive a kill)."""
        memory_id = args.get("memory_id")
        await self._session.call("await_consistency", {"memory_id": memory_id})
        if name == "add_entry":
            result = await self._session.call(
                "list_entries",
                {"vault_id": args.get("vault_id"), "memory_id": memory_id, "limit": 50},
            )
            entries = [] if result.isError else (result.structuredContent or {}).get("entries", [])
            return any(
                e["raw_entry"] == args.get("raw_entry") and e["tags"] == (args.get("tags") or {})
                for e in entries
            )
        result = await self._session.call(
            "search_memories", {"memory_id": memory_id, "query": "", "top_ke": 0, "top_kc": 1}
        )
        contexts = [] if result.isError else (result.structuredContent or {}).get("contexts", [])
        return bool(contexts) and contexts[0]["content"] == args.get("content")
