"""The agent side of the memory server: MCP tools through langchain-mcp-adapters.

``MemoryClient(url)`` loads the server's tools with ``load_mcp_tools`` and
routes every call through one long-lived MCP session (a new session per call
costs ~100 ms here; the server keeps its side of the session too, see
``scripts/bench_memory.py`` for what a call costs). The session lives in its own asyncio
task, because when the server dies the MCP client cancels the task that owns
the session: that must not be the notebook's or the graph's task.

If the server goes away, a call waits for it to come back and retries. A
write retried blindly could land twice (the server may have queued it just
before dying), so every ``add_entry`` and ``put_context`` carries an
``idempotency_key``: the caller's (the capture graph uses thread and
``msg_idx``) or, if it gave none, one the client draws for that call and
sends again on each retry. The server stores the key with the write and
answers "already enqueued" to a second write with it, so a retry neither
doubles a write nor loses one (a repeated message has its own key). Every
call ends within ``timeout`` per attempt: a session that is closing never
takes a new request, and a transport closed mid-call is retried like a
missing server.

When the server requires a bearer token, the client sends
``AGENTSTATE_MEMORY_TOKEN`` (or ``token=``); a refused token is a
``MemoryAccessDenied`` at once, never a retry, whose message says whether the
token was missing or wrong. Whether a server answers is asked of the host and
port its URL names (443 for an https URL without a port), never of 127.0.0.1,
so replicas on other machines are found and failed over to.
:class:`SyncMemoryClient` is this client for sync code: the same object, run
on a private event loop thread. Taught in notebook 06.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections.abc import Coroutine, Sequence
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import httpx
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.sessions import StreamableHttpConnection, create_session
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, TextContent

from agentstate.memory.service.options import TOKEN_ENV, start_hint, token_problem
from agentstate.servers.loopback import url_endpoint, url_open_async

WRITE_TOOLS = ("add_entry", "put_context")
KEY = "idempotency_key"  # the write's key, stored by the server: a resent write lands once
DUPLICATE = "already enqueued"  # the server's answer to a write whose key it already has
OPEN_TIMEOUT = 10.0  # seconds to open a session, on top of a call's own timeout
SESSION_TERMINATED = 32600  # what the MCP client reports when the server forgot the session
CONNECTION_CLOSED = -32000  # ... and for calls in flight when the transport closed
REQUEST_TIMEOUT = 408  # ... and for a call whose reply did not come within the read timeout
T = TypeVar("T")


class MemoryServerUnavailable(ConnectionError):
    """No memory server answers; the message says how to start one."""


class MemoryAccessDenied(PermissionError):
    """The server requires a bearer token and this client's was missing or wrong."""


class MemoryToolError(RuntimeError):
    """The server rejected a call (bad input, unknown memory...)."""


def http_connection(url: str, token: str | None = None) -> StreamableHttpConnection:
    """The langchain-mcp-adapters connection for a streamable HTTP server (with its token)."""
    connection: StreamableHttpConnection = {"transport": "streamable_http", "url": url}
    if token:
        connection["headers"] = {"Authorization": f"Bearer {token}"}
    return connection


def access_denied(url: str, *, sent: bool) -> MemoryAccessDenied:
    """The 401 answer: a token was sent and refused (wrong), or none was sent (needed)."""
    if sent:
        why = (
            "it refused the bearer token this client sent (a wrong token); set "
            f"{TOKEN_ENV} (or token=) to the token the server was started with"
        )
    else:
        why = (
            "it needs a bearer token and this client sent none; set "
            f"{TOKEN_ENV} (or token=) to the server's token"
        )
    return MemoryAccessDenied(f"the memory server at {url} refused the request: {why}")


def text_of(result: CallToolResult) -> str:
    """The text parts of a tool result, joined."""
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


# the transport closed under a call (a killed server): retried like a missing server
_GONE = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    httpx.TransportError,
    ConnectionError,
)


class _QuietTransport(logging.Filter):
    """Drop the MCP client's log lines for a server that went away (handled here, retried).

    When the server is killed or restarted the SDK logs each reply it could not
    deliver with a traceback, and a "Session termination failed: 404" warning
    when a closed session is ended on a restarted server: noise under a
    notebook cell for events this client handles itself. Other records pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """False (dropped) for a closed transport or a session the server already forgot."""
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, _GONE):
            return False
        return not str(record.msg).startswith("Session termination failed")


_client_log = logging.getLogger("mcp.client.streamable_http")
if not any(isinstance(f, _QuietTransport) for f in _client_log.filters):
    _client_log.addFilter(_QuietTransport())


class _Session:
    """One MCP session: its task, its own queue of requests, and whether it still takes them."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue = asyncio.Queue()
        self.futures: set[asyncio.Future] = set()
        self.open = True
        self.task: asyncio.Task | None = None

    def fail_all(self, exc: BaseException) -> None:
        """Take no more requests; every caller still waiting gets ``exc``."""
        self.open = False
        while not self.requests.empty():
            self.requests.get_nowait()
        for future in list(self.futures):
            if not future.done():
                future.set_exception(exc)


class _SessionTask:
    """One MCP session owned by a background task; callers hand it their requests.

    Requests run concurrently over the session (JSON-RPC ids keep the replies
    apart), so several conversations can be captured at once; each caller
    still awaits its own call, which keeps one memory's calls in order. A
    session that ends (server restarted, transport closed) stops taking
    requests before its task finishes closing, and fails those it holds, so a
    request is never queued where nobody will read it; the next call opens a
    new session.
    """

    def __init__(self, connection: StreamableHttpConnection, timeout: float) -> None:
        self.connection = connection
        self.timeout = timeout
        self._session: _Session | None = None

    async def call(self, name: str, args: dict[str, Any]) -> CallToolResult:
        """Send one tool call through the session (opened on first use) and await its result.

        Waits at most ``timeout`` (plus the time to open a session); then
        ``MemoryServerUnavailable``, and the session is dropped.
        """
        session = self._session
        if session is None or not session.open or session.task is None or session.task.done():
            session = self._session = _Session()
            session.task = asyncio.create_task(self._run(session), name="memory-mcp-session")
        future = asyncio.get_running_loop().create_future()
        session.futures.add(future)
        session.requests.put_nowait((name, args, future))
        try:
            return await asyncio.wait_for(future, self.timeout + OPEN_TIMEOUT)
        except TimeoutError:
            session.fail_all(MemoryServerUnavailable("the memory session stopped answering"))
            raise MemoryServerUnavailable(
                f"no reply from {self._url} within {self.timeout + OPEN_TIMEOUT:g}s"
            ) from None
        finally:
            session.futures.discard(future)

    async def _run(self, state: _Session) -> None:
        workers: set[asyncio.Task] = set()
        url = self._url
        try:
            async with create_session(self.connection) as session:
                try:
                    await session.initialize()
                    while state.open:
                        request = await state.requests.get()
                        if request is None:  # the server ended the session: open a new one
                            break
                        worker = asyncio.create_task(self._one(state, session, *request))
                        workers.add(worker)
                        worker.add_done_callback(workers.discard)
                finally:  # before the transport's own (awaiting) cleanup: take nothing more
                    state.open = False
        except asyncio.CancelledError:
            state.fail_all(MemoryServerUnavailable("memory client closed"))
            raise
        except BaseException as exc:  # the transport died: ExceptionGroup from the MCP client
            if _status(exc) == 401:
                state.fail_all(access_denied(url, sent="headers" in self.connection))
                return
            state.fail_all(MemoryServerUnavailable(f"{start_hint(url)} ({_root_cause(exc)})"))
        finally:
            state.fail_all(MemoryServerUnavailable(f"{url} ended the session"))
            for worker in workers:
                worker.cancel()

    async def _one(self, state: _Session, session, name: str, args: dict[str, Any], future) -> None:
        def settle(exc: BaseException | None = None, result: Any = None) -> None:
            if not future.done():
                future.set_exception(exc) if exc is not None else future.set_result(result)

        def gone(why: str) -> None:  # the session is finished: fail its callers, wake its task
            settle(MemoryServerUnavailable(f"{why} ({start_hint(self._url)})"))
            state.fail_all(MemoryServerUnavailable(f"{self._url} ended the session"))
            state.requests.put_nowait(None)

        try:
            result = await session.call_tool(
                name, args, read_timeout_seconds=timedelta(seconds=self.timeout)
            )
        except McpError as exc:
            if exc.error.code in (SESSION_TERMINATED, CONNECTION_CLOSED):  # server restarted/died
                gone(exc.error.message)
                return
            if exc.error.code == REQUEST_TIMEOUT:  # no reply: a request lost with a killed server
                gone(f"no reply within {self.timeout:g}s")  # retried; a write's key keeps it once
                return
            settle(exc)  # a protocol error: the session itself is fine
            return
        except asyncio.CancelledError:
            settle(MemoryServerUnavailable("the memory session closed during the call"))
            raise
        except _GONE as exc:  # e.g. a bare ClosedResourceError after a kill -9
            gone(f"the connection closed during the call ({type(exc).__name__})")
            return
        except Exception as exc:
            settle(exc)
            return
        settle(result=result)

    @property
    def _url(self) -> str:
        return self.connection.get("url", "?")

    async def close(self) -> None:
        """Cancel the session's task; waiting callers get ``MemoryServerUnavailable``."""
        session, self._session = self._session, None
        if session is not None and session.task is not None and not session.task.done():
            session.task.cancel()
            try:
                await session.task
            except (asyncio.CancelledError, Exception):
                pass


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
    """Tools and direct calls against a memory server (or a fleet's replicas), with retry.

    ``retry_for`` is how long a call waits for a missing server (0: fail at
    once with the hint that says how to start it); ``timeout`` bounds each
    attempt. ``stats`` counts retries and fail-overs, for the notebooks' restart
    lessons. ``token`` defaults to ``$AGENTSTATE_MEMORY_TOKEN``; one an HTTP
    header cannot carry is refused here (``MemoryAccessDenied``). Text that UTF-8
    cannot carry (a lone surrogate) is refused before anything is sent.

    ``url`` may be a list: the replicas of one fleet (servers on one Postgres
    database). Calls go to one replica; when it stops answering (killed,
    restarted) the call is sent again, with the same idempotency key, to the
    next replica whose port answers, so a write that reached the dead one
    before it died is answered "already enqueued", not stored twice.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        retry_for: float = 30.0,
        timeout: float = 60.0,
        token: str | None = None,
    ) -> None:
        self.urls = [url] if isinstance(url, str) else list(url)
        if not self.urls:
            raise ValueError("MemoryClient needs the URL of at least one memory server")
        for each in self.urls:
            url_endpoint(each)  # ValueError now for a URL no call could reach
            if "@" in urlsplit(each).netloc:  # it would be shown in every message: refuse
                raise ValueError(
                    "a memory server URL must not carry user:password@; the server takes a "
                    f"bearer token: set {TOKEN_ENV} (or token=)"
                )
        self.retry_for = retry_for
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        problem = token_problem(token) if token else None
        if problem:  # httpx could not send it: say so now, not "no memory server answers"
            raise MemoryAccessDenied(f"{TOKEN_ENV} (or token=) is unusable: {problem}")
        self._token = token
        self._timeout = timeout
        self._use(0)
        self.stats = {"retries": 0, "failovers": 0}

    def _use(self, replica: int) -> None:
        """Send the next calls to ``urls[replica]``, over a session of its own."""
        self.replica = replica
        self.url = self.urls[replica]
        self.connection = http_connection(self.url, self._token)
        self._session = _SessionTask(self.connection, self._timeout)

    async def __aenter__(self) -> MemoryClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        """End the MCP session (its background task)."""
        await self._session.close()

    async def tools(self) -> list[BaseTool]:
        """The server's tools as LangChain tools, every call routed through this client."""
        if not await url_open_async(self.url):
            if not await self._fail_over(self._session, time.monotonic()):
                raise MemoryServerUnavailable(start_hint(self.url))
        try:
            return await load_mcp_tools(
                None,
                connection=self.connection,
                tool_interceptors=[self._intercept],
                server_name="memory",
            )
        except Exception as exc:  # listing opens a session of its own: same answers as a call
            if _status(exc) == 401:
                raise access_denied(self.url, sent="headers" in self.connection) from None
            if isinstance(_root(exc), _GONE):
                raise MemoryServerUnavailable(
                    f"{start_hint(self.url)} ({_root_cause(exc)})"
                ) from None
            raise

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
        _check_encodable(name, args)
        if name in WRITE_TOOLS and args.get(KEY) is None:
            args = {**args, KEY: f"call-{uuid.uuid4().hex}"}  # the same key on every retry
        deadline = time.monotonic() + self.retry_for
        while True:
            session = self._session
            try:
                return await session.call(name, args)
            except MemoryServerUnavailable:
                if time.monotonic() >= deadline:
                    raise
                self.stats["retries"] += 1
                if not await self._fail_over(session, deadline):
                    raise MemoryServerUnavailable(start_hint(self.url)) from None

    async def _fail_over(self, failed: _SessionTask, deadline: float) -> bool:
        """Wait until a replica answers (the next one first; with one URL, that URL).

        False at ``deadline``. Calls that failed together move once: a caller
        whose session was already replaced just retries on the new one.
        """
        while True:
            if self._session is not failed:
                return True
            count = len(self.urls)
            for step in range(1, count + 1) if count > 1 else (0,):
                replica = (self.replica + step) % count
                if await url_open_async(self.urls[replica]):
                    if replica != self.replica:
                        self.stats["failovers"] += 1
                        self._use(replica)
                        await failed.close()
                    return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.1)


def _check_encodable(name: str, args: dict[str, Any]) -> None:
    """``MemoryToolError`` naming the argument if a string in ``args`` is not valid UTF-8 text.

    A lone surrogate (``"\\ud800"``) is a valid Python str that no UTF-8 encoder
    takes; sent as is, it breaks the session with a raw codec error.
    """

    def walk(value: Any, where: str) -> None:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise MemoryToolError(
                    f"{name}: {where} contains a lone surrogate {value[exc.start]!r} at "
                    f"character {exc.start}: not valid Unicode text; nothing was sent"
                ) from None
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k, where)
                walk(v, f"{where}.{k}")
        elif isinstance(value, list | tuple):
            for n, v in enumerate(value):
                walk(v, f"{where}[{n}]")

    for key, value in args.items():
        walk(value, key)


class SyncMemoryClient:
    """:class:`MemoryClient` for sync code: the same keys, retries and fail-over.

    The async client runs on a private event loop in a daemon thread of its own
    (one per ``SyncMemoryClient``); every method hands its coroutine to that loop
    and waits for the answer, so nothing is duplicated and the client's session
    outlives each call, as in async code. Its tools run sync (``invoke``, a sync
    tool in ``create_agent``) and async (``ainvoke``), both through that loop.
    Use it as a context manager, or call :meth:`close`. Arguments as for
    :class:`MemoryClient`. Taught beside it in notebook 06.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        retry_for: float = 30.0,
        timeout: float = 60.0,
        token: str | None = None,
    ) -> None:
        self.client = MemoryClient(url, retry_for=retry_for, timeout=timeout, token=token)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="memory-client-loop", daemon=True
        )
        self._thread.start()
        self._closed = False

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the private loop and wait for its result (its exception, raised)."""
        if self._closed:
            coro.close()
            raise RuntimeError("this SyncMemoryClient is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a SyncMemoryClient method was called from its own loop")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _bridge(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the private loop from another event loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    @property
    def url(self) -> str:
        """The replica calls go to now."""
        return self.client.url

    @property
    def stats(self) -> dict[str, int]:
        """Retries and fail-overs so far (see :class:`MemoryClient`)."""
        return self.client.stats

    def call(self, name: str, **args: Any) -> Any:
        """:meth:`MemoryClient.call`, from sync code."""
        return self._run(self.client.call(name, **args))

    def call_result(self, name: str, args: dict[str, Any]) -> CallToolResult:
        """:meth:`MemoryClient.call_result`, from sync code."""
        return self._run(self.client.call_result(name, args))

    def tools(self) -> list[BaseTool]:
        """The server's tools, callable sync (``invoke``) and async (``ainvoke``)."""
        return [self._both(tool) for tool in self._run(self.client.tools())]

    def _both(self, tool: BaseTool) -> BaseTool:
        coroutine = tool.coroutine  # type: ignore[attr-defined]

        def run(runtime: Any = None, **arguments: Any) -> Any:
            return self._run(coroutine(runtime=runtime, **arguments))

        async def arun(runtime: Any = None, **arguments: Any) -> Any:
            return await self._bridge(coroutine(runtime=runtime, **arguments))

        return tool.model_copy(update={"func": run, "coroutine": arun})

    def close(self) -> None:
        """End the session, then the private loop and its thread."""
        if self._closed:
            return
        try:
            self._run(self.client.close())
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> SyncMemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
