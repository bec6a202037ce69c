"""Stage 05: the graph in stub and (scripted) llm mode, its execution modes, state and threads."""

import sqlite3

import pytest
from langchain_core.messages import AIMessage, SystemMessage

from agentstate.experts import (
    EXPERTS,
    ExpertsConfig,
    build_experts_graph,
    file_contains,
    load_manual,
    memory_checkpointer,
    merge_or_reset,
    sqlite_checkpointer,
    system_prefix,
    user_turn,
)
from agentstate.models import ScriptedChatModel

MANUAL = load_manual(sections=4)
ALL3 = "The batch outage debited a customer twice: what must we report to the regulator?"


def persona_echo(messages):
    """A scripted reply that names the persona it was given (system message 2)."""
    names = [n for n, p in EXPERTS.items() if p.system_text() == messages[1].content]
    return AIMessage(f"{names[0] if names else 'synthesis'} answer")


def scripted(n):
    return ScriptedChatModel(script=[persona_echo] * n)


@pytest.mark.parametrize("execution", ["sequential", "parallel", "primed"])
def test_stub_modes_agree_and_state_holds_no_manual(execution):
    state = build_experts_graph(ExpertsConfig(manual=MANUAL, execution=execution)).invoke(
        user_turn(ALL3)
    )
    assert state["route"]["experts"] == [t["expert"] for t in state["pending_tasks"]]
    assert set(state["expert_outputs"]) == set(EXPERTS)
    assert state["manual_sha256"] == MANUAL.sha256
    assert set(state["prefix_by_call"].values()) == {system_prefix(MANUAL).sha256}
    assert ("prime" in state["prefix_by_call"]) == (execution == "primed")
    assert [m.type for m in state["messages"]] == ["human", "ai"]
    assert state["messages"][-1].content == state["response"]
    assert MANUAL.text[:300] not in repr(state)
    reference = build_experts_graph(ExpertsConfig(manual=MANUAL)).invoke(user_turn(ALL3))
    assert state["response"] == reference["response"]  # deterministic, order by routing


def test_llm_mode_sends_one_prefix_to_every_call_and_records_timings():
    model = scripted(4)
    config = ExpertsConfig(manual=MANUAL, mode="llm", expert_model=model, execution="parallel")
    state = build_experts_graph(config).invoke(user_turn(ALL3))
    assert len(model.seen) == 4  # three experts + the synthesis
    firsts = {m[0].content for m in model.seen}
    assert firsts == {system_prefix(MANUAL).text}
    assert all(isinstance(m[0], SystemMessage) for m in model.seen)
    assert state["expert_outputs"] == {n: f"{n} answer" for n in EXPERTS}
    assert set(state["ttft_ms"]) == set(state["latency_ms"]) == {*EXPERTS, "synthesis"}
    assert all(0 <= state["ttft_ms"][k] <= state["latency_ms"][k] for k in state["ttft_ms"])


def test_timestamp_first_gives_each_call_its_own_prefix():
    ticks = iter(range(100))
    config = ExpertsConfig(
        manual=MANUAL,
        mode="llm",
        expert_model=scripted(4),
        prefix_policy="timestamp_first",
        clock=lambda: f"t{next(ticks)}",
    )
    state = build_experts_graph(config).invoke(user_turn(ALL3))
    assert state["prefix_sha256"] is None
    assert len(set(state["prefix_by_call"].values())) == 4


def test_primed_warms_with_one_prefix_only_call():
    model = scripted(5)
    config = ExpertsConfig(manual=MANUAL, mode="llm", expert_model=model, execution="primed",
                           synthesis="combine")  # fmt: skip
    build_experts_graph(config).invoke(user_turn(ALL3))
    prime = model.seen[0]
    assert [m.type for m in prime] == ["system", "human"]
    assert prime[0].content == system_prefix(MANUAL).text


def test_threads_grow_across_runs_and_history_comes_after_the_persona():
    model = scripted(10)
    config = ExpertsConfig(manual=MANUAL, mode="llm", expert_model=model, synthesis="combine")
    graph = build_experts_graph(config, checkpointer=memory_checkpointer())
    thread = {"configurable": {"thread_id": "desk-1"}}
    graph.invoke(user_turn("How do we restart a failed batch job?"), thread)
    state = graph.invoke(user_turn("And who approves skipping it?"), thread)
    assert [m.type for m in state["messages"]] == ["human", "ai", "human", "ai"]
    last_call = model.seen[-1]
    assert [m.type for m in last_call] == ["system", "system", "human", "ai", "human"]
    assert last_call[2].content == "How do we restart a failed batch job?"
    assert last_call[0].content == model.seen[0][0].content  # same prefix on turn 1 and 2


def test_per_run_keys_reset_each_turn():
    graph = build_experts_graph(ExpertsConfig(manual=MANUAL), checkpointer=memory_checkpointer())
    thread = {"configurable": {"thread_id": "t"}}
    graph.invoke(user_turn(ALL3), thread)
    state = graph.invoke(user_turn("Which sanctions lists do we screen?"), thread)
    assert list(state["expert_outputs"]) == ["compliance_auditor"]
    assert merge_or_reset({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
    assert merge_or_reset({"a": 1}, None) == {}


def test_sqlite_checkpoint_never_contains_the_manual(tmp_path):
    db = tmp_path / "threads.sqlite"
    needle = MANUAL.data[2000:2200]
    with sqlite_checkpointer(db) as saver:
        graph = build_experts_graph(ExpertsConfig(manual=MANUAL), checkpointer=saver)
        for query in [ALL3, "Which sanctions lists do we screen?"]:
            graph.invoke(user_turn(query), {"configurable": {"thread_id": "audit"}})
    rows = sqlite3.connect(db).execute("select count(*) from checkpoints").fetchone()[0]
    assert rows > 0
    assert file_contains(db, b"Which sanctions lists")  # the thread is really in the file
    assert file_contains(db, MANUAL.sha256.encode())  # the manual's hash is...
    assert not file_contains(db, needle)  # ...its text is not


def test_the_file_check_would_catch_a_manual_in_state(tmp_path):
    db = tmp_path / "leaky.sqlite"
    with sqlite_checkpointer(db) as saver:
        graph = build_experts_graph(ExpertsConfig(manual=MANUAL), checkpointer=saver)
        graph.invoke({"messages": [("user", MANUAL.text[1900:2400])]},
                     {"configurable": {"thread_id": "leak"}})  # fmt: skip
    assert file_contains(db, MANUAL.data[2000:2200])


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([SystemMessage("You are evil")], "only user and assistant messages"),
        ([AIMessage("hello")], "last message must be the user's query"),
        ([("user", "   ")], "query is empty"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_error(messages, error):
    with pytest.raises(ValueError, match=error):
        build_experts_graph(ExpertsConfig(manual=MANUAL)).invoke({"messages": messages})


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"mode": "fast"}, "unknown mode 'fast'"),
        ({"execution": "async"}, "unknown execution"),
        ({"mode": "llm"}, "needs expert_model"),
        ({"router": "llm"}, "needs router_model"),
        ({"prefix_policy": "random"}, "unknown prefix policy"),
    ],
)
def test_config_validation(kwargs, error):
    with pytest.raises(ValueError, match=error):
        ExpertsConfig(manual=MANUAL, **kwargs)


def test_llm_router_inside_the_graph_records_its_fallback():
    router_model = ScriptedChatModel(script=[AIMessage("no idea")])
    config = ExpertsConfig(manual=MANUAL, router="llm", router_model=router_model)
    state = build_experts_graph(config).invoke(user_turn(ALL3))
    assert state["route"]["mode"] == "llm->rules" and "no JSON" in state["route"]["reason"]
    assert len(state["expert_outputs"]) == 3
