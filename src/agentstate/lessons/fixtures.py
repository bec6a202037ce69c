"""Lesson fixtures: the scenarios, scripted lesson models and readouts of notebooks 01-06.

Notebooks and tests share these so a lesson's numbers come from one place,
not from code pasted into cells. Library modules never import this module:
it is for lessons, tests and readers' experiments.
"""

from __future__ import annotations

import asyncio
import json
import operator
import tempfile
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langchain.agents import AgentState
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.config import get_config
from langgraph.types import Command, Send
from typing_extensions import TypedDict

from agentstate._extras import needs
from agentstate.core.reducers import append_unique, merge_fields
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import ToolEvent, tool_replies

with needs("lessons", "agentstate.lessons.fixtures"):
    from deepagents import create_deep_agent

    from agentstate.persistence import sqlite_checkpointer
    from agentstate.rds.agents import (
        COLLECTOR,
        assemble_rds_agent,
        build_file_storage_agent,
        fixed_middleware,
    )
    from agentstate.rds.state import RdsAgentState
    from agentstate.rds.storage import (
        NAIVE_KEY,
        REQUIREMENTS_PATH,
        NaiveSharedCacheStorage,
        json_file,
        read_json_file,
    )

USER_REQUEST = "Give me a Postgres 15.5 manifest with sensible defaults"

# What a model collects from that request in one reply.
POSTGRES_FIELDS: dict[str, Any] = {
    "engine": "postgres",
    "engine_version": "15.5",
    "instance_class": "db.t3.micro",
    "allocated_storage_gb": 20,
    "username": "dbadmin",
}

# The rest of a valid manifest (the password only as a secret reference).
VALID_REQUIREMENTS: dict[str, Any] = {
    "name": "orders-db",
    **POSTGRES_FIELDS,
    "password": "$secret:rds-master-password",
    "subnet_ids": ["subnet-0a1b2c3d", "subnet-4e5f6a7b"],
}


def store_calls(fields: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One ``store_requirement`` call per field, in the mapping's order."""
    return [tool_call("store_requirement", field_name=k, value=v) for k, v in fields.items()]


def label_fields(n: int) -> dict[str, str]:
    """``n`` distinct valid fields (metadata labels) for scale runs."""
    return {f"labels.k{i:03d}": str(i) for i in range(n)}


def one_reply_model(
    *calls: dict[str, Any], then: str = "Done.", name: str = "scripted"
) -> ScriptedChatModel:
    """A model whose first reply makes ``calls`` in parallel, then answers ``then``."""
    return ScriptedChatModel(script=[reply(*calls), reply(text=then)], model_name=name)


def one_batch_model(
    fields: Mapping[str, Any], *, extra: Sequence[dict[str, Any]] = (), name: str = "scripted"
) -> ScriptedChatModel:
    """A model whose first reply stores ``fields`` in parallel (plus ``extra`` calls)."""
    return one_reply_model(*store_calls(fields), *extra, name=name)


def one_call_per_step_model(fields: Mapping[str, Any]) -> ScriptedChatModel:
    """The serial workaround: one store call per model reply."""
    return ScriptedChatModel(script=[reply(c) for c in store_calls(fields)] + [reply(text="Done.")])


def user_turn(text: str = USER_REQUEST) -> dict[str, Any]:
    """The input of one user turn."""
    return {"messages": [{"role": "user", "content": text}]}


def file_fields(state: Mapping[str, Any]) -> dict[str, Any]:
    """What ``/requirements.json`` holds in a state."""
    return read_json_file(state.get("files"), REQUIREMENTS_PATH)


def reader_batch_model(
    fields: Mapping[str, Any], trials: int, reader: str = "get_collected_requirements"
) -> ScriptedChatModel:
    """``trials`` turns, each one reply with the store calls AND a reader, then a final reply."""
    turn = [reply(*store_calls(fields), tool_call(reader)), reply(text="Done.")]
    return ScriptedChatModel(script=turn * trials, model_name="reader-batch")


def same_turn_model(
    fields: Mapping[str, Any],
    readers: Sequence[str],
    *,
    next_reply: bool = False,
    turns: int = 1,
) -> ScriptedChatModel:
    """The scripted model of lesson 03 (``notebooks/03_same_turn_visibility.ipynb``).

    Each of ``turns`` user turns: one reply storing ``fields`` in parallel with
    the ``readers`` after the stores in the same reply (or, ``next_reply``, in
    the reply after), then "Done.". The lesson builds its agent on the page
    around it; the replies are data, so they live here.
    """
    if isinstance(readers, str):
        raise TypeError(f"readers is a list of tool names, got the string {readers!r}")
    if turns < 1:
        raise ValueError(f"turns must be at least 1, got {turns!r}")
    stores, reads = store_calls(fields), [tool_call(name) for name in readers]
    replies = [reply(*stores), reply(*reads)] if next_reply else [reply(*stores, *reads)]
    return ScriptedChatModel(script=[*replies, reply(text="Done.")] * turns, model_name="same-turn")


def reader_replies(state: Mapping[str, Any]) -> dict[str, str]:
    """The last reply of each tool in a state, by tool name (its text, whatever its form)."""
    return {m.name: m.text for m in tool_replies(state) if m.name}


def fields_seen_by_reader(state: Mapping[str, Any]) -> int:
    """How many fields the last ``get_collected_requirements`` reply listed (-1 if it failed)."""
    replies = tool_replies(state, "get_collected_requirements")
    if not replies:
        raise ValueError("no get_collected_requirements reply in this state")
    last = replies[-1]
    return -1 if last.status == "error" else len(json.loads(last.text))


def same_batch_reader_trials(
    agent: Any,
    trials: int,
    config: Callable[[], dict[str, Any]] = dict,
    progress: bool = False,
) -> list[int]:
    """Invoke ``agent`` ``trials`` times (its model scripted by :func:`reader_batch_model`)
    and return how many of the batch's writes the same-batch reader saw each time."""
    from tqdm.auto import trange

    return [
        fields_seen_by_reader(agent.invoke(user_turn(), config()))
        for _ in trange(trials, disable=not progress, leave=False)
    ]


# --- lesson 04: the collector subagent and the parent that delegates to it ---


def collector_model(tasks: int = 1) -> ScriptedChatModel:
    """The offline collector: for each task, store the JSON fields, then report.

    Steps are functions of the incoming messages, so parallel tasks sharing
    the model each get the right reply whatever order they run in. The
    report counts only the stores that succeeded.
    """

    def step(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage):
            return reply(*store_calls(json.loads(last.text)))
        stored = [
            m
            for m in messages
            if isinstance(m, ToolMessage) and m.name == "store_requirement" and m.status != "error"
        ]
        return reply(text=f"Stored {len(stored)} field(s).")

    return ScriptedChatModel(script=[step] * (2 * tasks), model_name=COLLECTOR)


def delegate(*field_sets: Mapping[str, Any]) -> AIMessage:
    """A parent reply with one ``task`` call per field set (parallel when several)."""
    return reply(
        *(
            tool_call("task", description=json.dumps(dict(f)), subagent_type=COLLECTOR)
            for f in field_sets
        )
    )


def parent_model(
    *field_sets: Mapping[str, Any], then: Sequence[AIMessage] = ()
) -> ScriptedChatModel:
    """Delegate the field sets, then check with ``validate_manifest``, then answer."""
    script = [delegate(*field_sets), reply(tool_call("validate_manifest")), *then]
    return ScriptedChatModel(script=[*script, reply(text="Done.")], model_name="main-agent")


# --- lesson 04: the list hazard, ``operator.add`` and a subagent that returns the whole list ---


class AddNotesState(RdsAgentState):
    """``notes`` with ``operator.add``: a returning subagent duplicates the parent's items."""

    notes: Annotated[NotRequired[list[str]], operator.add]


class UniqueNotesState(RdsAgentState):
    """``notes`` with :func:`append_unique`: the same run keeps one copy of each item."""

    notes: Annotated[NotRequired[list[str]], append_unique]


@tool
def add_note(text: str, runtime: ToolRuntime) -> Command:
    """Append a note about the requirements."""
    return Command(
        update={
            "notes": [text],
            "messages": [ToolMessage("Noted.", tool_call_id=runtime.tool_call_id)],
        }
    )


def build_notes_agent(state_schema: type, middleware: Sequence[Any] = ()) -> Any:
    """A parent that delegates one ``add_note`` to a subagent sharing ``state_schema``.

    ``middleware`` goes to the parent only (a ``ToolTimeline`` to draw its ``task`` step).
    """
    note_taker = ScriptedChatModel(
        script=[reply(tool_call("add_note", text="new")), reply(text="Noted.")], model_name="notes"
    )
    parent = ScriptedChatModel(
        script=[
            reply(tool_call("task", description="Add the note 'new'.", subagent_type="note-taker")),
            reply(text="Done."),
        ],
        model_name="main-agent",
    )
    return create_deep_agent(
        parent,
        tools=[add_note],
        state_schema=state_schema,
        middleware=list(middleware),
        subagents=[
            {
                "name": "note-taker",
                "description": "Adds notes.",
                "system_prompt": "Add the note you are given.",
                "tools": [add_note],
                "model": note_taker,
            }
        ],
    )


# --- lesson 04: who sees the subagent's fields, and when ---


def who_sees_what(
    builder: Any, fields: Mapping[str, Any] = POSTGRES_FIELDS, db_path: str | None = None
) -> dict[str, int]:
    """Fields visible to the parent: in the same turn, the next turn, after a restart.

    Turn 1 delegates ``fields`` to the collector, then reads them back; turn 2
    reads again; then a brand-new agent over the same SQLite file reads again.
    The last column is what the user sees then: the fields in ``/requirements.json``.
    Without ``db_path`` the SQLite file lives in a temporary folder, removed afterwards.
    """
    if db_path is None:
        with tempfile.TemporaryDirectory() as folder:
            return who_sees_what(builder, fields, str(Path(folder) / "who-sees-what.db"))
    read = reply(tool_call("get_collected_requirements"))
    config = {"configurable": {"thread_id": "who-sees-what"}}
    row: dict[str, int] = {}
    with sqlite_checkpointer(db_path) as saver:
        parent = ScriptedChatModel(
            script=[delegate(fields), read, reply(text="ok"), read, reply(text="ok")]
        )
        agent = builder(parent, collector_model(), checkpointer=saver)
        row["same turn"] = fields_seen_by_reader(agent.invoke(user_turn("collect"), config))
        row["next turn"] = fields_seen_by_reader(agent.invoke(user_turn("again"), config))
    with sqlite_checkpointer(db_path) as saver:
        parent = ScriptedChatModel(script=[read, reply(text="ok")])
        agent = builder(parent, collector_model(), checkpointer=saver)
        state = agent.invoke(user_turn("and now"), config)
        row["after restart"] = fields_seen_by_reader(state)
        row["file after restart"] = len(file_fields(state))
    return row


# --- notebooks 01-02 ---


class PerFieldFileStorage:
    """Lesson 01's smallest safe file layout: one file per field, never a shared file.

    ``write`` puts each field in its own path (``/requirements/<field>.json``
    by default), so parallel calls write different keys of ``files`` and the
    files reducer keeps every one of them; ``read`` merges every file under
    ``/requirements/``. ``path_for`` chooses the path: give every field the
    same path and the loss of lesson 01 comes back.
    """

    PREFIX = "/requirements/"

    def __init__(self, path_for: Callable[[str], str] | None = None) -> None:
        self.path_for = path_for or (lambda field: f"{self.PREFIX}{field}.json")

    def write(self, state: Mapping[str, Any], runtime: Any, field: str, value: Any) -> dict:
        """One field, one file: parallel calls write different paths."""
        return {"files": {self.path_for(field): json_file({field: value})}}

    def read(self, state: Mapping[str, Any], runtime: Any) -> dict[str, Any]:
        """Every field file under ``/requirements/``, merged in path order."""
        files = state.get("files") or {}
        merged: dict[str, Any] = {}
        for path in sorted(p for p in files if p.startswith(self.PREFIX)):
            merged.update(read_json_file(files, path))
        return merged


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """Every requirement stored so far, as JSON."""
    # Lesson 01's fix reads its one-file-per-field layout back with this tool: the files
    # under /requirements/, merged in path order (PerFieldFileStorage.read).
    return json.dumps(PerFieldFileStorage().read(runtime.state, runtime), sort_keys=True)


# Lesson 01's two file layouts, as its knob names them.
FILE_LAYOUTS = ("one file", "one file per field")


def _layout_agent(layout: str, parallel_calls: int) -> Any:
    if layout not in FILE_LAYOUTS:
        raise ValueError(
            f"layout must be one of {', '.join(map(repr, FILE_LAYOUTS))}, not {layout!r}"
        )
    if (
        isinstance(parallel_calls, bool)
        or not isinstance(parallel_calls, int)
        or parallel_calls < 1
    ):
        raise ValueError(
            f"parallel_calls must be a whole number of at least 1, not {parallel_calls!r}"
        )
    model = one_batch_model(label_fields(parallel_calls))
    if layout == "one file":
        return build_file_storage_agent(model)
    return assemble_rds_agent(model, PerFieldFileStorage())


def _distinct_fields(state: Mapping[str, Any]) -> int:
    files = state.get("files") or {}
    return len({field for path in files for field in read_json_file(files, path)})


def fields_kept(layout: str = "one file", parallel_calls: int = 5) -> int:
    """How many fields the files hold after one reply of ``parallel_calls`` parallel stores.

    Lesson 01's knob and its "any number of parallel calls" proof. ``layout``
    is ``"one file"`` (the package's copy of the lesson's ``store_requirement``,
    :func:`~agentstate.rds.build_file_storage_agent`) or ``"one file per field"``
    (its ``store_in_own_file``: :class:`PerFieldFileStorage`);
    ``tests/test_lesson_01.py`` checks each keeps what the page's tool keeps.
    """
    return _distinct_fields(_layout_agent(layout, parallel_calls).invoke(user_turn()))


async def afields_kept(layout: str = "one file", parallel_calls: int = 5) -> int:
    """The async twin of :func:`fields_kept` (the agent runs under ``ainvoke``)."""
    return _distinct_fields(await _layout_agent(layout, parallel_calls).ainvoke(user_turn()))


def store_then_read_model(fields: Mapping[str, Any]) -> ScriptedChatModel:
    """Store ``fields`` in parallel, then, in the NEXT model step, read them back, then answer."""
    return ScriptedChatModel(
        script=[
            reply(*store_calls(fields)),
            reply(tool_call("get_collected_requirements")),
            reply(text="Done."),
        ],
        model_name="store-then-read",
    )


def graph_steps(history: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Rows of :func:`agentstate.tracing.state_by_step` keyed by super-step number."""
    return {row["step"]: dict(row) for row in history}


class ReducerProbe:
    """Wrap a reducer and record every call LangGraph makes to it, and from where.

    ``site`` is ``"edge read (throwaway copy)"`` when the call comes from a
    node's outgoing edge reading state on a copy of the channels (LangGraph's
    ``local_read``), ``"apply_writes (the real state)"`` when the super-step's
    writes are applied, ``"other"`` otherwise; each call also records its
    write and thread. :meth:`wait_for` blocks until
    that many throwaway calls happened (used to hold a reader until then).
    """

    THROWAWAY = "edge read (throwaway copy)"
    APPLY = "apply_writes (the real state)"

    def __init__(self, reducer: Callable[[Any, Any], Any]) -> None:
        self.reducer = reducer
        # LangGraph compares reducers by ``__name__`` when it merges schemas.
        self.__name__ = f"probe({getattr(reducer, '__name__', 'reducer')})"
        self.calls: list[dict[str, Any]] = []
        self._done = threading.Condition()

    @classmethod
    def _site(cls) -> str:
        names = {frame.name for frame in traceback.extract_stack()}
        if "local_read" in names:
            return cls.THROWAWAY
        return cls.APPLY if "apply_writes" in names else "other"

    def __call__(self, left: Any, right: Any) -> Any:
        site, thread = self._site(), threading.current_thread().name
        result = self.reducer(left, right)
        with self._done:
            self.calls.append({"site": site, "write": dict(right or {}), "thread": thread})
            self._done.notify_all()
        return result

    def sites(self) -> dict[str, int]:
        """How many calls came from each site."""
        counts: dict[str, int] = {}
        for call in self.calls:
            counts[call["site"]] = counts.get(call["site"], 0) + 1
        return counts

    def wait_for(self, throwaway_calls: int, timeout: float = 10.0) -> None:
        """Block until ``throwaway_calls`` calls came from edge reads (TimeoutError otherwise)."""
        with self._done:
            ok = self._done.wait_for(
                lambda: self.sites().get(self.THROWAWAY, 0) >= throwaway_calls, timeout
            )
        if not ok:
            raise TimeoutError(f"fewer than {throwaway_calls} throwaway reducer calls")


class HoldReaderMiddleware(AgentMiddleware):
    """Hold ``reader`` tool calls until ``probe`` saw ``throwaway_calls`` edge-read calls.

    Makes "a reader in the writers' batch runs after their edges read state"
    deterministic instead of a matter of thread timing.
    """

    def __init__(
        self,
        probe: ReducerProbe,
        throwaway_calls: int,
        reader: str = "get_collected_requirements",
    ) -> None:
        super().__init__()
        self.probe = probe
        self.throwaway_calls = throwaway_calls
        self.reader = reader

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Wait for the probe before running a reader call; other calls run at once."""
        if request.tool_call["name"] == self.reader:
            self.probe.wait_for(self.throwaway_calls)
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """The async twin: the wait runs in a worker thread, off the event loop."""
        if request.tool_call["name"] == self.reader:
            await asyncio.to_thread(self.probe.wait_for, self.throwaway_calls)
        return await handler(request)


def merge_in_place(left: dict[str, Any] | None, right: Mapping[str, Any] | None) -> dict:
    """An IMPURE field merge (notebook 02's counter-example): it mutates ``left``.

    Same result as :func:`agentstate.core.merge_fields` when called once per
    write; wrong when LangGraph also calls it on throwaway copies, whose
    channels share ``left`` with the live state.
    """
    if left is None:
        left = {}
    left.update(right or {})
    return left


def sqlite_bytes(db_path: Any) -> bytes:
    """Every byte of a SQLite database and its side files (``-wal``, ``-shm``)."""
    path = Path(db_path)
    return b"".join(p.read_bytes() for p in sorted(path.parent.glob(path.name + "*")))


# What each node a state-history table names does (read from deepagents' and
# LangChain's sources at the pinned versions).
NODE_GLOSSARY: dict[str, tuple[str, str]] = {
    "__start__": (
        "LangGraph",
        "the entry: writes the invoke input (the user's message) into state; that write is step 0",
    ),
    "PatchToolCallsMiddleware.before_agent": (
        "deepagents",
        "once per invoke, before the first model call: gives every tool call in the history "
        "that has no reply an error ToolMessage ('did not complete'), so the model accepts "
        "the history; with nothing to patch it writes nothing",
    ),
    "model": (
        "LangChain create_agent",
        "calls the chat model on the messages (through each middleware's wrap_model_call) "
        "and appends its AIMessage",
    ),
    "tools": (
        "LangChain create_agent",
        "runs the AIMessage's tool calls, one task per call ('tools x5' = five tasks) in one "
        "super-step; their updates are applied together when the step ends",
    ),
    "RequirementsSyncMiddleware.after_agent": (
        "agentstate (notebook 02)",
        "once per turn, after the last model call: renders `requirements` to /requirements.json",
    ),
    "_ParentNotifierMiddleware.after_agent": (
        "deepagents",
        "on every deep agent: under ainvoke it tells a parent that started this agent as an "
        "async subagent that it finished; under invoke it does nothing and writes nothing",
    ),
    "__end__": ("LangGraph", "the end of the graph: nothing runs after it"),
}


def glossary_rows(graph: Any) -> list[dict[str, str]]:
    """One row per node of a compiled graph from :data:`NODE_GLOSSARY` (fails on unknown ones)."""
    return [
        {"node": name, "from": NODE_GLOSSARY[name][0], "what it does": NODE_GLOSSARY[name][1]}
        for name in sorted(graph.get_graph().nodes, key=list(NODE_GLOSSARY).index)
    ]


# --- notebook 03's going-further: the obvious but silently broken repair of the
# ``runtime.config`` cache ---


class GetConfigCacheMiddleware(AgentMiddleware):
    """The obvious repair of the ``runtime.config`` cache, broken silently (notebook 03).

    ``before_agent`` puts a fresh dict into ``get_config()["configurable"]``.
    That call succeeds, but each super-step gets a new shallow copy of
    ``configurable``, so the tools of later steps never see the key.
    """

    def before_agent(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
        get_config()["configurable"][NAIVE_KEY] = {}
        return None

    async def abefore_agent(self, state: AgentState[Any], runtime: Any) -> dict[str, Any] | None:
        return self.before_agent(state, runtime)


class ConfigCacheStorage(NaiveSharedCacheStorage):
    """Tools that use ``config["configurable"][NAIVE_KEY]`` and create it when it is missing.

    ``found`` records, per tool call, whether the cache put there by
    :class:`GetConfigCacheMiddleware` was visible to the tool.
    """

    def __init__(self) -> None:
        self.found: list[bool] = []
        self._lock = threading.Lock()

    def _cache(self, runtime: Any) -> dict[str, Any]:
        configurable = runtime.config["configurable"]
        with self._lock:
            self.found.append(NAIVE_KEY in configurable)
        return configurable.setdefault(NAIVE_KEY, {})


def build_get_config_cache_agent(model: BaseChatModel, storage: ConfigCacheStorage) -> Any:
    """The lesson 02 agent with :class:`GetConfigCacheMiddleware` and tools over ``storage``."""
    return assemble_rds_agent(
        model,
        storage,
        middleware=[*fixed_middleware(), GetConfigCacheMiddleware()],
        state_schema=RdsAgentState,
    )


def notes_read(state: Mapping[str, Any]) -> list[str]:
    """What the last ``read_notes`` reply listed."""
    return json.loads(tool_replies(state, "read_notes")[-1].text)


READ_CALLS = ("get_collected_requirements", "validate_manifest", "generate_rds_manifest")


def all_in_one_reply_model(
    fields: Mapping[str, Any] = VALID_REQUIREMENTS, *, readers_first: bool = False
) -> ScriptedChatModel:
    """One reply that stores ``fields`` and calls the three readers (after them, or before)."""
    stores, reads = store_calls(fields), [tool_call(n) for n in READ_CALLS]
    calls = [*reads, *stores] if readers_first else [*stores, *reads]
    return one_reply_model(*calls, name="all-in-one")


def reader_summary(state: Mapping[str, Any]) -> dict[str, str]:
    """Each reader's last reply in one line: ``"N fields"`` for the lister, else its first line."""
    out = {}
    for name, text in reader_replies(state).items():
        if name == "get_collected_requirements" and not text.startswith("Error"):
            out[name] = f"{len(json.loads(text))} fields"
        elif name != "store_requirement":
            out[name] = text.splitlines()[0]
    return out


def overlapping_calls(events: Sequence[ToolEvent], name: str) -> int:
    """How many calls of tool ``name`` ran while at least one other tool call was running."""
    return sum(
        any(o is not e and o.start < e.end and e.start < o.end for o in events)
        for e in events
        if e.name == name
    )


# --- notebook 05 ---


def prompt_text(messages: Any) -> bytes:
    """The messages of one call as the bytes an engine reads, in order (role, then content).

    Notebook 05 compares two calls' prompts with ``common_prefix_length``:
    what they share from the first byte is what a prefix cache can reuse.
    """
    return "\n".join(f"{m.type}: {m.content}" for m in messages).encode("utf-8")


def shared_by_all(prompts: list[bytes]) -> int:
    """Leading bytes that every prompt in ``prompts`` shares with the first (notebook 05)."""
    from agentstate.experts import common_prefix_length

    return min(common_prefix_length(prompts[0], p) for p in prompts[1:])


def shared_prefix(prompts: Sequence[Sequence[BaseMessage]]) -> dict[str, Any]:
    """The leading bytes several calls' prompts share, and where they part (notebook 05).

    ``"bytes shared"`` is what a prefix cache could reuse across the calls,
    ``"of the prompt"`` that as a share of the first prompt, and
    ``"they part at"`` says where they part: the message (``system message 2``) and its
    line, then the shared start of that line (up to 48 characters, from a word), a bar,
    then each prompt's rest of that word, separated by `` / ``, so a reader sees which
    byte ends the reuse, never a value cut short.
    The prompts are taken in sorted order (so by the expert's name where they part),
    never in the order parallel calls reached the model, which varies run to run.
    """
    import re

    ordered = sorted(prompts, key=prompt_text)
    data = [prompt_text(p) for p in ordered]
    n = shared_by_all(data)
    if not ordered[0]:
        raise ValueError("shared_prefix needs prompts of at least one message")
    sizes = [len(prompt_text([m])) for m in ordered[0]]
    start, index = 0, 0
    while index < len(sizes) - 1 and n > start + sizes[index]:  # the message holding byte n
        start += sizes[index] + 1
        index += 1
    message = ordered[0][index]
    label = len(f"{message.type}: ".encode())
    line = max(data[0].rfind(b"\n", 0, n) + 1, start + label if n >= start + label else start)
    line_no = data[0].count(b"\n", start, n) + 1
    where = f"{message.type} message {index + 1}, line {line_no:,}: "
    begin = max(line, n - 48)
    if begin > line:  # begin at a word, after the "…"
        space = data[0].find(b" ", begin, n)
        begin = space + 1 if space != -1 else begin
    before = data[0][begin:n].decode("utf-8", "replace")

    def word(prompt: bytes) -> str:
        rest = prompt[n : n + 40]
        end = re.search(rb"\s", rest)
        return rest[: end.start() if end else len(rest)].decode("utf-8", "replace")

    shown = where + "…" * (begin > line) + before
    return {
        "bytes shared": n,
        "of the prompt": f"{n / len(data[0]):.1%}",
        "they part at": f"{shown}|{' / '.join(word(d) for d in data)}",
    }


def super_steps(graph: Any, inputs: Any, config: dict[str, Any] | None = None) -> list[list[str]]:
    """The nodes run in each real super-step, from the ``debug`` stream (notebook 05).

    LangGraph's debug stream emits one ``task`` event per node run, tagged with
    its super-step; runs with the same step number ran together. The input
    step (``__start__``, step -1) is left out. Compare ``stream_mode="updates"``,
    which emits one chunk per node run, so three parallel experts make three
    chunks in a single super-step.
    """
    steps: dict[int, list[str]] = {}
    for event in graph.stream(inputs, config, stream_mode="debug"):
        if event["type"] == "task" and event["payload"]["name"] != "__start__":
            steps.setdefault(event["step"], []).append(event["payload"]["name"])
    return [sorted(steps[s]) for s in sorted(steps)]


class PlainExpertsState(TypedDict, total=False):
    """The experts' per-run outputs as a plain dict key: no reducer (notebook 05)."""

    experts: list[str]
    expert_outputs: dict[str, str]


class ExpertName(TypedDict):
    """What one ``Send`` gives an expert of :func:`plain_dict_fan_out`."""

    expert: str


def plain_dict_fan_out(experts: list[str]) -> Any:
    """The experts' Send fan-out with ``expert_outputs`` as a plain dict key (no reducer).

    Notebook 05's proof that the reducer is needed: every expert writes the key
    in the same super-step, and LangGraph refuses two writes to a key without a
    reducer (``InvalidUpdateError``). Compile and ``invoke({"experts": [...]})``.
    """
    from langgraph.graph import START, StateGraph

    # Send is imported at module level: LangGraph reads this hint (get_type_hints)
    def fan_out(state: PlainExpertsState) -> list[Send]:
        return [Send("expert", ExpertName(expert=name)) for name in state["experts"]]

    def expert(state: ExpertName) -> dict[str, Any]:
        return {"expert_outputs": {state["expert"]: f"notes of {state['expert']}"}}

    graph = StateGraph(PlainExpertsState)
    graph.add_node("expert", expert)
    graph.add_conditional_edges(START, fan_out, ["expert"])
    return graph.compile()


# Lesson 02's state and writer, as its page builds them (02's own merge_fields is the
# package's minus the type check). Notebook 03 imports them as a recap instead of
# writing them again; tests/test_lesson_03.py checks they keep what 02's page keeps.
class RequirementsState(AgentState):
    """``requirements`` merged field by field across the parallel writes of a step."""

    requirements: Annotated[NotRequired[dict[str, Any]], merge_fields]


@tool
def store_requirement(field_name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Store one collected requirement."""
    done = ToolMessage(f"Stored {field_name}.", tool_call_id=runtime.tool_call_id)
    return Command(update={"requirements": {field_name: value}, "messages": [done]})


# Lesson 03's second reader, imported by its page beside the reader it writes: the page's
# point is that both read the state from before their super-step.
@tool
def validate_manifest(runtime: ToolRuntime) -> str:
    """Check that every field of a Postgres manifest has been collected."""
    missing = [f for f in POSTGRES_FIELDS if f not in runtime.state.get("requirements", {})]
    return f"invalid: {len(missing)} fields missing" if missing else "valid"
