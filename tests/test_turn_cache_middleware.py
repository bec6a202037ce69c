"""The turn cache beside LangChain v1's own middleware (issue 16).

A notes agent: one reply saves "milk" (call -1) and "eggs" (call -2) and
reads the notes (call -3). Each test puts a real LangChain middleware next to
the cache, in both orders, runs sync and async on a real checkpointer, and
checks that the reader never waits for a writer that will not write, never
reports a view the state will not hold, and that no batch stays open.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from typing import Annotated, Any, NotRequired

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    HumanInTheLoopMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Overwrite

from agentstate.core import TurnCacheMiddleware, merge_fields
from agentstate.models import ScriptedChatModel, reply, tool_call

# The reader's wait limit, and "at once": a third of it. No test waits for the limit, so a
# long one costs nothing when the code is right, and it keeps "released at once" apart from
# "waited for the limit" on a loaded machine (a resumed reader took 3.7 s at load 20).
TIMEOUT = 30.0
AT_ONCE = 10.0
HOWS = ["invoke", "ainvoke"]
EVERY_WAY = ["invoke", "ainvoke", "stream", "astream"]
ORDERS = ["cache first", "cache last"]


class NotesState(AgentState):
    notes: Annotated[NotRequired[dict[str, str]], merge_fields]
    tags: Annotated[NotRequired[dict[str, str]], merge_fields]


FAILS: dict[str, int] = {}  # title -> how many more times save_note raises for it


@tool
def save_note(title: str, text: str, runtime: ToolRuntime) -> Command:
    """Save one note."""
    if FAILS.get(title, 0) > 0:
        FAILS[title] -= 1
        raise ConnectionError(f"disk busy saving {title}")
    return Command(
        update={
            "notes": {title: text},
            "messages": [ToolMessage("saved", tool_call_id=runtime.tool_call_id)],
        }
    )


@tool
def replace_notes(title: str, text: str, runtime: ToolRuntime) -> Command:
    """Replace every note with one (an Overwrite bypasses the reducer)."""
    return Command(
        update={
            "notes": Overwrite({title: text}),
            "messages": [ToolMessage("replaced", tool_call_id=runtime.tool_call_id)],
        }
    )


@tool
def read_notes(runtime: ToolRuntime) -> str:
    """All notes, as JSON."""
    return json.dumps(runtime.state.get("notes", {}), sort_keys=True)


@tool
def tag(name: str, value: Any, runtime: ToolRuntime) -> Command:
    """Set one tag (value is not checked: a bad write must be refused by the cache)."""
    return Command(
        update={
            "tags": value if name == "raw" else {name: value},
            "messages": [ToolMessage("tagged", tool_call_id=runtime.tool_call_id)],
        }
    )


@tool
def read_tags(runtime: ToolRuntime) -> str:
    """All tags, as JSON."""
    return json.dumps(runtime.state.get("tags", {}), sort_keys=True)


@pytest.fixture(autouse=True)
def _no_failures():
    FAILS.clear()
    yield
    FAILS.clear()


def batch_reply():
    return reply(
        tool_call("save_note", title="a", text="milk"),
        tool_call("save_note", title="b", text="eggs"),
        tool_call("read_notes"),
    )


def notes_cache(**options) -> TurnCacheMiddleware:
    return TurnCacheMiddleware(
        writers=["save_note"], readers=["read_notes"], key="notes", timeout=TIMEOUT, **options
    )


def build(other, order, *, cache=None, checkpointer=None, script=None):
    cache = cache or notes_cache()
    others = other if isinstance(other, list) else [other]
    middleware = [cache, *others] if order == "cache first" else [*others, cache]
    model = ScriptedChatModel(script=script or [batch_reply(), reply(text="done")])
    agent = create_agent(
        model,
        tools=[save_note, replace_notes, read_notes, tag, read_tags],
        state_schema=NotesState,
        middleware=middleware,
        checkpointer=checkpointer if checkpointer is not None else InMemorySaver(),
    )
    return agent, cache


CONFIG = {"configurable": {"thread_id": "t"}}
START = {"messages": [("user", "shopping")]}


def go(agent, how, inp=START, config=CONFIG):
    """One run, timed: (final state snapshot, seconds)."""
    start = time.perf_counter()
    if how == "invoke":
        agent.invoke(inp, config)
        state = agent.get_state(config)
    elif how == "stream":
        list(agent.stream(inp, config, stream_mode="updates"))
        state = agent.get_state(config)
    else:

        async def run():
            if how == "astream":
                [_ async for _ in agent.astream(inp, config, stream_mode="updates")]
            else:
                await agent.ainvoke(inp, config)
            return await agent.aget_state(config)

        state = asyncio.run(run())
    return state, time.perf_counter() - start


def reads(values, name="read_notes"):
    return [m for m in values["messages"] if isinstance(m, ToolMessage) and m.name == name]


def run_batch(other, order, how):
    """Build with ``other``, run the batch ``how``: (state, seconds, the one reader's reply).

    Asserts every batch the run opened is closed again.
    """
    agent, cache = build(other, order)
    state, seconds = go(agent, how)
    assert cache.open_batches == 0
    (reader,) = reads(state.values)
    return state, seconds, reader


def call_id(values, title):
    ai = next(m for m in values["messages"] if m.type == "ai" and m.tool_calls)
    return next(c["id"] for c in ai.tool_calls if c["args"].get("title") == title)


# --- HumanInTheLoopMiddleware, batched: one interrupt before the tools run ---

DECISIONS = {
    "approve": {"type": "approve"},
    "edit": {
        "type": "edit",
        "edited_action": {"name": "save_note", "args": {"title": "b", "text": "oat milk"}},
    },
    "reject": {"type": "reject", "message": "no eggs"},
    "respond": {"type": "respond", "message": "eggs are already on the list"},
}
EXPECTED = {
    "approve": {"a": "milk", "b": "eggs"},
    "edit": {"a": "milk", "b": "oat milk"},
    "reject": {"a": "milk"},
    "respond": {"a": "milk"},
}


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("decision", list(DECISIONS))
def test_batched_review_the_reader_sees_what_the_decision_wrote_at_once(decision, order, how):
    hitl = HumanInTheLoopMiddleware({"save_note": True})
    agent, cache = build(hitl, order)
    paused, _ = go(agent, how)
    assert paused.interrupts and paused.values["messages"][-1].tool_calls
    resume = Command(resume={"decisions": [{"type": "approve"}, DECISIONS[decision]]})
    state, seconds = go(agent, how, resume)
    assert seconds < AT_ONCE, f"the reader waited {seconds:.1f}s for a writer that never ran"
    (reader,) = reads(state.values)
    assert reader.status == "success" and json.loads(reader.content) == EXPECTED[decision]
    assert state.values["notes"] == EXPECTED[decision]
    assert cache.open_batches == 0


# --- HumanInTheLoopMiddleware, per call: the writer pauses inside the tools step ---


def per_call_review(decisions=("approve", "edit", "reject", "respond")):
    # only the "eggs" call is reviewed; "milk" runs at once
    config = {
        "allowed_decisions": list(decisions),
        "when": lambda r: r.tool_call["args"]["title"] == "b",
    }
    return HumanInTheLoopMiddleware({"save_note": config}, interrupt_mode="per_call")


@pytest.mark.skipif(
    "interrupt_mode" not in inspect.signature(HumanInTheLoopMiddleware).parameters,
    reason="per-call review came with langchain 1.4.6 (`make ends` tests older releases)",
)
@pytest.mark.parametrize("how", EVERY_WAY)
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("decision", list(DECISIONS))
def test_per_call_review_the_reader_says_the_write_is_pending_then_the_next_read_is_true(
    decision, order, how
):
    script = [batch_reply(), reply(tool_call("read_notes")), reply(text="done")]
    agent, cache = build(per_call_review(), order, script=script)
    paused, seconds = go(agent, how)
    assert seconds < AT_ONCE, f"the reader waited {seconds:.1f}s for a paused writer"
    (interrupt,) = paused.interrupts
    resume = Command(resume={interrupt.id: DECISIONS[decision]})
    state, seconds = go(agent, how, resume)
    assert seconds < AT_ONCE
    first, second = reads(state.values)
    # the same-batch reader did not report {"a": "milk"} as the notes: it named the paused call
    assert first.status == "error" and call_id(state.values, "b") in first.content
    assert "human decision" in first.content
    assert json.loads(second.content) == EXPECTED[decision] == state.values["notes"]
    assert cache.open_batches == 0


@pytest.mark.extras("persistence")
@pytest.mark.parametrize("how", HOWS)
def test_a_reviewed_reader_resumed_by_a_new_process_sees_the_writes_of_its_batch(tmp_path, how):
    """The reader pauses for review after both writers ran; a fresh agent and cache (a
    restarted process) on the same SQLite file resume it: it must see both writes at once,
    taken from the checkpoint, not wait for writers that will not run again."""
    from agentstate.persistence import async_sqlite_checkpointer, sqlite_checkpointer

    review = HumanInTheLoopMiddleware({"read_notes": True}, interrupt_mode="per_call")

    if how == "invoke":
        with sqlite_checkpointer(tmp_path / "t.db") as saver:
            first, _ = build(review, "cache first", checkpointer=saver)
            first.invoke(START, CONFIG)
            (interrupt,) = first.get_state(CONFIG).interrupts
            second, cache = build(review, "cache first", checkpointer=saver)
            start = time.perf_counter()
            second.invoke(Command(resume={interrupt.id: {"type": "approve"}}), CONFIG)
            seconds = time.perf_counter() - start
            state = second.get_state(CONFIG)
    else:

        async def run():
            async with async_sqlite_checkpointer(tmp_path / "t.db") as saver:
                first, _ = build(review, "cache first", checkpointer=saver)
                await first.ainvoke(START, CONFIG)
                (interrupt,) = (await first.aget_state(CONFIG)).interrupts
                second, cache = build(review, "cache first", checkpointer=saver)
                start = time.perf_counter()
                await second.ainvoke(Command(resume={interrupt.id: {"type": "approve"}}), CONFIG)
                seconds = time.perf_counter() - start
                return await second.aget_state(CONFIG), seconds, cache

        state, seconds, cache = asyncio.run(run())
    assert seconds < AT_ONCE
    (reader,) = reads(state.values)
    assert json.loads(reader.content) == {"a": "milk", "b": "eggs"}
    assert cache.open_batches == 0


# --- ToolCallLimitMiddleware: a blocked writer never reaches the tools node ---


@pytest.mark.parametrize("how", EVERY_WAY)
@pytest.mark.parametrize("order", ORDERS)
def test_a_writer_blocked_by_the_call_limit_releases_the_reader_at_once(order, how):
    limit = ToolCallLimitMiddleware(tool_name="save_note", run_limit=1, exit_behavior="continue")
    state, seconds, reader = run_batch(limit, order, how)
    assert seconds < AT_ONCE, f"the reader waited {seconds:.1f}s for a blocked writer"
    assert json.loads(reader.content) == {"a": "milk"} == state.values["notes"]


# --- ToolRetryMiddleware and writers that raise ---


@pytest.mark.parametrize("how", EVERY_WAY)
@pytest.mark.parametrize("order", ORDERS)
def test_a_writer_retried_after_a_failure_is_waited_for(order, how):
    FAILS["b"] = 1
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0.3, jitter=False)
    state, _, reader = run_batch(retry, order, how)
    assert reader.status == "success"
    assert json.loads(reader.content) == {"a": "milk", "b": "eggs"} == state.values["notes"]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("order", ORDERS)
def test_a_writer_that_fails_for_good_releases_the_reader_with_an_error_naming_it(order, how):
    FAILS["b"] = 99
    retry = ToolRetryMiddleware(max_retries=1, initial_delay=0.1, jitter=False)
    state, seconds, reader = run_batch(retry, order, how)
    assert seconds < AT_ONCE, f"the reader waited {seconds:.1f}s for a writer that failed"
    assert state.values["notes"] == {"a": "milk"}
    if order == "cache first":  # the cache sees the retry's final answer: no write, for good
        assert reader.status == "success" and json.loads(reader.content) == {"a": "milk"}
    else:  # the cache sees a raise and cannot tell a lost write from a resumable one
        assert reader.status == "error" and call_id(state.values, "b") in reader.content
        assert "ConnectionError: disk busy saving b" in reader.content


@pytest.mark.parametrize("how", HOWS)
def test_a_raising_writer_resumed_later_the_reader_never_reported_a_stale_view(tmp_path, how):
    FAILS["b"] = 1
    script = [batch_reply(), reply(tool_call("read_notes")), reply(text="done")]
    agent, cache = build([], "cache first", script=script)
    start = time.perf_counter()
    with pytest.raises(ConnectionError, match="disk busy saving b"):
        go(agent, how)
    assert time.perf_counter() - start < AT_ONCE
    state, _ = go(agent, how, None)  # resume: only the failed writer runs again
    first, second = reads(state.values)
    final = {"a": "milk", "b": "eggs"}
    assert json.loads(second.content) == final == state.values["notes"]
    # the reader of the failed batch either said the write was missing, or (when the step
    # stopped before its result was saved) ran again on resume and saw it: never {"a": "milk"}
    if first.status == "error":
        assert call_id(state.values, "b") in first.content and "ConnectionError" in first.content
    else:
        assert json.loads(first.content) == final
    assert cache.open_batches == 0


@pytest.mark.parametrize("how", HOWS)
def test_a_writer_answered_by_a_middleware_inside_the_cache_releases_the_reader(how):
    """Any middleware listed after the cache that answers a writer without running it."""

    class Skip(AgentMiddleware):
        def answer(self, request):
            if request.tool_call["args"].get("title") == "b":
                return ToolMessage("skipped", tool_call_id=request.tool_call["id"], name="x")
            return None

        def wrap_tool_call(self, request, handler):
            answer = self.answer(request)
            return answer if answer is not None else handler(request)

        async def awrap_tool_call(self, request, handler):
            answer = self.answer(request)
            return answer if answer is not None else await handler(request)

    state, seconds, reader = run_batch(Skip(), "cache first", how)
    assert seconds < AT_ONCE
    assert json.loads(reader.content) == {"a": "milk"} == state.values["notes"]


@pytest.mark.parametrize("how", HOWS)
def test_an_overwrite_in_the_batch_is_read_as_langgraph_applies_it(how):
    first = reply(
        tool_call("save_note", title="a", text="milk"),
        tool_call("replace_notes", title="c", text="bread"),
        tool_call("save_note", title="b", text="eggs"),
        tool_call("read_notes"),
    )
    cache = TurnCacheMiddleware(
        writers=["save_note", "replace_notes"], readers=["read_notes"], key="notes"
    )
    agent, _ = build([], "cache first", cache=cache, script=[first, reply(text="done")])
    state, _ = go(agent, how)
    (reader,) = reads(state.values)
    assert json.loads(reader.content) == state.values["notes"] == {"c": "bread"}
    assert cache.open_batches == 0


# --- several caches, worker slots, bad writes ---


@pytest.mark.parametrize("how", HOWS)
def test_two_caches_on_two_keys_compose(how):
    tags = TurnCacheMiddleware(writers=["tag"], readers=["read_tags"], key="tags")
    both = reply(
        tool_call("tag", name="shop", value="corner"),
        tool_call("read_tags"),
        tool_call("save_note", title="a", text="milk"),
        tool_call("read_notes"),
    )
    agent, notes = build(tags, "cache first", script=[both, reply(text="done")])
    state, _ = go(agent, how)
    assert json.loads(reads(state.values)[0].content) == {"a": "milk"}
    assert json.loads(reads(state.values, "read_tags")[0].content) == {"shop": "corner"}
    assert notes.name != tags.name and notes.open_batches == tags.open_batches == 0


@pytest.mark.parametrize("how", HOWS)
def test_readers_first_with_one_worker_slot_get_the_error_at_once(how):
    first = reply(
        tool_call("read_notes"),
        tool_call("save_note", title="a", text="milk"),
    )
    agent, cache = build([], "cache first", script=[first, reply(text="done")])
    state, seconds = go(agent, how, config={**CONFIG, "max_concurrency": 1})
    assert seconds < AT_ONCE, f"the reader waited {seconds:.1f}s for a writer that cannot start"
    (reader,) = reads(state.values)
    assert reader.status == "error" and "max_concurrency=1" in reader.content
    assert state.values["notes"] == {"a": "milk"} and cache.open_batches == 0


@pytest.mark.parametrize("how", HOWS)
def test_a_reader_first_with_two_worker_slots_sees_every_write(how):
    first = reply(
        tool_call("read_notes"),
        tool_call("save_note", title="a", text="milk"),
        tool_call("save_note", title="b", text="eggs"),
    )
    agent, cache = build([], "cache first", script=[first, reply(text="done")])
    state, _ = go(agent, how, config={**CONFIG, "max_concurrency": 2})
    (reader,) = reads(state.values)
    assert json.loads(reader.content) == {"a": "milk", "b": "eggs"}
    assert cache.open_batches == 0


@pytest.mark.parametrize("how", HOWS)
def test_a_non_dict_write_is_an_error_the_model_sees_and_changes_nothing(how):
    tags = TurnCacheMiddleware(writers=["tag"], readers=["read_tags"], key="tags")
    bad = reply(tool_call("tag", name="ok", value="1"), tool_call("tag", name="raw", value="x"))
    agent, _ = build(tags, "cache first", script=[bad, reply(text="done")])
    state, _ = go(agent, how)
    refused = [m for m in reads(state.values, "tag") if m.status == "error"]
    assert len(refused) == 1
    assert "'tags'" in refused[0].content and "str" in refused[0].content
    assert state.values["tags"] == {"ok": "1"}


def test_without_the_cache_a_non_dict_write_names_the_key_and_the_type():
    bad = reply(tool_call("tag", name="raw", value="x"))
    model = ScriptedChatModel(script=[bad, reply(text="done")])
    agent = create_agent(model, tools=[tag], state_schema=NotesState)
    with pytest.raises(TypeError, match=r"'tags'.*str"):
        agent.invoke(START)
