"""Stage 03: same-turn visibility, the broken caches, and the turn cache fix.

The fixed agent is a plain compiled graph: every test invokes it directly,
as a LangGraph server would, with no wrapper and nothing in the config.
"""

import asyncio
import gc
import json
import threading
import time
import weakref

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    VALID_REQUIREMENTS,
    fields_seen_by_reader,
    file_fields,
    reader_batch_model,
    same_batch_reader_trials,
    store_calls,
    user_turn,
)
from agentstate.lessons.simulation import SlowToolMiddleware, ToolLatencyMiddleware
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import (
    MANIFEST_PATH,
    NAIVE_KEY,
    build_naive_cache_agent,
    build_original_cache_agent,
    build_reducer_agent,
    build_turn_cache_agent,
)

READERS = [
    tool_call("get_collected_requirements"),
    tool_call("validate_manifest"),
    tool_call("generate_rds_manifest"),
]


def test_stage02_reader_in_the_writers_batch_sees_the_state_from_before():
    agent = build_reducer_agent(reader_batch_model(POSTGRES_FIELDS, 3))
    assert same_batch_reader_trials(agent, 3) == [0, 0, 0]


def test_stage02_reader_in_the_next_model_step_sees_every_write():
    reader = reply(tool_call("get_collected_requirements"))
    model = ScriptedChatModel(
        script=[reply(*store_calls(POSTGRES_FIELDS)), reader, reply(text="done")]
    )
    state = build_reducer_agent(model).invoke(user_turn())
    last = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    assert last.name == "get_collected_requirements"
    assert json.loads(last.content) == POSTGRES_FIELDS


def test_original_before_agent_cache_raises_attribute_error():
    agent = build_original_cache_agent(ScriptedChatModel(script=[reply(text="hi")]))
    with pytest.raises(AttributeError, match="'Runtime' object has no attribute 'config'"):
        agent.invoke(user_turn())


def test_naive_shared_cache_is_a_race():
    trials = 60
    agent = build_naive_cache_agent(
        reader_batch_model(POSTGRES_FIELDS, trials),
        middleware=[ToolLatencyMiddleware(0.005, seed=3)],
    )
    seen = same_batch_reader_trials(agent, trials, lambda: {"configurable": {NAIVE_KEY: {}}})
    assert min(seen) < 5, "a reader never missed a write: the race did not show"
    assert max(seen) > 0, "the shared dict was never seen: it is not shared"


def test_turn_cache_reader_sees_every_write_of_its_batch():
    trials = 100
    agent = build_turn_cache_agent(
        reader_batch_model(POSTGRES_FIELDS, trials),
        middleware=[ToolLatencyMiddleware(0.005, seed=3)],
    )
    assert same_batch_reader_trials(agent, trials) == [5] * trials


def test_store_validate_generate_in_one_reply_writes_both_files():
    model = ScriptedChatModel(
        script=[reply(*store_calls(VALID_REQUIREMENTS), *READERS), reply(text="done")]
    )
    state = build_turn_cache_agent(model).invoke(user_turn())
    replies = {m.name: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert replies["validate_manifest"].content == "valid: all rules pass"
    assert replies["generate_rds_manifest"].status == "success"
    assert MANIFEST_PATH in state["files"]
    assert file_fields(state) == VALID_REQUIREMENTS


def test_rejected_writes_release_the_readers_and_are_not_cached():
    calls = store_calls({"engine": "postgres", "port": 99999})
    model = ScriptedChatModel(
        script=[reply(*calls, tool_call("get_collected_requirements")), reply(text="done")]
    )
    start = time.perf_counter()
    state = build_turn_cache_agent(model, timeout=5).invoke(user_turn())
    assert time.perf_counter() - start < 4
    reader = [m for m in state["messages"] if m.name == "get_collected_requirements"][0]
    assert '"engine": "postgres"' in reader.content and "port" not in reader.content


def test_timeout_reaches_the_model_as_an_error_message():
    model = ScriptedChatModel(
        script=[
            reply(*store_calls({"engine": "postgres"}), tool_call("validate_manifest")),
            reply(text="done"),
        ]
    )
    slow = SlowToolMiddleware("store_requirement", 0.5)
    agent = build_turn_cache_agent(model, timeout=0.05, middleware=[slow])
    state = agent.invoke(user_turn())
    verdict = [m for m in state["messages"] if m.name == "validate_manifest"][0]
    assert verdict.status == "error" and "timed out after 0.05s" in verdict.content
    assert "1 writer call(s)" in verdict.content
    assert state["requirements"] == {"engine": "postgres"}  # the slow store still landed


def run(agent, how, config=None):
    """The final state of one turn, through each way a caller (or a server) runs a graph."""
    inp = user_turn()
    if how == "invoke":
        return agent.invoke(inp, config)
    if how == "stream":
        return list(agent.stream(inp, config, stream_mode="values"))[-1]

    async def go():
        if how == "ainvoke":
            return await agent.ainvoke(inp, config)
        if how == "astream":
            return [chunk async for chunk in agent.astream(inp, config, stream_mode="values")][-1]
        ended = [
            event["data"]["output"]
            async for event in agent.astream_events(inp, config, version="v2")
            if event["event"] == "on_chain_end" and event["name"] == "LangGraph"
        ]
        return ended[-1]

    return asyncio.run(go())


@pytest.mark.parametrize("how", ["invoke", "ainvoke", "stream", "astream", "astream_events"])
def test_the_compiled_graph_invoked_directly_has_the_turn_cache(how):
    agent = build_turn_cache_agent(
        reader_batch_model(POSTGRES_FIELDS, 1), middleware=[ToolLatencyMiddleware(0.005, seed=1)]
    )
    state = run(agent, how)
    assert fields_seen_by_reader(state) == 5
    assert state["requirements"] == POSTGRES_FIELDS


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_nothing_is_left_in_memory_after_the_turn(how):
    from agentstate.core import TurnCacheMiddleware

    cache = TurnCacheMiddleware(
        writers=["store_requirement"], readers=["get_collected_requirements"], key="requirements"
    )
    batches = []
    original = cache._join

    def spy(request):
        joined = original(request)
        batches.append(weakref.ref(joined[1]))
        return joined

    cache._join = spy
    agent = build_reducer_agent(reader_batch_model(POSTGRES_FIELDS, 1), middleware=[cache])
    state = run(agent, how, {"configurable": {"thread_id": "t"}})
    assert fields_seen_by_reader(state) == 5
    assert len(batches) == 6 and cache.open_batches == 0
    gc.collect()
    assert all(ref() is None for ref in batches), "a Batch outlived its turn"


def test_batches_of_other_threads_and_invokes_do_not_leak_into_a_reader():
    """Two threads run at once on one agent; each reader sees its own batch only."""
    fields = {"a": {"labels.a": "1", "labels.b": "2"}, "b": {"labels.c": "3"}}

    def model(f):
        return reply(*store_calls(f), tool_call("get_collected_requirements"))

    script = {name: [model(f), reply(text="done")] for name, f in fields.items()}

    def step(messages):
        # the first user message names the thread's script
        name = next(m.content for m in messages if m.type == "human")
        played = sum(1 for m in messages if m.type == "ai")
        return script[name][played]

    agent = build_turn_cache_agent(
        ScriptedChatModel(script=[step] * 4), middleware=[ToolLatencyMiddleware(0.01, seed=2)]
    )
    results = {}

    def go(name):
        state = agent.invoke(
            {"messages": [{"role": "user", "content": name}]},
            {"configurable": {"thread_id": name}},
        )
        reader = [m for m in state["messages"] if m.name == "get_collected_requirements"][0]
        results[name] = json.loads(reader.content)

    threads = [threading.Thread(target=go, args=(n,)) for n in fields]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == fields


def test_a_second_turn_on_the_thread_reads_state_plus_its_own_batch_only():
    model = ScriptedChatModel(
        script=[
            reply(*store_calls({"engine": "postgres"}), tool_call("get_collected_requirements")),
            reply(text="a"),
            reply(*store_calls({"username": "x"}), tool_call("get_collected_requirements")),
            reply(text="b"),
        ]
    )
    agent = build_turn_cache_agent(model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke(user_turn(), config)
    state = agent.invoke(user_turn(), config)
    readers = [
        json.loads(m.content) for m in state["messages"] if m.name == "get_collected_requirements"
    ]
    assert readers == [{"engine": "postgres"}, {"engine": "postgres", "username": "x"}]


def test_without_the_turn_cache_the_same_graph_shape_reads_state_only():
    agent = build_reducer_agent(reader_batch_model(POSTGRES_FIELDS, 1))
    assert same_batch_reader_trials(agent, 1) == [0]


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
def test_serialised_batch_with_the_reader_first_gets_the_error_at_once_not_a_hang(how):
    # max_concurrency=1 runs the calls one by one in order, under ainvoke too: a reader
    # placed before its writers holds the only slot, so it gives up at once with the error
    # (it used to wait its whole timeout).
    calls = [tool_call("get_collected_requirements"), *store_calls(POSTGRES_FIELDS)]
    model = ScriptedChatModel(script=[reply(*calls), reply(text="done")])
    start = time.perf_counter()
    state = run(build_turn_cache_agent(model, timeout=5), how, {"max_concurrency": 1})
    assert time.perf_counter() - start < 2.5
    reader = [m for m in state["messages"] if m.name == "get_collected_requirements"][0]
    assert reader.status == "error" and "cannot wait for 5 writer call(s)" in reader.content
    assert "max_concurrency=1" in reader.content
    assert state["requirements"] == POSTGRES_FIELDS
