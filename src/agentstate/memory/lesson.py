"""Helpers that keep notebook 06's cells short: a server to start, the observer that feeds an
agent a chat and reads back the store, the replayed report's model and its faults (and beside
the store's wrong entries), the store as table rows (and per message, for the knob), the rules
beside what each agent stored and called, the teaching guard's bookkeeping (its prompt, which
message to store, the summary it takes from a reply, the add_entry arguments, the write),
side-by-side runs, the guard removed for the proof that breaks it, and the random proposals
and chats of the proof that the guard holds whatever the model proposes, with its tally
(notebook 06 and tests/test_lesson_06.py)."""

from __future__ import annotations

import contextlib
import itertools
import random
import tempfile
import textwrap
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.lessons.display import Table
from agentstate.memory.capture import calls
from agentstate.memory.capture.baselines.auditor import (
    PERIODIC,
    Violation,
    actual_flushes,
    audit,
    expected_flushes,
    flush_points,
    read_memory,
)
from agentstate.memory.capture.conversations import CONTROLS, Conversation, Event, parse
from agentstate.memory.capture.observer import VAULT, CaptureRun, ReactRun
from agentstate.memory.capture.policy import AS_REPORTED, CapturePolicy, Faults, policy_model
from agentstate.memory.capture.prompt import ids_from, system_prompt
from agentstate.memory.client import MemoryClient, SyncMemoryClient
from agentstate.memory.service.checks import MemoryInputError, check_text
from agentstate.memory.service.process import ServerProcess
from agentstate.models import PolicyChatModel

FAULTS = {
    "none": Faults(),
    "answers the user": Faults(answer_every=4),
    "writes twice": Faults(duplicate_every=5),
    "swaps roles": Faults(role_swap_every=4),
    "bootstraps twice": Faults(double_bootstrap=True),
    "skips the periodic flush": Faults(skip_periodic_flush=True),
    "reads control words in text": Faults(control_words_in_text=True),
    "all, as reported": AS_REPORTED,
}
_runs = itertools.count(1)


def start_server() -> ServerProcess:
    """A memory server process on 127.0.0.1 over a new SQLite file in a fresh temporary folder,
    started (notebook 06's first cell); it stops when the interpreter exits."""
    folder = Path(tempfile.mkdtemp(prefix="agentstate-memory-"))
    return ServerProcess(folder / "memory.sqlite").start()


async def compare(
    client: MemoryClient, db, conversation: Conversation, faults: Faults = AS_REPORTED
) -> dict[str, list[Violation]]:
    """Replay ``conversation`` through three agents; audit each store.

    ``react``: the prebuilt agent with the faulty model; ``capture``: the
    tool-only graph with the well-behaved policy; ``capture + faulty model``:
    the tool-only graph with the same faulty model as ``react``.
    """
    tools = await client.tools()
    n = next(_runs)
    runs = {
        "react": ReactRun(
            client,
            policy_model(CapturePolicy(faults, one_call_per_step=True), "faulty"),
            tools,
            run=f"react{n}",
            checkpointer=InMemorySaver(),
        ),
        "capture": CaptureRun(
            client,
            policy_model(CapturePolicy(), "policy"),
            tools,
            run=f"capture{n}",
            checkpointer=InMemorySaver(),
        ),
        "capture + faulty model": CaptureRun(
            client,
            policy_model(CapturePolicy(faults), "f"),
            tools,
            run=f"guarded{n}",
            checkpointer=InMemorySaver(),
        ),
    }
    for run in runs.values():
        await run.replay(conversation)
        for thread in conversation.threads:
            await client.call("await_consistency", memory_id=run.memory_id(thread))
    return {name: audit(db, conversation, run.memories(conversation)) for name, run in runs.items()}


def replay_model(fault: str = "all, as reported") -> Any:
    """The scripted model that replays the write-up's report: ``FAULTS[fault]`` at fixed positions.

    One tool call per reply, as the ReAct loop makes them; ``"none"`` replays a
    model that follows the capture rules. It shows what an agent does with such
    calls, not that a real model makes them (notebook 06).
    """
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; choose one of: {', '.join(FAULTS)}")
    return policy_model(CapturePolicy(FAULTS[fault], one_call_per_step=True), f"replay: {fault}")


@contextlib.contextmanager
def without_guard() -> Iterator[None]:
    """Inside the block, graphs built by ``build_capture_graph`` run the model's calls as proposed.

    The proof that breaks the guard: ``capture.guard`` is replaced by a pass-through
    (plan = the model's tool calls, no state update) and restored on exit. Only the
    guard is removed: the curated prompt, the ``tools`` node and the checkpointer stay.
    """
    from agentstate.memory.capture import graph as capture

    def pass_through(turn, proposed, state, vault_id, memory_id, thread=None):
        return [dict(c) for c in proposed], {}

    original = capture.guard
    capture.guard = pass_through
    try:
        yield
    finally:
        capture.guard = original


# --- the teaching guard's bookkeeping (notebook 06, section 3) ----------------------------


def chat_msg_idx(turn: Any) -> int | None:
    """The ``msg_idx`` of a user or assistant ``ChatMessage``: a message the guard stores.

    None for everything else: a control message (``SESSION_START``...), a chat message with
    role ``system``. A chat message without an int ``msg_idx`` is refused, one line.
    """
    if not isinstance(turn, ChatMessage) or turn.role not in ("user", "assistant"):
        return None
    idx = turn.additional_kwargs.get("msg_idx")
    if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
        raise ValueError(f"a chat message needs msg_idx, a non-negative int, got {idx!r}")
    return idx


def offered_summary(reply: Any) -> str | None:
    """The first ``summary`` the model's ``add_entry`` calls offer that the server would take
    (a string, not blank, no NUL, within its length), else None: the one thing the teaching
    guard takes from a reply."""
    for call in getattr(reply, "tool_calls", None) or []:
        summary = call.get("args", {}).get("summary") if call.get("name") == "add_entry" else None
        if isinstance(summary, str):  # the first one offered decides, as in the package's guard
            try:
                return check_text(summary, "summary")
            except MemoryInputError:
                return None
    return None


def _check_ids(who: str, ids: Mapping[str, Any]) -> None:
    """Refuse, in one line, ``ids`` that do not name the memory (``vault_id``, ``memory_id``)."""
    missing = [k for k in ("vault_id", "memory_id") if not isinstance(ids.get(k), str)]
    if missing:
        raise ValueError(f"{who}: ids must name {' and '.join(missing)} (strings)")


def rules_for(ids: Mapping[str, Any]) -> SystemMessage:
    """The capture rules of the memory ``ids`` names (``vault_id``, ``memory_id``: the invoke's
    ``configurable``), as the system message the teaching guard shows its model (notebook 06)."""
    _check_ids("rules_for", ids)
    return SystemMessage(system_prompt(ids["vault_id"], ids["memory_id"]))


def add_entry_args(turn: ChatMessage, summary: str | None, ids: Mapping[str, Any]) -> dict:
    """``add_entry``'s arguments for the chat message ``turn``: its text verbatim, tags exactly
    {role, msg_idx}, in the memory ``ids`` names (``vault_id``, ``memory_id``: the invoke's
    ``configurable``); ``summary``, or a default from the message when None."""
    idx = chat_msg_idx(turn)
    if idx is None:
        what = f"a ChatMessage of role {turn.role!r}" if isinstance(turn, ChatMessage) else turn
        raise ValueError(
            f"add_entry_args: only user and assistant messages are stored, got {what!r:.60}"
        )
    _check_ids("add_entry_args", ids)
    call = calls.add_entry(
        ids["vault_id"], ids["memory_id"], turn.role, idx, str(turn.content), summary
    )
    return call["args"]


def _write_calls(add_entry: Any, plan: Iterable[Mapping[str, Any]]) -> list[tuple[dict, int]]:
    """Each planned entry as (the tool call that sends it, its ``msg_idx``); bad input refused
    in one line before anything is sent."""
    if getattr(add_entry, "name", None) != "add_entry":
        raise ValueError(f"write_entries: pass the add_entry tool, got {add_entry!r:.60}")
    out = []
    for n, args in enumerate(plan):
        tags = args.get("tags") if isinstance(args, Mapping) else None
        idx = tags.get("msg_idx") if isinstance(tags, Mapping) else None
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise ValueError(f"write_entries: entry {n} has no tags.msg_idx, got {args!r:.60}")
        call = {"name": "add_entry", "args": dict(args), "id": f"write-{n}", "type": "tool_call"}
        out.append((call, idx))
    return out


def _stored(reply: Any, idx: int, before: list[int]) -> int:
    """``idx`` if the server took the entry; its refusal as a ValueError otherwise (naming the
    entries of the same plan stored ``before`` it, which the caller will not mark either)."""
    if getattr(reply, "status", None) == "error":  # a tool given a tool call answers so
        earlier = f" (stored before it: msg_idx {', '.join(map(str, before))})" if before else ""
        raise ValueError(
            f"add_entry refused msg_idx {idx}, not marked stored{earlier}: {reply.text}"
        )
    return idx


async def awrite_entries(add_entry: Any, plan: Iterable[Mapping[str, Any]]) -> list[int]:
    """Send each planned entry (``add_entry``'s arguments) as one tool call, in order; return the
    ``msg_idx`` values the server stored. A refusal raises ValueError naming it, so a guard marks
    nothing stored and a resend is planned again (notebook 06's ``write``; sync: write_entries)."""
    stored: list[int] = []
    for call, idx in _write_calls(add_entry, plan):
        stored.append(_stored(await add_entry.ainvoke(call), idx, stored))
    return stored


def write_entries(add_entry: Any, plan: Iterable[Mapping[str, Any]]) -> list[int]:
    """:func:`awrite_entries` for sync code (``add_entry.invoke``)."""
    stored: list[int] = []
    for call, idx in _write_calls(add_entry, plan):
        stored.append(_stored(add_entry.invoke(call), idx, stored))
    return stored


def rules_table(conversation: Conversation) -> list[dict[str, Any]]:
    """What the capture rules ask of ``conversation``, per thread, before any agent runs.

    Columns: the messages (one ``add_entry`` each), the SESSION_STARTs (one
    bootstrap each) and the msg_idx after which a flush is due (every 6th
    message, FLUSH_CONTEXT and SESSION_END), as the auditor expects them.
    """
    rows = []
    for thread in conversation.threads:
        events = conversation.thread_events(thread)
        rows.append(
            {
                "thread": thread,
                "messages (add_entry)": len(conversation.messages(thread)),
                "SESSION_START (bootstrap)": sum(e.content == "SESSION_START" for e in events),
                "flush after msg_idx": expected_flushes(conversation, thread),
            }
        )
    return rows


# --- notebook 06's proof that the guard holds whatever the model proposes -----------------

PROPOSAL_KINDS = (
    "nothing",
    "chat text",
    "duplicate",
    "wrong role",
    "wrong msg_idx",
    "other text",
    "unknown tool",
    "garbage args",
    "bad summary",
    "other memory",
    "flush",
)
_BAD_SUMMARIES = ("", "   ", "x" * 5000, "a\x00b", "two\nlines")


def proposal(kind: str, turn: BaseMessage, ids: tuple[str, str], text: str) -> list[dict]:
    """The tool calls a model proposes for ``turn`` when it misbehaves as ``kind``.

    ``text`` is arbitrary text the misbehaviour uses (the agent's own words, a
    wrong raw entry, a summary). Every kind is something the capture guard must
    survive: nothing at all, chat instead of calls, a call twice, the wrong
    role or index, other text, a tool that does not exist, arguments of the
    wrong shape, a summary the server would refuse, another memory, a flush.
    """
    vault_id, memory_id = ids
    role, idx = (
        (turn.role, turn.additional_kwargs.get("msg_idx", 0))
        if isinstance(turn, ChatMessage)
        else ("user", 0)
    )
    content = str(turn.content)
    right = calls.add_entry(vault_id, memory_id, role, idx, content)
    other_role = "user" if role == "assistant" else "assistant"
    return {
        "nothing": [],
        "chat text": [],
        "duplicate": [right, right],
        "wrong role": [calls.add_entry(vault_id, memory_id, other_role, idx, content)],
        "wrong msg_idx": [calls.add_entry(vault_id, memory_id, role, idx + 1, content)],
        "other text": [calls.add_entry(vault_id, memory_id, role, idx, text or "?")],
        "unknown tool": [calls.call("delete_memory", vault_id=vault_id, memory_id=memory_id)],
        "garbage args": [calls.call("add_entry", entry=text, tags=[role])],
        "bad summary": [
            calls.add_entry(vault_id, memory_id, role, idx, content, _BAD_SUMMARIES[len(text) % 5])
        ],
        "other memory": [calls.add_entry(vault_id, "elsewhere.chat", role, idx, content)],
        "flush": calls.flush(vault_id, memory_id, text or "context"),
    }[kind]


class RandomProposals:
    """A policy (``messages -> AIMessage``) that proposes random misbehaviours, seeded.

    Each reply mixes 0 to ``max_kinds`` kinds of ``PROPOSAL_KINDS`` for the
    current turn; ``tried`` counts the replies and ``kinds`` which kinds came up, of
    ``KINDS`` (all of ``PROPOSAL_KINDS``).
    """

    KINDS = PROPOSAL_KINDS

    def __init__(self, seed: int, max_kinds: int = 3) -> None:
        self.rng, self.max_kinds = random.Random(seed), max_kinds
        self.tried, self.kinds = 0, set[str]()

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        turn = next(m for m in reversed(messages) if isinstance(m, ChatMessage | SystemMessage))
        try:
            ids = ids_from(messages)
        except ValueError:
            ids = ("agentstate", "unknown.memory")
        kinds = self.rng.choices(PROPOSAL_KINDS, k=self.rng.randint(0, self.max_kinds))
        text = "".join(self.rng.choices("abc é👋\n", k=self.rng.randint(0, 12)))
        self.tried += 1
        self.kinds.update(kinds)
        planned = [c for k in kinds for c in proposal(k, turn, ids, text)]
        chat = "I will remember that for you." if "chat text" in kinds else ""
        tool_calls = [{**c, "id": f"p{self.tried}-{i}"} for i, c in enumerate(planned)]
        return AIMessage(content=chat, tool_calls=tool_calls)


def random_model(seed: int, max_kinds: int = 3) -> PolicyChatModel:
    """An offline chat model that proposes random misbehaviours, seeded (notebook 06's proof).

    Its ``policy`` is a :class:`RandomProposals`, which counts the replies (``tried``) and
    which kinds of proposal came up (``kinds``). ``invoke`` and ``ainvoke`` both work; a
    guard built on it several times shares one random sequence, as the lesson's loop does.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"random_model: seed must be an int, got {type(seed).__name__}")
    return PolicyChatModel(
        policy=RandomProposals(seed, max_kinds), model_name=f"random proposals {seed}"
    )


def random_events(seed: int, n_messages: int) -> tuple[Conversation, list[Event]]:
    """A random one-thread conversation and the events an observer sends for it, seeded.

    The events hold controls and user/assistant messages with random text
    (unicode, empty, newlines), and some messages sent again (an observer's
    retry): the store must still hold each message once.
    """
    rng = random.Random(seed)
    raw: list[dict[str, Any]] = [{"thread": "chat", "system": "SESSION_START"}]
    for _ in range(n_messages):
        if rng.random() < 0.15:
            raw.append({"thread": "chat", "system": rng.choice(["FLUSH_CONTEXT", "SESSION_START"])})
        text = "".join(rng.choices("ab é👋\n{}", k=rng.randint(0, 20)))
        raw.append({"thread": "chat", "role": rng.choice(["user", "assistant"]), "content": text})
    conversation = parse({"name": f"random_{seed}", "events": raw})
    events = list(conversation.events)
    sent = []
    for event in events:
        sent.append(event)
        if event.kind == "message" and rng.random() < 0.2:
            sent.append(rng.choice([e for e in sent if e.kind == "message"]))  # a resend
    return conversation, sent


def proof_summary(runs: Iterable[tuple[Conversation, list[Event], bool]], policy: Any) -> str:
    """The random proof's tally in words (notebook 06, section 4): chats, events sent and how
    many of them were resends, the model's replies and which kinds of proposal came up, and
    how many stores held exactly their chat.

    ``runs``: per random chat, ``(chat, events sent, store exact?)``; ``policy``: the random
    model's :class:`RandomProposals` (``model.policy``), which counted the replies and kinds.
    """
    runs = list(runs)
    if not runs:
        raise ValueError("proof_summary: no runs to tally")
    if not isinstance(policy, RandomProposals):
        raise TypeError(f"proof_summary: policy is a RandomProposals, got {type(policy).__name__}")
    sent = sum(len(events) for _, events, _ in runs)
    resends = sum(len(events) - len(chat.events) for chat, events, _ in runs)
    came_up = [k for k in policy.KINDS if k in policy.kinds]
    never = [k for k in policy.KINDS if k not in policy.kinds]
    kinds = f"kinds proposed, {len(came_up)} of {len(policy.KINDS)}: {', '.join(came_up)}"
    kinds += f" (never: {', '.join(never)})" if never else ""
    exact = sum(bool(ok) for _, _, ok in runs)
    return "\n".join(
        [
            f"{len(runs)} random chats, {sent} events sent: messages, control events and "
            f"{resends} resends; {policy.tried} model replies",
            *textwrap.wrap(kinds, 88, subsequent_indent="  "),
            f"stores that hold their chat once, in order: {exact} of {len(runs)}",
        ]
    )


Entry = tuple[int | None, str | None, str]  # (msg_idx, role, text)


def _observer_config(client: Any, wanted: type, memory_id: str, vault_id: str) -> dict:
    """The invoke config of one observed chat; a client of the wrong kind is refused first."""
    if not isinstance(client, wanted):
        other = "await observe(...)" if wanted is SyncMemoryClient else "observe_sync(...)"
        raise TypeError(
            f"this observer needs a {wanted.__name__}, not {type(client).__name__}: use {other}"
        )
    return {"configurable": {"thread_id": memory_id, "vault_id": vault_id, "memory_id": memory_id}}


async def observe(
    agent: Any,
    client: MemoryClient,
    db: str | Path,
    events: Iterable[Event],
    memory_id: str,
    vault_id: str = VAULT,
) -> list[Entry]:
    """Notebook 06's observer: feed ``agent`` a chat, one event per invoke; return the store.

    Creates ``memory_id`` on the server, sends each event as the new message only (as
    ``messages`` for a ReAct loop and ``turn`` for a guard) on the checkpointer thread
    ``memory_id``, waits until the server has written its queue (``await_consistency``), and
    returns the memory's entries as (msg_idx, role, text) from the server's SQLite file ``db``.
    ``observe_sync`` is the same for sync agents and a :class:`SyncMemoryClient`.
    """
    config = _observer_config(client, MemoryClient, memory_id, vault_id)
    await client.call("create_memory", vault_id=vault_id, memory_id=memory_id)
    for event in events:
        message = event.to_message()  # a chat message, or a control message
        await agent.ainvoke({"messages": [message], "turn": message}, config)
    await client.call("await_consistency", memory_id=memory_id)  # its writes are queued
    return stored_entries(db, memory_id)


def observe_sync(
    agent: Any,
    client: SyncMemoryClient,
    db: str | Path,
    events: Iterable[Event],
    memory_id: str,
    vault_id: str = VAULT,
) -> list[Entry]:
    """:func:`observe` for sync code: ``agent.invoke`` and a :class:`SyncMemoryClient`."""
    config = _observer_config(client, SyncMemoryClient, memory_id, vault_id)
    client.call("create_memory", vault_id=vault_id, memory_id=memory_id)
    for event in events:
        message = event.to_message()
        agent.invoke({"messages": [message], "turn": message}, config)
    client.call("await_consistency", memory_id=memory_id)
    return stored_entries(db, memory_id)


def stored_entries(db: str | Path, memory_id: str) -> list[Entry]:
    """(msg_idx, role, text) of every entry of ``memory_id`` in the store, in stored order."""
    return _entries(read_memory(db, memory_id))


def _entries(read: Mapping[str, Any]) -> list[Entry]:
    """:func:`stored_entries` of what :func:`read_memory` already read."""
    return [
        (e["tags"].get("msg_idx"), e["tags"].get("role"), e["raw_entry"]) for e in read["entries"]
    ]


def expected_entries(conversation: Conversation, thread: str) -> list[Entry]:
    """(msg_idx, role, text) of every message of ``thread``: what a correct store holds."""
    return [(m.msg_idx, m.role, m.content) for m in conversation.messages(thread)]


def store_rows(db: str | Path, memory_id: str, conversation: Conversation, thread: str) -> list:
    """One row per stored entry: what the chat said at its ``msg_idx``, what was stored, and
    what is wrong with it.

    The verdict names one fault per row: another text than the message's; else "stored
    twice" for a second entry of the same message (whatever its role tag: the first copy's
    row already says whether the role is wrong); else a wrong role; else ``ok``.
    """
    said = {m.msg_idx: m for m in conversation.messages(thread)}
    rows = []
    for idx, role, text, verdict in _judged(db, memory_id, conversation, thread):
        message = said.get(idx)
        chat = f"{message.role}: {message.content}" if message is not None else "(no message)"
        rows.append(
            {"msg_idx": idx, "chat said": chat, "stored": f"{role}: {text}", "verdict": verdict}
        )
    return rows


# which scheduled fault leaves which verdict in the store; of the others, two are calls, not
# entries, and a control word taken for a control leaves an entry out, which no verdict marks
_VERDICT_OF = {
    "answers the user": "not this message's text",
    "writes twice": "stored twice",
    "swaps roles": "wrong role (was assistant)",
}
_CALL_FAULTS = {"bootstraps twice", "skips the periodic flush"}


def replay_vs_store(
    db: str | Path,
    memory_id: str,
    conversation: Conversation,
    thread: str,
    fault: str = "all, as reported",
) -> list[dict[str, Any]]:
    """The replay's schedule beside the store (notebook 06, section 2): per fault of
    :func:`replay_schedule` (``fault`` as given to ``replay_model``), where it was scheduled,
    where the store holds an entry with the verdict it leaves, and one example (the chat's
    message and the stored entry, cut to 40 characters; "the same text" where the texts are
    equal). A wrong entry no fault explains gets a row of its own, so nothing is hidden."""
    said = {m.msg_idx: m for m in conversation.messages(thread)}
    wrong: dict[str, list[tuple[int | None, str | None, str]]] = {}
    for idx, role, text, verdict in _judged(db, memory_id, conversation, thread):
        if verdict != "ok":
            wrong.setdefault(verdict, []).append((idx, role, text))

    def row(fault: str, at: str, verdict: str | None) -> dict[str, Any]:
        found = wrong.pop(verdict, []) if verdict else []
        if not found:
            where = (
                "(none)"
                if verdict
                else "(calls, not entries)"
                if fault in _CALL_FAULTS
                else "(an entry left out, not a wrong one)"
            )
            return {"fault": fault, "scheduled at": at, "in the store at": where}
        idx, role, text = found[0]
        message = said.get(idx)
        chat = f"{message.role}: {_cut(message.content, 40)}" if message else "(no message)"
        same = message is not None and message.content == text
        return {
            "fault": fault,
            "scheduled at": at,
            "in the store at": ", ".join(str(i) for i, _, _ in found),
            "verdict": verdict,
            "e.g. chat said": chat,
            "stored": f"{role}: {'the same text' if same else _cut(text, 40)}",
        }

    rows = [
        row(r["fault"], r["at"], _VERDICT_OF.get(r["fault"]))
        for r in replay_schedule(conversation, thread, fault)
    ]
    return rows + [row("(none scheduled)", "", verdict) for verdict in list(wrong)]


def _judged(
    db: str | Path, memory_id: str, conversation: Conversation, thread: str
) -> Iterator[tuple[int | None, str | None, str, str]]:
    """Each stored entry of ``memory_id`` as (msg_idx, role, text, verdict): see store_rows."""
    said = {m.msg_idx: m for m in conversation.messages(thread)}
    seen: set[tuple] = set()
    for idx, role, text in stored_entries(db, memory_id):
        message = said.get(idx)
        if message is None or message.content != text:
            verdict = "not this message's text"
        elif (idx, text) in seen:
            verdict = "stored twice"
        elif message.role != role:
            verdict = f"wrong role (was {message.role})"
        else:
            verdict = "ok"
        seen.add((idx, text))
        yield idx, role, text, verdict


def rules_kept(
    db: str | Path, conversation: Conversation, thread: str, memories: Mapping[str, str]
) -> list[dict[str, Any]]:
    """What the capture rules ask of ``thread``'s chat, beside what each agent did, read from the
    server's file ``db`` (``memories``: an agent's name -> the memory it wrote): the entries
    stored and whether they are the chat once and in order, the bootstrap's calls, and after
    which ``msg_idx`` each ``put_context`` (a flush) ran, one row per what asks for it: every
    6th message, or a control event; a row of flushes nobody asked for only if an agent made
    one (notebook 06, section 3)."""
    if not memories:
        raise ValueError("rules_kept: name at least one agent and its memory")
    starts = sum(e.content == "SESSION_START" for e in conversation.thread_events(thread))
    expected = expected_entries(conversation, thread)
    points = flush_points(conversation, thread)
    asks = {
        _PERIODIC: [after for after, why in points if why == PERIODIC],
        _ON_CONTROL: [after for after, why in points if why != PERIODIC],
    }

    def column(entries: list[Entry], bootstrap: str, flushes: list[int]) -> dict[str, Any]:
        left = Counter(flushes)
        by_why = {}
        for row, wanted in asks.items():  # each flush counts once, for the first point it meets
            met = []
            for after in wanted:
                if left[after] > 0:
                    left[after] -= 1
                    met.append(after)
            by_why[row] = ", ".join(map(str, met)) or "(none)"
        return {
            "entries stored": len(entries),
            "the chat, once, in order": "yes" if entries == expected else "no",
            "bootstrap: get_context, list_entries": bootstrap,
            **by_why,
            _UNASKED: ", ".join(map(str, sorted(left.elements()))) or "(none)",
        }

    columns = {"the rules ask": column(expected, f"{starts}, {starts}", [a for a, _ in points])}
    for agent, memory_id in memories.items():
        read = read_memory(db, memory_id)  # one read: its call log and its entries
        tools = [op["tool"] for op in read["ops"]]
        bootstrap = f"{tools.count('get_context')}, {tools.count('list_entries')}"
        flushes = [after for after, _ in actual_flushes(read["ops"])]
        columns[agent] = column(_entries(read), bootstrap, flushes)
    rules = [r for r in columns["the rules ask"] if r != _UNASKED]
    if any(col[_UNASKED] != "(none)" for col in columns.values()):
        rules.append(_UNASKED)
    return [{"rule": rule, **{name: col[rule] for name, col in columns.items()}} for rule in rules]


_PERIODIC = "flush after msg_idx: every 6th"
_ON_CONTROL = "flush after msg_idx: on FLUSH_CONTEXT, SESSION_END"
_UNASKED = "flush after msg_idx: not asked for"


def stores_by_message(
    db: str | Path, conversation: Conversation, thread: str, memories: Mapping[str, str]
) -> dict[int, Table]:
    """Per ``msg_idx`` of ``thread``, a small table (notebook 06's knob): what the chat said,
    then what each agent stored for it, with :func:`store_rows`' verdict.

    ``memories`` maps an agent's name to the memory it wrote. Texts are cut to 45 characters
    so a row stays under 100 (the verdict is judged on the whole text).
    """
    if not memories:
        raise ValueError("stores_by_message: name at least one agent and its memory")
    tables: dict[int, list[dict[str, Any]]] = {}
    for m in conversation.messages(thread):
        tables[m.msg_idx or 0] = [{"who": "the chat", "role": m.role, "text": _cut(m.content)}]
    for agent, memory_id in memories.items():
        for idx, role, text, verdict in _judged(db, memory_id, conversation, thread):
            row = {"who": agent, "role": role, "text": _cut(text), "verdict": verdict}
            tables.setdefault(idx or 0, []).append(row)
    return {idx: Table(rows) for idx, rows in tables.items()}


def _cut(text: str, width: int = 45) -> str:
    """One line of at most ``width`` characters: newlines shown as spaces, cut with "…"."""
    flat = " ".join(text.split("\n"))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def replay_schedule(
    conversation: Conversation, thread: str, fault: str = "all, as reported"
) -> list[dict[str, Any]]:
    """Where the replayed model of ``replay_model(fault)`` misbehaves on ``thread``'s chat.

    One row per fault of ``FAULTS[fault]``: what the model does, and at which messages
    (``msg_idx``) or controls, read from the same ``Faults.hits`` rule the replay plays; a
    fault that never fires in this chat has no row. A replay's faults sit at fixed positions.
    """
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; choose one of: {', '.join(FAULTS)}")
    f = FAULTS[fault]
    said = [(m.msg_idx or 0, m.role, m.content) for m in conversation.messages(thread)]

    def listed(indexes: list[int]) -> str:
        return ", ".join(map(str, indexes))  # empty: the fault never fires in this chat

    def at(role: str | None, every: int, offset: int) -> str:
        return listed([i for i, r, _ in said if role in (None, r) and f.hits(every, i, offset)])

    schedule = [
        (f.answer_every, "answers the user", "answers the user in its own words, stores that text",
         lambda: at("user", f.answer_every, 1)),
        (f.duplicate_every, "writes twice", "calls add_entry twice for the message",
         lambda: at(None, f.duplicate_every, 3)),
        (f.role_swap_every, "swaps roles", "tags the assistant's message as the user's",
         lambda: at("assistant", f.role_swap_every, 0)),
        (f.double_bootstrap, "bootstraps twice", "calls get_context and list_entries twice",
         lambda: "each SESSION_START"),
        (f.skip_periodic_flush, "skips the periodic flush", "leaves out the flush due there",
         lambda: listed([i for i, _, _ in said if calls.periodic_flush_due(i)])),
        (f.control_words_in_text, "reads control words in text",
         "takes a message whose text is a control word for a control",
         lambda: listed([i for i, _, text in said if text in CONTROLS])),
    ]  # fmt: skip
    rows = [
        {"fault": name, "the model": does, "at": where()}
        for on, name, does, where in schedule
        if on
    ]
    return [r for r in rows if r["at"]]
