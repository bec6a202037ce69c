"""Stage 03: same-turn visibility, the broken caches, and the turn cache fix."""

import json
import threading
import time

import pytest
from langchain_core.messages import ToolMessage

from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import build_reducer_agent
from agentstate.rds.agents import build_naive_cache_agent, build_original_cache_agent
from agentstate.rds.scenarios import (
    POSTGRES_FIELDS,
    VALID_REQUIREMENTS,
    file_fields,
    reader_batch_model,
    same_batch_reader_trials,
    store_calls,
    user_turn,
)
from agentstate.rds.storage import MANIFEST_PATH
from agentstate.rds.turn_cache import (
    CACHE_KEY,
    TurnCache,
    build_turn_cache_agent,
)
from agentstate.simulation import SlowToolMiddleware, ToolLatencyMiddleware

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
    seen = same_batch_reader_trials(
        agent, trials, lambda: {"configurable": {"requirements_cache": {}}}
    )
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


def test_reader_times_out_with_a_clear_error_instead_of_hanging():
    cache = TurnCache()
    assert cache.wait_for(["never-finishes"], timeout=0.05) == {"never-finishes"}
    cache.finish("never-finishes")
    assert cache.wait_for(["never-finishes"], timeout=0.05) == set()


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
    assert "1 store_requirement call(s)" in verdict.content
    assert state["requirements"] == {"engine": "postgres"}  # the slow store still landed


def test_each_invoke_gets_a_fresh_cache_and_the_callers_config_is_untouched():
    seen = []

    class Spy(ToolLatencyMiddleware):
        def wrap_tool_call(self, request, handler):
            seen.append(request.runtime.config["configurable"][CACHE_KEY])
            return handler(request)

    model = ScriptedChatModel(
        script=[
            reply(*store_calls({"engine": "postgres"})),
            reply(text="a"),
            reply(*store_calls({"username": "x"})),
            reply(text="b"),
        ]
    )
    agent = build_turn_cache_agent(model, middleware=[Spy()])
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke(user_turn(), config)
    agent.invoke(user_turn(), config)
    assert seen[0] is not seen[1]
    assert len(seen[1]) == 1  # the second turn's cache does not hold the first turn's field
    assert config == {"configurable": {"thread_id": "t"}}


def test_turn_cache_is_thread_safe():
    cache = TurnCache()

    def writer(i):
        cache.put(f"labels.k{i}", str(i))
        cache.finish(f"call-{i}")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    assert cache.wait_for([f"call-{i}" for i in range(200)], timeout=5) == set()
    assert len(cache.snapshot()) == 200


def _cache_spy(found):
    from langchain.agents.middleware import AgentMiddleware

    from agentstate.rds.turn_cache import cache_for

    class Spy(AgentMiddleware):
        def wrap_tool_call(self, request, handler):
            found.append(cache_for(request.runtime))
            return handler(request)

        def after_agent(self, state, runtime):  # a hook's runtime has no config
            found.append(cache_for(runtime))

    return Spy()


def test_the_cache_is_discarded_when_the_turn_ends():
    import gc
    import weakref

    from langgraph.checkpoint.memory import InMemorySaver

    found = []
    agent = build_turn_cache_agent(
        reader_batch_model(POSTGRES_FIELDS, 1),
        middleware=[_cache_spy(found)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke(user_turn(), {"configurable": {"thread_id": "t"}})
    assert len(found) == 7 and len({id(c) for c in found}) == 1  # 6 tools + after_agent
    ref = weakref.ref(found[0])
    found.clear()
    gc.collect()
    assert ref() is None, "something (a checkpoint?) still holds the turn cache"


def test_stream_gets_a_turn_cache_too():
    found = []
    agent = build_turn_cache_agent(
        reader_batch_model(POSTGRES_FIELDS, 1), middleware=[_cache_spy(found)]
    )
    last = list(agent.stream(user_turn(), stream_mode="values"))[-1]
    assert found[0] is not None and len({id(c) for c in found}) == 1
    reader = [m for m in last["messages"] if m.name == "get_collected_requirements"][0]
    assert json.loads(reader.content) == POSTGRES_FIELDS


def test_without_the_wrapper_there_is_no_cache_and_readers_see_state_only():
    agent = build_turn_cache_agent(reader_batch_model(POSTGRES_FIELDS, 1))
    assert same_batch_reader_trials(agent.graph, 1) == [0]


def test_serialised_batch_with_the_reader_first_gets_the_timeout_error_not_a_hang():
    # max_concurrency=1 runs the calls one by one in order: a reader placed before
    # its writers cannot be satisfied, so it must give up with the error.
    calls = [tool_call("get_collected_requirements"), *store_calls(POSTGRES_FIELDS)]
    model = ScriptedChatModel(script=[reply(*calls), reply(text="done")])
    start = time.perf_counter()
    state = build_turn_cache_agent(model, timeout=0.3).invoke(user_turn(), {"max_concurrency": 1})
    assert time.perf_counter() - start < 3
    reader = [m for m in state["messages"] if m.name == "get_collected_requirements"][0]
    assert reader.status == "error" and "timed out after 0.3s waiting for 5" in reader.content
    assert state["requirements"] == POSTGRES_FIELDS
