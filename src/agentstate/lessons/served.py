"""The graphs ``langgraph.json`` serves: every fixed agent of the series, runnable offline.

``langgraph dev`` (or any LangGraph Agent Server) imports this module and
serves, with its own checkpointer:

- ``reducer``      lesson 02: the field-merge reducer agent (notebook 02)
- ``turn_cache``   lesson 03: the same agent plus the turn cache (notebook 03)
- ``subagents``    lesson 04: parent and collector subagent sharing one schema (notebook 04)
- ``memory_capture`` lesson 06: the tool-only capture graph over the MCP memory server
  (notebook 06), behind an input of one conversation event per run
- ``experts`` (lesson 05) lives in :mod:`agentstate.experts.server`.

Offline, each graph plays the lesson's replies with a :class:`PolicyChatModel`
that never runs out: a user message that holds a JSON object of fields is
answered with one reply storing every field in parallel plus a reader in the
same batch, then a final text saying how many fields the reader saw (any
other text is read as the lesson's request, the five Postgres fields). Lesson
04's parent delegates the fields to the collector subagent, reads them back
in the next step, then answers. The capture graph plays the well-behaved
capture policy of notebook 06. With ``AGENTSTATE_LLM_BASE_URL`` set, every
graph here uses that OpenAI-compatible endpoint instead. The README's
"Serving every graph" section shows how to run and call them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import uuid
import weakref
from collections.abc import Mapping
from typing import Any, Literal, NotRequired

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict  # the Agent Server derives schemas only from this one

from agentstate.core import SecretStore
from agentstate.lessons.fixtures import POSTGRES_FIELDS, delegate, store_calls
from agentstate.memory.capture.calls import write_key
from agentstate.memory.capture.graph import InvalidTurn, build_capture_graph, check_turn
from agentstate.memory.capture.observer import VAULT
from agentstate.memory.capture.policy import CapturePolicy
from agentstate.memory.client import DUPLICATE, WRITE_TOOLS, MemoryClient
from agentstate.memory.service.store import MAX_MSG_IDX, MemoryInputError, check_key
from agentstate.models import get_chat_model, model_settings, reply, tool_call
from agentstate.models.policy import PolicyChatModel
from agentstate.rds import (
    COLLECTOR,
    build_reducer_agent,
    build_shared_schema_agent,
    build_turn_cache_agent,
)

READER = "get_collected_requirements"


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


def requested_fields(text: str) -> dict[str, Any]:
    """The fields a user message carries: a JSON object as given, else the lesson's request."""
    try:
        fields = json.loads(text)
    except json.JSONDecodeError:
        return dict(POSTGRES_FIELDS)
    return dict(fields) if isinstance(fields, dict) and fields else dict(POSTGRES_FIELDS)


def _this_turn(messages: list[BaseMessage]) -> tuple[HumanMessage | None, list[BaseMessage]]:
    """The last user message and everything after it."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, HumanMessage):
            return message, messages[i + 1 :]
    return None, []


def _tool_replies(after: list[BaseMessage], name: str) -> list[ToolMessage]:
    return [m for m in after if isinstance(m, ToolMessage) and m.name == name]


def _seen_by_reader(after: list[BaseMessage]) -> int:
    reads = _tool_replies(after, READER)
    if not reads or reads[-1].status == "error":
        return -1
    return len(json.loads(_text(reads[-1])))


def rds_policy(messages: list[BaseMessage]) -> AIMessage:
    """Lessons 02-03: store the user's fields in one parallel batch with a reader, then report."""
    user, after = _this_turn(messages)
    if user is None:
        return reply(text="Send the fields to store, as a JSON object.")
    if not any(isinstance(m, ToolMessage) for m in after):
        return reply(*store_calls(requested_fields(_text(user))), tool_call(READER))
    stored = [m for m in _tool_replies(after, "store_requirement") if m.status != "error"]
    return reply(
        text=f"Stored {len(stored)} field(s); the reader in the same batch saw "
        f"{_seen_by_reader(after)}."
    )


def parent_policy(messages: list[BaseMessage]) -> AIMessage:
    """Lesson 04's parent: delegate the fields to the collector, read them back, answer."""
    user, after = _this_turn(messages)
    if user is None:
        return reply(text="Send the fields to collect, as a JSON object.")
    if not any(isinstance(m, ToolMessage) for m in after):
        return delegate(requested_fields(_text(user)))
    if not _tool_replies(after, READER):
        return reply(tool_call(READER))
    return reply(text=f"The collector's fields reached me: I see {_seen_by_reader(after)}.")


def collector_policy(messages: list[BaseMessage]) -> AIMessage:
    """Lesson 04's collector: store the JSON fields of its task in parallel, then report."""
    task, after = _this_turn(messages)
    if task is None:
        return reply(text="No task given.")
    if not after:
        return reply(*store_calls(requested_fields(_text(task))))
    stored = [m for m in _tool_replies(after, "store_requirement") if m.status != "error"]
    return reply(text=f"Stored {len(stored)} field(s).")


def served_model(policy: Any, name: str, environ: Mapping[str, str] | None = None) -> BaseChatModel:
    """The endpoint named by ``AGENTSTATE_LLM_BASE_URL`` if set, else ``policy`` offline."""
    settings = model_settings(environ)
    if settings.is_real:
        return get_chat_model(settings=settings)
    return PolicyChatModel(policy=policy, model_name=name)


# The served graphs are built once, at import, and serve every user and thread: their
# passwords all go to this one store, each value under its own random reference, so one
# user's reference never resolves to another user's password (a deploy step in this
# process resolves them; nothing else can).
SECRETS = SecretStore()


def build_served_reducer(
    environ: Mapping[str, str] | None = None,
    *,
    checkpointer: Any = None,
    secrets: SecretStore | None = None,
):
    """Lesson 02's fixed agent; served without a checkpointer (the server brings one)."""
    return build_reducer_agent(
        served_model(rds_policy, "reducer", environ),
        secrets=SECRETS if secrets is None else secrets,
        checkpointer=checkpointer,
    )


def build_served_turn_cache(
    environ: Mapping[str, str] | None = None,
    *,
    checkpointer: Any = None,
    secrets: SecretStore | None = None,
):
    """Lesson 03's fixed agent: its turn cache works when the server invokes the graph."""
    return build_turn_cache_agent(
        served_model(rds_policy, "turn-cache", environ),
        secrets=SECRETS if secrets is None else secrets,
        checkpointer=checkpointer,
    )


def build_served_subagents(
    environ: Mapping[str, str] | None = None,
    *,
    checkpointer: Any = None,
    secrets: SecretStore | None = None,
):
    """Lesson 04's fixed agent: parent and collector share one state schema."""
    return build_shared_schema_agent(
        served_model(parent_policy, "main-agent", environ),
        served_model(collector_policy, COLLECTOR, environ),
        secrets=SECRETS if secrets is None else secrets,
        checkpointer=checkpointer,
    )


# --- Lesson 06: the tool-only capture graph, one conversation event per run ---

MEMORY_URL_VAR = "AGENTSTATE_MEMORY_URL"
DEFAULT_MEMORY_URL = "http://127.0.0.1:8765/mcp"


class CaptureEvent(TypedDict):
    """One event of the observed conversation: a message, or a control signal.

    A message has ``role`` and ``content``; its ``msg_idx`` (its position in
    the thread) is given, or else assigned by the memory server, once and
    atomically (``assign_position``), so two runs at once never give two
    messages one position. ``id`` is the event's own id (a chat platform's
    message id): an event resent with its ``id`` is recognised and stored
    once (with ``msg_idx`` given, ``msg_idx`` is what identifies a message);
    one without ``id`` or ``msg_idx`` is a new message each time it is sent.
    A control event has only ``control`` (and ``id``).
    """

    role: NotRequired[Literal["user", "assistant"]]
    content: NotRequired[str]
    msg_idx: NotRequired[int]
    id: NotRequired[str]
    control: NotRequired[Literal["SESSION_START", "FLUSH_CONTEXT", "SESSION_END"]]


class CaptureResult(TypedDict):
    """What one event did: the calls the server carried out (in order), the calls it refused
    (with its message; a refused message is not marked stored), the writes it already had
    (the same key: stored by an earlier send of this event, nothing stored now), the
    memory, the guard's corrections."""

    event: NotRequired[str]
    tool_calls: NotRequired[list[str]]
    refused: NotRequired[list[str]]
    already_stored: NotRequired[list[str]]
    memory_id: NotRequired[str]
    corrections: NotRequired[list[str]]


EVENT_FIELDS = ("role", "content", "msg_idx", "id", "control")


class ServedCaptureState(CaptureEvent, CaptureResult):
    last_msg_idx: NotRequired[int]
    # this run's event, moved out of the input fields by ``receive`` (never by a node that can
    # fail): a refused event leaves nothing in the fields the next event's input writes
    pending: NotRequired[dict[str, Any]]


def receive(state: Mapping[str, Any]) -> dict[str, Any]:
    """Take this run's event out of the input fields, clearing every one of them.

    The input writes only the fields an event gives; a field an earlier event
    gave stays in the checkpoint until a node clears it. This node cannot fail,
    so the fields are cleared on every path: an event refused by the next node
    (``msg_idx`` out of range, an unknown control, a bad ``id``) leaves nothing
    the next event inherits. Taught with notebook 06's served graph.
    """
    event = {k: state[k] for k in EVENT_FIELDS if state.get(k) is not None}
    return {"pending": event, **dict.fromkeys(EVENT_FIELDS)}


def event_message(event: Mapping[str, Any], last_msg_idx: int) -> BaseMessage:
    """The typed message the capture graph expects; ``ValueError`` says what is wrong.

    A message without ``msg_idx`` gets ``last_msg_idx + 1`` (the served graph
    passes the position the memory server assigned, minus one). Text the
    memory server cannot store (a NUL, over 100,000 characters, a lone
    surrogate) is refused here, before anything is sent.
    """
    control, role, content = event.get("control"), event.get("role"), event.get("content")
    own_id = event.get("id")
    if own_id is not None:
        try:
            check_key(own_id, "id")
        except MemoryInputError as exc:
            raise ValueError(str(exc)) from None
    if control is not None:
        if role is not None or content is not None:
            raise ValueError("an event is either a control signal or a message, not both")
        if control not in ("SESSION_START", "FLUSH_CONTEXT", "SESSION_END"):
            raise ValueError(f"unknown control {control!r}")
        # with the event's id, a resent control is known again (bootstrapped once, flushed once)
        return SystemMessage(control, id=f"{control}-{own_id or uuid.uuid4().hex[:12]}")
    if role not in ("user", "assistant") or not isinstance(content, str):
        raise ValueError(
            "a message event needs role 'user' or 'assistant' and a string content; "
            "a control event needs control SESSION_START, FLUSH_CONTEXT or SESSION_END"
        )
    idx = event.get("msg_idx")
    if isinstance(idx, int) and idx > MAX_MSG_IDX:  # a huge one would use up the positions
        raise ValueError(f"msg_idx must be at most {MAX_MSG_IDX}, got {idx}")
    idx = last_msg_idx + 1 if idx is None else idx
    if isinstance(idx, bool) or not isinstance(idx, int) or idx < 1:
        raise ValueError(f"msg_idx must be a positive integer, got {idx!r}")
    message = ChatMessage(
        role=role, content=content, id=f"m{idx}", additional_kwargs={"msg_idx": idx}
    )
    try:
        return check_turn(message)
    except InvalidTurn as exc:
        raise ValueError(str(exc)) from None


class _LoopCapture:
    """One event loop's memory client and compiled capture graph (made once, under a lock)."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.made: tuple[MemoryClient, Any] | None = None
        self.memories: set[tuple[str, str]] = set()


class _CaptureRuntime:
    """The memory client and the compiled capture graph, made on first use in a running loop.

    The MCP tools can only be loaded from a running memory server, so nothing
    connects at import; the client's session belongs to the loop that made it.
    Each loop has its own (a sync ``invoke`` runs on a loop of its own, and
    two of them may run at once), made once even when two runs start together.
    """

    def __init__(self, url: str, model: BaseChatModel) -> None:
        self.url, self.model = url, model
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopCapture] = (
            weakref.WeakKeyDictionary()
        )
        self._guard = threading.Lock()

    def _mine(self) -> _LoopCapture:
        loop = asyncio.get_running_loop()
        with self._guard:
            return self._loops.setdefault(loop, _LoopCapture())

    async def get(self) -> tuple[MemoryClient, Any]:
        mine = self._mine()
        async with mine.lock:
            if mine.made is None:
                client = MemoryClient(self.url, retry_for=5.0)
                tools = await client.tools()
                # checkpointer=True: the capture graph keeps its own state per thread, in the
                # server's checkpointer, across runs (what is persisted, bootstrapped...).
                mine.made = (client, build_capture_graph(self.model, tools, checkpointer=True))
            return mine.made

    async def ensure_memory(self, client: MemoryClient, vault_id: str, memory_id: str) -> None:
        mine = self._mine()
        if (vault_id, memory_id) not in mine.memories:
            await client.call("create_memory", vault_id=vault_id, memory_id=memory_id)
            mine.memories.add((vault_id, memory_id))

    async def close(self) -> None:
        """Close this loop's client (a sync run's loop ends with the run)."""
        with self._guard:
            mine = self._loops.pop(asyncio.get_running_loop(), None)
        if mine is not None and mine.made is not None:
            await mine.made[0].close()


def build_served_capture(environ: Mapping[str, str] | None = None, *, checkpointer: Any = None):
    """Lesson 06's tool-only capture graph behind a JSON input of one event per run.

    The memory server is ``AGENTSTATE_MEMORY_URL`` (default ``http://127.0.0.1:8765/mcp``,
    ``agentstate memory serve --db memory.sqlite --transport http --port 8765``). The
    memory is ``configurable.memory_id`` (default: the thread id) in vault
    ``configurable.vault_id`` (default ``agentstate``). A message without ``msg_idx``
    gets its position from the memory server (``assign_position``, keyed by the
    event's ``id`` or, without one, by a fresh id): two runs at once on one thread,
    in one process or in two with their own checkpointers, store two entries with two
    positions, never one. A thread's state (what is already persisted, the last
    ``msg_idx``) lives in the checkpointer: the server brings one; in process, pass
    ``checkpointer=``. The MCP tools are async; a sync ``invoke`` runs the same code on
    its own event loop in a worker thread.
    """
    env = os.environ if environ is None else environ
    url = env.get(MEMORY_URL_VAR) or DEFAULT_MEMORY_URL
    runtime = _CaptureRuntime(url, served_model(CapturePolicy(), "capture", environ))

    async def capture(state: ServedCaptureState, config: RunnableConfig) -> dict[str, Any]:
        last = state.get("last_msg_idx") or 0
        event = state.get("pending") or {}
        message = event_message(event, last)  # bad input fails here, before any call
        conf = config.get("configurable") or {}
        vault_id = conf.get("vault_id") or VAULT
        memory_id = conf.get("memory_id") or conf.get("thread_id")
        if not memory_id:
            raise ValueError("no memory: pass configurable.memory_id or run on a thread")
        client, graph = await runtime.get()
        await runtime.ensure_memory(client, vault_id, memory_id)
        if isinstance(message, ChatMessage) and event.get("msg_idx") is None:
            # its position comes from the server, once per message: never a count two runs
            # read at once (both would take last + 1, and one key for two messages)
            scope = str(conf.get("thread_id") or memory_id)
            key = write_key(scope, f"id:{event.get('id') or uuid.uuid4().hex}")
            position = await client.call(
                "assign_position", vault_id=vault_id, memory_id=memory_id, message_key=key,
                after=last,
            )  # fmt: skip
            message = event_message(event, int(position) - 1)
        inner = {**config, "configurable": {**conf, "vault_id": vault_id, "memory_id": memory_id}}
        result = await graph.ainvoke({"messages": [message], "turn": message}, inner)
        replies = [m for m in _after(result["messages"], message.id) if isinstance(m, ToolMessage)]
        done = [m for m in replies if m.status != "error"]
        already = [m.name in WRITE_TOOLS and m.text == DUPLICATE for m in done]
        idx = message.additional_kwargs.get("msg_idx")
        label = f"msg {idx}" if idx is not None else str(message.content)
        mine = [c for c in result.get("corrections", []) if c.startswith(label + ":")]
        return {
            "event": label,
            "tool_calls": [m.name for m, dup in zip(done, already, strict=True) if not dup],
            "refused": [f"{m.name}: {m.text}" for m in replies if m.status == "error"],
            "already_stored": [
                f"{m.name}: the server already had this write (same key), nothing stored again"
                for m, dup in zip(done, already, strict=True)
                if dup
            ],
            "memory_id": memory_id,
            "corrections": mine,
            "last_msg_idx": max(idx or 0, last),
        }

    async def capture_once(state: ServedCaptureState, config: RunnableConfig) -> dict[str, Any]:
        try:
            return await capture(state, config)
        finally:  # this run's loop ends here: its client (and MCP session) with it
            await runtime.close()

    def capture_sync(state: ServedCaptureState, config: RunnableConfig) -> dict[str, Any]:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the caller may own a loop
            return pool.submit(asyncio.run, capture_once(state, config)).result()

    builder = StateGraph(ServedCaptureState, input_schema=CaptureEvent, output_schema=CaptureResult)
    builder.add_node("receive", receive)
    builder.add_node("capture", RunnableLambda(capture_sync, afunc=capture, name="capture"))
    builder.add_edge(START, "receive")
    builder.add_edge("receive", "capture")
    builder.add_edge("capture", END)
    graph = builder.compile(checkpointer=checkpointer)
    graph.name = "memory_capture"
    return graph


def _after(messages: list[BaseMessage], message_id: str | None) -> list[BaseMessage]:
    """The messages after the one with id ``message_id`` (none for a message without an id)."""
    if message_id is None:
        return []
    for i, m in enumerate(messages):
        if m.id == message_id:
            return messages[i + 1 :]
    return []


reducer = build_served_reducer()
turn_cache = build_served_turn_cache()
subagents = build_served_subagents()
memory_capture = build_served_capture()
