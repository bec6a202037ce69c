"""The fix of notebook 06: a tool-only LangGraph workflow for memory capture.

One turn = one new message (only that message is sent; state accrues per
``thread_id`` in the checkpointer). ``llm_call`` shows the model the capture
prompt plus the control and user/assistant messages only (no AI or tool
messages), keeps nothing of its reply but the tool calls, and hands them to
``guard``'s code, which builds the turn's plan from the rules and takes from
the model only what is the model's to say (a summary, a context document):

- one ``add_entry`` per (thread, msg_idx): a message is marked ``persisted``
  only once the server acknowledged its write, so a run that failed or was
  cancelled before that leaves the message to be sent again; a resent message
  already acknowledged is skipped; every write carries an ``idempotency_key``
  (thread and msg_idx), so one that reached the server before the failure is
  not stored twice. ``msg_idx`` is the message's own (the observer's
  numbering, or a position the memory server assigned it: ``assign_position``,
  as the served graph does), never a count read from the state, which two
  runs at once would read alike;
- role and content copied from the message itself, tags exactly {role, msg_idx};
- SESSION_START -> get_context, list_entries(limit=10), once per SESSION_START
  message (a thread may hold several sessions; a resent one is skipped), the
  same rule the auditor checks;
- a ``ChatMessage`` with role ``system`` is never persisted;
- FLUSH_CONTEXT / SESSION_END, and after every msg_idx % 6 == 0 -> await_consistency,
  put_context; control messages are typed, never persisted.

``llm_call`` hands the plan's first call to ``tools`` and ``dispatch`` the
others, one call at a time, so the store sees the calls in plan order and
each call is checkpointed before it is sent (what ``observer.CaptureRun.resume``
relies on after a kill). ``tools`` runs the call and records what the server
acknowledged (``persisted``, ``bootstrapped``) or refused (``refused``, with
the server's message; the message stays unpersisted). Every change the guard
made to the model's proposal is recorded in ``corrections``. State stays bounded: at each turn the
previous turns' tool messages and chat beyond the model's window are removed
(the memory server holds the history), so a 1,000-message thread costs the
same per message as a short one.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NotRequired, TypedDict

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send

from agentstate.memory.capture import calls
from agentstate.memory.capture.conversations import CONTROLS
from agentstate.memory.capture.prompt import system_prompt, turn_line
from agentstate.memory.service.checks import MAX_POSITION, MemoryInputError, check_text

MODEL_WINDOW = 24  # conversation messages shown to the model (the newest ones)


def _union(left: list[int] | None, right: list[int] | None) -> list[int]:
    return sorted(set(left or []) | set(right or []))


def _union_ids(left: list[str] | None, right: list[str] | None) -> list[str]:
    return list(dict.fromkeys([*(left or []), *(right or [])]))


class CaptureState(TypedDict):
    """The graph's state per thread: the curated messages, the turn and what was done."""

    messages: Annotated[list[AnyMessage], add_messages]
    turn: NotRequired[BaseMessage]
    plan: NotRequired[list[dict[str, Any]]]
    persisted: NotRequired[Annotated[list[int], _union]]  # msg_idx whose add_entry was acknowledged
    bootstrapped: NotRequired[Annotated[list[str], _union_ids]]  # SESSION_START ids handled
    corrections: NotRequired[Annotated[list[str], operator.add]]
    refused: NotRequired[Annotated[list[str], operator.add]]  # calls the server refused, why


class InvalidTurn(ValueError):
    """A message the capture graph cannot take; raised before anything is sent or stored."""


STORED_ROLES = ("user", "assistant")


def check_turn(turn: Any) -> BaseMessage:
    """Validate one turn at the boundary, so bad input fails here and changes nothing.

    A conversation message is a ``ChatMessage`` with role ``user`` or
    ``assistant`` (``system``: accepted, never stored) and ``msg_idx`` in
    ``additional_kwargs``, a non-negative int (a string would poison the
    thread's ``persisted`` list and every later turn). The content of a message
    to store must be text the memory server takes (no NUL, at most 100,000
    characters, no lone surrogate), else it is refused here, not by the
    server. A control message is a ``SystemMessage`` whose content is one of
    ``CONTROLS``.
    """
    if isinstance(turn, ChatMessage):
        if turn.role not in (*STORED_ROLES, "system"):
            raise InvalidTurn(
                f"role must be one of {STORED_ROLES} (or 'system', never stored), got {turn.role!r}"
            )
        idx = turn.additional_kwargs.get("msg_idx")
        if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
            raise InvalidTurn(f"msg_idx must be a non-negative int, got {idx!r}")
        if idx > MAX_POSITION:
            raise InvalidTurn(f"msg_idx {idx} is past {MAX_POSITION}, the largest position")
        if not isinstance(turn.content, str):
            raise InvalidTurn("a conversation message's content must be a string")
        if turn.role in STORED_ROLES:
            try:
                check_text(turn.content, "raw_entry", blank_ok=True)
            except MemoryInputError as exc:
                raise InvalidTurn(f"msg {idx}: the memory server cannot store it: {exc}") from None
        return turn
    if isinstance(turn, SystemMessage):
        if turn.content not in CONTROLS:
            raise InvalidTurn(f"a control message must be one of {CONTROLS}, got {turn.content!r}")
        return turn
    raise InvalidTurn(
        "a turn is a ChatMessage (role user/assistant, msg_idx) or a control SystemMessage, "
        f"got {type(turn).__name__}"
    )


def curated(messages: Sequence[BaseMessage], window: int = MODEL_WINDOW) -> list[BaseMessage]:
    """Control messages and the conversation's user/assistant messages; nothing else."""
    keep: list[BaseMessage] = [
        m
        for m in messages
        if isinstance(m, ChatMessage) or (isinstance(m, SystemMessage) and m.content in CONTROLS)
    ]
    return keep[-window:]


def stale(messages: Sequence[BaseMessage], turn: BaseMessage, window: int) -> list[RemoveMessage]:
    """What the new turn no longer needs: earlier turns' tool traffic, chat beyond the window.

    The store is the conversation's history; the graph keeps only what the model is shown
    plus the current turn's calls, so each checkpoint stays small however long the chat.
    """
    keep = {m.id for m in curated(messages, window)} | {turn.id}
    # every message in the state has an id (``add_messages`` gives one to each)
    return [RemoveMessage(id=m.id) for m in messages if m.id is not None and m.id not in keep]


def guard(
    turn: BaseMessage,
    proposed: list[dict[str, Any]],
    state: Mapping[str, Any],
    vault_id: str,
    memory_id: str,
    thread: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The turn's plan built by the rules; the model fills in only summaries and contexts.

    Returns the plan and the state update (corrections). Nothing is marked
    persisted or bootstrapped here: ``tools`` does it when the server
    acknowledges the write. Writes carry an ``idempotency_key`` scoped by
    ``thread`` (default: the memory). A summary or context the server would
    refuse (blank, too long, NUL) is replaced by the default, as a correction.
    """
    scope = thread or memory_id
    label = (
        f"msg {turn.additional_kwargs.get('msg_idx')}"
        if isinstance(turn, ChatMessage)
        else str(turn.content)
    )
    update: dict[str, Any] = {"corrections": []}
    context = _usable(label, proposed, "put_context", "content", update)
    context = context or calls.digest(state.get("messages", []), memory_id)
    flush_key: str | None
    if isinstance(turn, ChatMessage):
        flush_key = calls.write_key(scope, f"context:msg:{turn.additional_kwargs['msg_idx']}")
    else:  # a control message is known by its id; without one, its flush has no key
        flush_key = calls.write_key(scope, f"context:{turn.id}") if turn.id else None
    plan: list[dict[str, Any]]
    if isinstance(turn, ChatMessage) and turn.role == "system":
        plan = []
        update["corrections"] += [f"{label}: system message, not persisted"]
    elif isinstance(turn, ChatMessage):
        idx = turn.additional_kwargs["msg_idx"]
        plan = []
        if idx in state.get("persisted", []):
            update["corrections"] += [f"{label}: already persisted, add_entry skipped"]
        else:
            summary = _usable(label, proposed, "add_entry", "summary", update)
            key = calls.write_key(scope, f"msg:{idx}")
            plan.append(
                calls.add_entry(
                    vault_id, memory_id, turn.role, idx, str(turn.content), summary, key
                )
            )
        if calls.periodic_flush_due(idx):
            plan += calls.flush(vault_id, memory_id, context, flush_key)
    elif turn.content == "SESSION_START":
        key = _session_key(turn)
        if key in state.get("bootstrapped", []):
            plan = []
            update["corrections"].append(
                "SESSION_START: this session is already bootstrapped, skipped"
            )
        else:
            plan = calls.bootstrap(vault_id, memory_id)
    elif turn.content in ("FLUSH_CONTEXT", "SESSION_END"):
        plan = calls.flush(vault_id, memory_id, context, flush_key)
    else:
        plan = []
    update["corrections"] += _differences(label, proposed, plan)
    return plan, update


def _usable(label: str, proposed: list[dict], tool: str, field: str, update: dict) -> str | None:
    """The model's ``field`` of its ``tool`` call if the server would take it, else None.

    A value the server would refuse (blank, too long, a NUL) is dropped with a
    correction, and the guard's default is used: the message is still stored.
    """
    for c in proposed:
        value = c["args"].get(field) if c["name"] == tool else None
        if not isinstance(value, str):
            continue
        try:
            return check_text(value, field)
        except MemoryInputError as exc:
            update["corrections"].append(f"{label}: corrected {tool}.{field} ({exc})")
            return None
    return None


def _session_key(turn: BaseMessage) -> str:
    """Which SESSION_START this is: its message id (stable when the observer resends it)."""
    position = turn.additional_kwargs.get("position")
    return str(turn.id) if turn.id is not None else f"position {position}"


def acknowledged(turn: BaseMessage | None, call: Mapping[str, Any], reply: ToolMessage) -> dict:
    """The state update a tool's reply earns: marks on success, a ``refused`` line on refusal."""
    if reply.status == "error":
        idx = turn.additional_kwargs.get("msg_idx") if isinstance(turn, ChatMessage) else None
        label = f"msg {idx}" if idx is not None else str(getattr(turn, "content", "?"))
        return {"refused": [f"{label}: {call['name']} refused by the server: {reply.text}"]}
    if call["name"] == "add_entry" and isinstance(turn, ChatMessage):
        return {"persisted": [turn.additional_kwargs["msg_idx"]]}
    if call["name"] == "list_entries" and isinstance(turn, SystemMessage):
        return {"bootstrapped": [_session_key(turn)]}  # the bootstrap's last call
    return {}


def _one_call(call: dict[str, Any]) -> AIMessage:
    """The AIMessage that hands one planned call to ``tools``."""
    return AIMessage(content="", tool_calls=[call], id=f"ai-{call['id']}")


def _differences(label: str, proposed: list[dict], plan: list[dict]) -> list[str]:
    """What the guard changed, in words: dropped, added or corrected calls."""
    out = []
    unmatched = list(plan)
    for p in proposed:
        match = next((c for c in unmatched if c["name"] == p["name"]), None)
        if match is None:
            out.append(f"{label}: dropped {p['name']}")
            continue
        unmatched.remove(match)
        for key in ("raw_entry", "tags", "limit", "memory_id", "vault_id"):
            if key in match["args"] and p["args"].get(key) != match["args"][key]:
                out.append(f"{label}: corrected {p['name']}.{key}")
    out += [f"{label}: added {c['name']}" for c in unmatched]
    return out


def build_capture_graph(model, tools: list, checkpointer=None, window: int = MODEL_WINDOW):
    """Compile the tool-only graph. Invoke per message with ``configurable`` =
    {thread_id, vault_id, memory_id} and input ``{"messages": [m], "turn": m}``."""
    bound = model.bind_tools(tools)
    by_name = {t.name: t for t in tools}

    async def llm_call(state: CaptureState, config: RunnableConfig) -> dict[str, Any]:
        turn = state.get("turn")
        if turn is None:
            return {"plan": []}
        try:
            check_turn(turn)
        except InvalidTurn:  # refused: the turn leaves the messages again; `planned` says why
            ids = {m.id for m in state["messages"]}
            gone = [RemoveMessage(id=turn.id)] if turn.id is not None and turn.id in ids else []
            return {"plan": [], "messages": gone}
        conf = config["configurable"]
        vault_id, memory_id = conf["vault_id"], conf["memory_id"]
        prompt = SystemMessage(f"{system_prompt(vault_id, memory_id)}\n{turn_line(turn)}")
        reply = await bound.ainvoke([prompt, *curated(state["messages"], window)])
        proposed = list(getattr(reply, "tool_calls", None) or [])  # the text is dropped
        thread = conf.get("thread_id") or memory_id
        plan, update = guard(turn, proposed, state, vault_id, memory_id, str(thread))
        for n, c in enumerate(plan):
            c["id"] = f"{turn.id}-c{n}"
        removed = stale(state["messages"], turn, window)
        if not plan:
            return {"plan": [], **update, "messages": removed}
        # the first call goes out from here: one checkpointed step per turn fewer than a
        # separate dispatch, and the call is still checkpointed before the tools run it
        first, *rest = plan
        return {"plan": rest, **update, "messages": [*removed, _one_call(first)]}

    async def run_tool(state: CaptureState, config: RunnableConfig) -> dict[str, Any]:
        """Run the one planned call; record what the server acknowledged or refused.

        A transport failure (server down past the client's ``retry_for``)
        raises: the run fails and nothing is marked, so the same event sent
        again is planned again.
        """
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)  # `planned` routes here only after an AIMessage
        call = last.tool_calls[0]
        tool = by_name.get(call["name"])
        if tool is None:
            reply = ToolMessage(
                f"Error: no tool {call['name']!r}",
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
        else:
            reply = await tool.ainvoke({**call, "type": "tool_call"}, config)
        return {"messages": [reply], **acknowledged(state.get("turn"), call, reply)}

    # async on purpose: under ainvoke LangGraph runs a sync node or router in a worker
    # thread, a hand-off that costs more than these few lines on a busy machine
    async def dispatch(state: CaptureState) -> dict[str, Any]:
        first, *rest = state["plan"]
        return {"messages": [_one_call(first)], "plan": rest}

    async def refuse(state: Any) -> dict[str, Any]:  # ``Send`` gives it the refusal's words
        raise InvalidTurn(state)

    async def planned(state: CaptureState) -> str | Send:
        turn = state.get("turn")
        try:
            check_turn(turn) if turn is not None else None
        except InvalidTurn as exc:  # a refused turn: its run ends in this error, nothing ran
            return Send("refuse", str(exc))
        last = state["messages"][-1] if state.get("messages") else None
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    async def more(state: CaptureState) -> str:
        return "dispatch" if state.get("plan") else END

    builder = StateGraph(CaptureState)
    builder.add_node("llm_call", llm_call)
    builder.add_node("dispatch", dispatch)
    builder.add_node("tools", run_tool)
    builder.add_node("refuse", refuse)
    builder.add_edge(START, "llm_call")
    builder.add_conditional_edges("llm_call", planned, ["tools", "refuse", END])
    builder.add_edge("dispatch", "tools")
    builder.add_conditional_edges("tools", more, ["dispatch", END])
    return builder.compile(checkpointer=checkpointer)
