"""Notebook 06's claims in pytest: the teaching guard and the package's capture graph.

The property the lesson teaches: whatever the model proposes (nothing,
chat text, garbage calls, duplicates, wrong roles, long random sequences),
the store holds exactly one entry per conversation message, with its role
and its text, also when the observer resends messages. Hypothesis draws the
conversations and the proposals; both the teaching guard (executed from the
notebook's own source, so the test follows the page) and
``build_capture_graph`` run against a real memory server process. A control
run with the guard removed shows that the property can fail.
"""

from __future__ import annotations

import itertools
import re
import sys
import types
from pathlib import Path

import jupytext
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.hazards import hazard
from agentstate.memory import build_capture_graph, without_guard
from agentstate.memory.capture.conversations import CONTROLS, load, parse
from agentstate.memory.capture.observer import CaptureRun
from agentstate.memory.capture.policy import AS_REPORTED, CapturePolicy, policy_model
from agentstate.memory.capture.prompt import ids_from, system_prompt
from agentstate.memory.client import MemoryClient
from agentstate.memory.lesson import PROPOSAL_KINDS, expected_entries, proposal, stored_entries
from agentstate.memory.service.process import ServerProcess
from agentstate.models import PolicyChatModel

pytestmark = pytest.mark.anyio
LESSON = Path(__file__).resolve().parents[1] / "notebooks/_src/06_tool_only_memory_capture.py"
VAULT = "agentstate"
_memories = itertools.count(1)


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("lesson06") / "memory.sqlite") as proc:
        yield proc
    assert proc.proc is None


def lesson_cells(*markers: str, **names) -> types.ModuleType:
    """The notebook's code cells that hold ``markers``, executed in a real module (LangGraph
    reads its type hints) whose globals start with ``names``."""
    cells = [c.source for c in jupytext.read(LESSON).cells if c.cell_type == "code"]
    wanted = [s for s in cells if any(marker in s for marker in markers)]
    assert len(wanted) == len(markers), "the lesson's cells moved: update this test"
    module = types.ModuleType(f"lesson06_{next(_memories)}")
    sys.modules[module.__name__] = module
    module.__dict__.update(names)
    for source in wanted:
        exec(compile(source, str(LESSON), "exec", dont_inherit=True), module.__dict__)
    return module


def teaching_guard():
    """``build_guarded_capture`` as the notebook defines it: its cells, executed (with the
    ``memory`` package an earlier cell imports)."""
    import agentstate.memory

    cells = lesson_cells("def build_guarded_capture", memory=agentstate.memory)
    return cells.build_guarded_capture


PAGE_LOOP = (
    'rules = memory.system_prompt("agentstate", "react.trip")',
    "create_agent(memory.replay_model(), tools, system_prompt=rules, checkpointer=InMemorySaver())",
)


def react_loop(model, tools, memory_id: str):
    """The ReAct loop as the page builds it (``PAGE_LOOP``, checked to be on the page): the
    prebuilt ``create_agent`` with the capture rules of ``memory_id`` as its system prompt."""
    from langchain.agents import create_agent

    source = LESSON.read_text()
    assert all(line in source for line in PAGE_LOOP), "the page's ReAct loop changed"
    rules = system_prompt(VAULT, memory_id)
    return create_agent(model, tools, system_prompt=rules, checkpointer=InMemorySaver())


BUILDERS = {
    "teaching": lambda model, tools: teaching_guard()(model, tools, InMemorySaver()),
    "package": lambda model, tools: build_capture_graph(model, tools, InMemorySaver()),
}


class Proposals:
    """A model's replies drawn by Hypothesis, played in order (then: nothing)."""

    def __init__(self, replies: list[tuple[list[str], str, list[dict]]]) -> None:
        self.replies = list(replies)

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        turn = next(m for m in reversed(messages) if isinstance(m, ChatMessage | SystemMessage))
        if not self.replies:
            return AIMessage(content="")
        kinds, text, arbitrary = self.replies.pop(0)
        ids = ids_from(messages)
        planned = [c for k in kinds for c in proposal(k, turn, ids, text)] + arbitrary
        calls = [{**c, "id": f"h{i}", "type": "tool_call"} for i, c in enumerate(planned)]
        return AIMessage(content=text if "chat text" in kinds else "", tool_calls=calls)


storable = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30
)
events = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["user", "assistant"]), storable),
        st.tuples(st.just("control"), st.sampled_from(CONTROLS)),
        st.tuples(st.just("system"), storable),  # a ChatMessage with role "system"
    ),
    max_size=14,
)
arbitrary_call = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["add_entry", "put_context", "list_entries", "drop_all", ""]),
        "args": st.dictionaries(
            st.sampled_from(["raw_entry", "tags", "memory_id", "summary", "msg_idx", "x"]),
            st.one_of(storable, st.integers(), st.dictionaries(storable, storable, max_size=2)),
            max_size=4,
        ),
    }
)
replies = st.lists(
    st.tuples(
        st.lists(st.sampled_from(PROPOSAL_KINDS), max_size=4),
        storable,
        st.lists(arbitrary_call, max_size=2),
    ),
    max_size=30,
)


def turns(drawn: list[tuple[str, str]], resends: list[int]):
    """The conversation and the messages the observer sends (resends included)."""
    raw = [{"thread": "t", "system": "SESSION_START"}]
    raw += [
        {"thread": "t", "system": c}
        if kind == "control"
        else {"thread": "t", "role": kind, "content": c}
        for kind, c in drawn
        if kind != "system"
    ]
    conversation = parse({"name": "drawn", "events": raw})
    sent = [e.to_message() for e in conversation.events]
    systems = [c for kind, c in drawn if kind == "system"]
    for n, content in enumerate(systems):  # never stored, whatever their position
        note = ChatMessage(role="system", content=content, additional_kwargs={"msg_idx": 900 + n})
        sent.insert(1 + (n * 3) % len(sent), note)
    for k in resends:
        sent.append(sent[k % len(sent)])
    return conversation, sent


async def capture(graph, sent, db, client) -> tuple[list, str]:
    memory_id = f"m{next(_memories)}"
    await client.call("create_memory", vault_id=VAULT, memory_id=memory_id)
    config = {"configurable": {"thread_id": memory_id, "vault_id": VAULT, "memory_id": memory_id}}
    for message in sent:
        await graph.ainvoke({"turn": message, "messages": [message]}, config)
    await client.call("await_consistency", memory_id=memory_id)
    return stored_entries(db, memory_id), memory_id


@pytest.mark.parametrize("builder", list(BUILDERS))
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(drawn=events, resends=st.lists(st.integers(0, 40), max_size=4), proposed=replies)
async def test_store_holds_each_message_once_whatever_the_model_proposes(
    server, builder, drawn, resends, proposed
):
    conversation, sent = turns(drawn, resends)
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        graph = BUILDERS[builder](PolicyChatModel(policy=Proposals(proposed)), tools)
        stored, _ = await capture(graph, sent, server.db, client)
    assert stored == expected_entries(conversation, "t")


async def test_without_the_guard_the_same_check_fails(server):
    """The property has teeth: the package's graph with its guard removed breaks it."""
    conversation, sent = turns([("user", "hi"), ("assistant", "hello")], [])
    duplicate = [([], "", [])] + [(["duplicate"], "", [])] * 2  # SESSION_START: nothing
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        with without_guard():
            graph = BUILDERS["package"](PolicyChatModel(policy=Proposals(duplicate)), tools)
            stored, _ = await capture(graph, sent, server.db, client)
    assert stored != expected_entries(conversation, "t")
    assert [idx for idx, _, _ in stored] == [1, 1, 2, 2]


async def test_teaching_guard_and_package_store_the_same_entries(server):
    """The lesson's comparison, on the replayed report (solo_travel)."""
    travel = load("solo_travel")
    replayed = CapturePolicy(AS_REPORTED, one_call_per_step=True)
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        teaching = BUILDERS["teaching"](policy_model(replayed, "replayed"), tools)
        sent = [e.to_message() for e in travel.events]
        taught, _ = await capture(teaching, sent, server.db, client)
        package = CaptureRun(client, policy_model(replayed, "replayed"), tools, run="pkg06")
        await package.replay(travel)
        await client.call("await_consistency", memory_id=package.memory_id("trip"))
    assert taught == stored_entries(server.db, package.memory_id("trip"))
    assert taught == expected_entries(travel, "trip")


async def test_teaching_guard_leaves_a_refused_message_unstored(server):
    """A write the server refuses fails the run and the message is not marked stored, so
    a resend is planned again (the adapter returns a refusal as an error ToolMessage)."""
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        graph = teaching_guard()(PolicyChatModel(policy=Proposals([])), tools, InMemorySaver())
        message = ChatMessage(role="user", content="hi", additional_kwargs={"msg_idx": 1})
        config = {"configurable": {"thread_id": "gone", "vault_id": VAULT, "memory_id": "gone"}}
        with pytest.raises(ValueError, match="unknown memory 'gone'"):  # the server refuses
            await graph.ainvoke({"turn": message}, config)
        state = await graph.aget_state(config)
    assert state.values.get("stored", []) == []


async def test_the_knob_shows_each_message_in_both_stores(server):
    """The knob's fixed settings: at every ``msg_idx`` the chat's message comes first, then the
    guard's store holds one ``ok`` entry of that text, and the ReAct loop's rows are wrong
    exactly where the replay's schedule puts a fault (message 8: the wrong role, then stored
    twice), with the verdicts of section 2's table. The knob cell runs as on the page;
    ``widgets.interact`` hands back the function it shows, which the page calls with its
    default (message 8) when the cell runs."""
    import inspect

    import agentstate.memory
    from agentstate.memory import observe, replay_model, store_rows

    travel = load("solo_travel")
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        loop = react_loop(replay_model(), tools, "react.trip")
        await observe(loop, client, server.db, travel.events, "react.trip")
        guard = teaching_guard()(replay_model(), tools, InMemorySaver())
        await observe(guard, client, server.db, travel.events, "teaching.trip")
    page = lesson_cells("import ipywidgets", server=server, travel=travel, memory=agentstate.memory)
    assert inspect.signature(page.knob_widget).parameters["msg_idx"].default == 8
    rows = {i: page.knob_widget(i).rows for i in range(1, 15)}
    said = {m.msg_idx: m for m in travel.messages("trip")}
    for i, shown in rows.items():
        chat, *stored = shown
        assert (chat["who"], chat["role"]) == ("the chat", said[i].role), i
        assert said[i].content.startswith(chat["text"].removesuffix("…")), i
        guard_rows = [(r["role"], r["text"], r["verdict"]) for r in stored if r["who"] == "guard"]
        assert guard_rows == [(said[i].role, chat["text"], "ok")], i
    wrong = {
        i
        for i, shown in rows.items()
        for r in shown
        if r["who"] == "ReAct loop" and r["verdict"] != "ok"
    }
    assert wrong == {1, 3, 4, 5, 8, 9, 12, 13}  # the schedule's positions
    section_2 = store_rows(server.db, "react.trip", travel, "trip")
    for i, shown in rows.items():
        loop_verdicts = [r["verdict"] for r in shown if r["who"] == "ReAct loop"]
        assert loop_verdicts == [r["verdict"] for r in section_2 if r["msg_idx"] == i], i
    loop8 = [r["verdict"] for r in rows[8] if r["who"] == "ReAct loop"]
    assert loop8 == ["wrong role (was assistant)", "stored twice"]
    assert max(len(line) for i in rows for line in repr(page.by_msg[i]).splitlines()) <= 100


async def test_the_doctor_tells_the_lessons_two_agents_apart(server):
    from agentstate.doctor import diagnose
    from agentstate.memory import replay_model

    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        loop = react_loop(replay_model(), tools, "doctor.trip")
        guard = teaching_guard()(replay_model(), tools, InMemorySaver())
    assert diagnose(loop).codes() == ["memory-in-react-loop"]
    assert diagnose(guard).codes() == []


def drawn_edges(title: str) -> set[tuple[str, str]]:
    """The edges of the lesson's Mermaid diagram under the bold ``title``."""
    block = LESSON.read_text().split(f"# **{title}**", 1)[1].split("# ```mermaid\n", 1)[1]
    block = block.split("# ```", 1)[0]
    return set(re.findall(r"^#\s+(\w+)\b\S*\s*-[-.]+>\s*(\w+)", block, re.M))


def graph_edges(graph) -> set[tuple[str, str]]:
    names = {"__start__": "start", "__end__": "done"}
    return {(names.get(e.source, e.source), names.get(e.target, e.target)) for e in graph.edges}


async def test_the_lessons_diagram_has_the_edges_of_both_graphs(server):
    """The picture of section 3 is the two graphs the page builds, edge for edge."""
    from langchain.agents import create_agent

    tools = await MemoryClient(server.url).tools()
    model = PolicyChatModel(policy=lambda messages: AIMessage(content=""))
    loop = create_agent(model, tools, system_prompt="rules").get_graph()
    guard = teaching_guard()(model, tools, InMemorySaver()).get_graph()
    assert drawn_edges("The ReAct loop (`create_agent`)") == graph_edges(loop)
    assert drawn_edges("The guard") == graph_edges(guard)
    assert drawn_edges("The guard") == {("start", "decide"), ("decide", "write"), ("write", "done")}


def test_replay_model_refuses_an_unknown_fault():
    from agentstate.memory import replay_model

    with pytest.raises(ValueError, match="unknown fault 'sulks'; choose one of: none"):
        replay_model("sulks")


async def test_the_replayed_store_table_says_stored_twice_where_the_schedule_says_so(server):
    """Section 2 of the lesson: the ReAct loop on the replayed report, read back as the page
    reads it. Every wrong entry sits where ``replay_schedule`` put its fault, and a message
    stored twice reads "stored twice" on its second row (message 8, also tagged with the wrong
    role, read "wrong role" on both rows before), beside what the chat said."""
    from agentstate.memory import observe, replay_model, replay_schedule, store_rows

    travel = load("solo_travel")
    memory_id = f"sched{next(_memories)}.trip"
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        agent = react_loop(replay_model(), tools, memory_id)
        await observe(agent, client, server.db, travel.events, memory_id)
    rows = store_rows(server.db, memory_id, travel, "trip")
    eight = [r["verdict"] for r in rows if r["msg_idx"] == 8]
    assert eight == ["wrong role (was assistant)", "stored twice"]
    said = {m.msg_idx: f"{m.role}: {m.content}" for m in travel.messages("trip")}
    assert all(r["chat said"] == said[r["msg_idx"]] for r in rows)
    schedule = {r["fault"]: r["at"] for r in replay_schedule(travel, "trip")}
    fault_of = {
        "not this message's text": "answers the user",
        "stored twice": "writes twice",
        "wrong role (was assistant)": "swaps roles",
    }
    wrong = {(r["msg_idx"], fault_of[r["verdict"]]) for r in rows if r["verdict"] != "ok"}
    scheduled = {(int(i), f) for f in fault_of.values() for i in schedule[f].split(", ")}
    assert wrong == scheduled


async def test_replay_vs_store_sets_each_wrong_entry_beside_the_fault_scheduled_there(server):
    """Section 2's table: per scheduled fault, the store's wrong entries sit exactly where it
    was scheduled (read from the store, not copied from the schedule), with one example whose
    stored side says "the same text" only where the texts are equal; an entry no fault
    explains gets its own row; the guard's store shows no wrong entry."""
    from agentstate.memory import observe, replay_model, replay_vs_store, store_rows

    travel, n = load("solo_travel"), next(_memories)
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        loop = react_loop(replay_model(), tools, f"vs{n}.loop")
        await observe(loop, client, server.db, travel.events, f"vs{n}.loop")
        guard = teaching_guard()(replay_model(), tools, InMemorySaver())
        await observe(guard, client, server.db, travel.events, f"vs{n}.guard")
        await client.call("create_memory", vault_id=VAULT, memory_id=f"vs{n}.odd")
        await client.call(
            "add_entry",
            vault_id=VAULT,
            memory_id=f"vs{n}.odd",
            raw_entry="nobody said this",
            summary="s",
            tags={"role": "user", "msg_idx": 2},
        )
        await client.call("await_consistency", memory_id=f"vs{n}.odd")
    rows = {r["fault"]: r for r in replay_vs_store(server.db, f"vs{n}.loop", travel, "trip")}
    assert list(rows) == [
        "answers the user",
        "writes twice",
        "swaps roles",
        "bootstraps twice",
        "skips the periodic flush",
    ]
    for fault in ("answers the user", "writes twice", "swaps roles"):
        assert rows[fault]["in the store at"] == rows[fault]["scheduled at"], fault
    wrong = [
        r for r in store_rows(server.db, f"vs{n}.loop", travel, "trip") if r["verdict"] != "ok"
    ]
    listed = sum(len(rows[f]["in the store at"].split(", ")) for f in list(rows)[:3])
    assert listed == len(wrong) == 10  # every wrong entry of section 2's old table, once
    answers = rows["answers the user"]
    assert answers["e.g. chat said"].startswith("user: I'm planning my first solo trip")
    assert answers["stored"].startswith("assistant: Happy to help!")
    assert rows["swaps roles"]["stored"] == "user: the same text"
    assert rows["swaps roles"]["e.g. chat said"].startswith("assistant: A week is plenty")
    assert rows["bootstraps twice"]["in the store at"] == "(calls, not entries)"
    guarded = replay_vs_store(server.db, f"vs{n}.guard", travel, "trip")
    assert [r["in the store at"] for r in guarded][:3] == ["(none)"] * 3
    (odd,) = [r for r in replay_vs_store(server.db, f"vs{n}.odd", travel, "trip", "none")]
    assert odd["fault"] == "(none scheduled)" and odd["in the store at"] == "2"
    assert odd["verdict"] == "not this message's text" and odd["stored"] == "user: nobody said this"
    worded = parse(
        {"name": "w", "events": [{"thread": "t", "role": "user", "content": "FLUSH_CONTEXT"}]}
    )
    words = replay_vs_store(server.db, f"vs{n}.none", worded, "t", "reads control words in text")
    assert words == [
        {
            "fault": "reads control words in text",
            "scheduled at": "1",
            "in the store at": "(an entry left out, not a wrong one)",
        }
    ]


async def test_awrite_entries_stores_each_planned_entry_and_a_refusal_marks_nothing(server):
    """The teaching guard's ``write``: one add_entry tool call per planned entry, the msg_idx
    values back; a refusal raises naming it (nothing returned, so nothing marked stored); bad
    input is refused before any call."""
    from agentstate.memory import add_entry_args, awrite_entries

    memory_id = f"write{next(_memories)}.chat"
    ids = {"vault_id": VAULT, "memory_id": memory_id}

    def turn(idx):
        return ChatMessage(role="user", content=f"m{idx}", additional_kwargs={"msg_idx": idx})

    async with MemoryClient(server.url) as client:
        (add_entry,) = [t for t in await client.tools() if t.name == "add_entry"]
        await client.call("create_memory", vault_id=VAULT, memory_id=memory_id)
        plan = [add_entry_args(turn(1), None, ids), add_entry_args(turn(2), "s", ids)]
        assert await awrite_entries(add_entry, plan) == [1, 2]
        assert await awrite_entries(add_entry, []) == []
        gone = add_entry_args(turn(3), None, {**ids, "memory_id": "gone.chat"})
        with pytest.raises(ValueError, match="add_entry refused msg_idx 3, not marked stored: .*"):
            await awrite_entries(add_entry, [gone])
        after = add_entry_args(turn(5), None, ids)  # stored, then the refusal names it
        refused = r"refused msg_idx 3, not marked stored \(stored before it: msg_idx 5\): "
        with pytest.raises(ValueError, match=refused):
            await awrite_entries(add_entry, [after, gone])
        with pytest.raises(ValueError, match="entry 0 has no tags.msg_idx"):
            await awrite_entries(add_entry, [{**plan[0], "tags": {"role": "user"}}])
        with pytest.raises(ValueError, match="pass the add_entry tool"):
            await awrite_entries(
                next(t for t in await client.tools() if t.name != "add_entry"), plan
            )
        await client.call("await_consistency", memory_id=memory_id)
    stored = [(1, "user", "m1"), (2, "user", "m2"), (5, "user", "m5")]
    assert stored_entries(server.db, memory_id) == stored


def test_write_entries_is_the_same_for_sync_tools(server):
    from agentstate.memory import SyncMemoryClient, add_entry_args, write_entries

    memory_id = f"swrite{next(_memories)}.chat"
    ids = {"vault_id": VAULT, "memory_id": memory_id}
    turn = ChatMessage(role="assistant", content="hello", additional_kwargs={"msg_idx": 4})
    with SyncMemoryClient(server.url) as client:
        (add_entry,) = [t for t in client.tools() if t.name == "add_entry"]
        client.call("create_memory", vault_id=VAULT, memory_id=memory_id)
        assert write_entries(add_entry, [add_entry_args(turn, None, ids)]) == [4]
        gone = add_entry_args(turn, None, {**ids, "memory_id": "gone.chat"})
        with pytest.raises(ValueError, match="add_entry refused msg_idx 4, not marked stored"):
            write_entries(add_entry, [gone])
        client.call("await_consistency", memory_id=memory_id)
    assert stored_entries(server.db, memory_id) == [(4, "assistant", "hello")]


async def test_the_hazard_row_the_lesson_links_shows_what_the_lesson_shows(server):
    """agentstate.hazards' memory-in-react-loop (the row the lesson's opening links to) and the
    page's ReAct loop on its replay agree: the prebuilt loop stores text nobody said in that
    message and stores a message twice; the page's guard, on the same replay, does neither."""
    import re as regex

    from agentstate.memory import observe, replay_model, store_rows

    result = hazard("memory-in-react-loop").run()
    assert result.outcome == "reproduced", result.evidence
    found = regex.search(r"\((\d+) the agent's text, (\d+) stored twice\)", result.evidence)
    assert found and int(found[1]) > 0 and int(found[2]) > 0, result.evidence
    travel = load("solo_travel")
    verdicts, n = {}, next(_memories)
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        agents = {
            f"hz{n}.loop": react_loop(replay_model(), tools, f"hz{n}.loop"),
            f"hz{n}.guard": teaching_guard()(replay_model(), tools, InMemorySaver()),
        }
        for memory_id, agent in agents.items():
            await observe(agent, client, server.db, travel.events, memory_id)
            rows = store_rows(server.db, memory_id, travel, "trip")
            verdicts[memory_id.split(".")[1]] = {r["verdict"] for r in rows}
    assert {"not this message's text", "stored twice"} <= verdicts["loop"]
    assert verdicts["guard"] == {"ok"}


def test_the_replay_schedule_lists_only_the_chosen_faults():
    from agentstate.memory import replay_schedule

    travel = load("solo_travel")
    assert [r["fault"] for r in replay_schedule(travel, "trip", "none")] == []
    (twice,) = replay_schedule(travel, "trip", "writes twice")
    assert twice["at"] == "3, 8, 13"
    assert replay_schedule(travel, "trip", "reads control words in text") == []  # not in it
    worded = parse(
        {"name": "w", "events": [{"thread": "t", "role": "user", "content": "FLUSH_CONTEXT"}]}
    )
    (words,) = replay_schedule(worded, "t", "reads control words in text")
    assert words["at"] == "1"
    faults = [r["fault"] for r in replay_schedule(travel, "trip")]
    assert "reads control words in text" not in faults and len(faults) == 5
    with pytest.raises(ValueError, match="unknown fault 'sulks'"):
        replay_schedule(travel, "trip", "sulks")


def test_the_random_proposers_kinds_are_every_proposal_kind():
    """The lesson prints "N of len(proposer.KINDS)" kinds of proposal: all of them."""
    from agentstate.memory import RandomProposals

    assert RandomProposals(seed=0).KINDS == PROPOSAL_KINDS and len(PROPOSAL_KINDS) == 11


# --- the pieces the lesson imports instead of defining them (issue 42, item 7's trim) ---


async def test_observe_feeds_a_chat_and_returns_the_store_async(server):
    """``observe`` (moved from the page into the package): one invoke per event, the memory
    created first, the store read back once the server has written its queue. On the replayed
    report the ReAct loop's store is what ``store_rows`` reads (the page's section 2) and not
    the chat; the package's capture graph stores exactly the chat."""
    from agentstate.memory import observe, replay_model, store_rows

    travel, n = load("solo_travel"), next(_memories)
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        loop = react_loop(replay_model(), tools, f"obs{n}.loop")
        looped = await observe(loop, client, server.db, travel.events, f"obs{n}.loop")
        graph = build_capture_graph(replay_model(), tools, InMemorySaver())
        captured = await observe(graph, client, server.db, travel.events, f"obs{n}.graph")
    rows = store_rows(server.db, f"obs{n}.loop", travel, "trip")
    assert [(r["msg_idx"], r["stored"]) for r in rows] == [
        (idx, f"{role}: {text}") for idx, role, text in looped
    ]
    assert looped != expected_entries(travel, "trip")
    assert captured == expected_entries(travel, "trip")


def test_observe_sync_stores_what_observe_stores(server):
    """The sync observer, on a sync client's tools (``invoke`` all the way down), leaves the
    same store as the async one for the same ReAct loop and replay."""
    import anyio

    from agentstate.memory import SyncMemoryClient, observe, observe_sync, replay_model

    travel, n = load("solo_travel"), next(_memories)
    with SyncMemoryClient(server.url) as client:
        loop = react_loop(replay_model(), client.tools(), f"sync{n}.trip")
        synced = observe_sync(loop, client, server.db, travel.events, f"sync{n}.trip")

    async def run_async():
        async with MemoryClient(server.url) as client:
            loop = react_loop(replay_model(), await client.tools(), f"async{n}.trip")
            return await observe(loop, client, server.db, travel.events, f"async{n}.trip")

    assert synced == anyio.run(run_async)
    assert len(synced) > len(expected_entries(travel, "trip"))  # the replay's duplicates


async def test_an_observer_refuses_the_other_kind_of_client_before_creating_anything(server):
    from agentstate.memory import SyncMemoryClient, observe, observe_sync, replay_model

    travel, memory_id = load("solo_travel"), f"wrong{next(_memories)}.trip"
    async with MemoryClient(server.url) as client:
        loop = react_loop(replay_model(), await client.tools(), memory_id)
        with pytest.raises(TypeError, match="needs a SyncMemoryClient, not MemoryClient: use"):
            observe_sync(loop, client, server.db, travel.events, memory_id)
        with SyncMemoryClient(server.url) as sync_client:
            with pytest.raises(TypeError, match="needs a MemoryClient, not SyncMemoryClient"):
                await observe(loop, sync_client, server.db, travel.events, memory_id)
        assert await client.call("create_memory", vault_id=VAULT, memory_id=memory_id) == "created"


async def test_random_model_replays_its_seed_sync_and_async():
    """``random_model`` (the page's proof model): the same seed proposes the same calls
    through ``invoke`` and ``ainvoke``, and its policy counts the replies and the kinds."""
    from agentstate.memory import random_model

    prompt = SystemMessage(system_prompt(VAULT, "r.chat"))
    turns = [
        ChatMessage(role="user", content=f"m{i}", additional_kwargs={"msg_idx": i})
        for i in range(1, 9)
    ]

    def calls(reply: AIMessage) -> list[tuple[str, dict]]:
        return [(c["name"], c["args"]) for c in reply.tool_calls]

    sync, async_ = random_model(seed=6), random_model(seed=6)
    by_invoke = [calls(sync.invoke([prompt, t])) for t in turns]
    by_ainvoke = [calls(await async_.ainvoke([prompt, t])) for t in turns]
    assert by_invoke == by_ainvoke and any(by_invoke)
    assert sync.policy.tried == async_.policy.tried == 8
    assert sync.policy.kinds == async_.policy.kinds and sync.policy.kinds <= set(PROPOSAL_KINDS)
    other = random_model(seed=7)
    assert [calls(other.invoke([prompt, t])) for t in turns] != by_invoke
    with pytest.raises(TypeError, match="seed must be an int, got str"):
        random_model(seed="6")


# --- the teaching guard's bookkeeping, moved from the page (issue 42, the 25-minute cut) ---


def test_chat_msg_idx_names_only_the_messages_the_guard_stores():
    from agentstate.memory import chat_msg_idx

    def chat(role, idx):
        return ChatMessage(role=role, content="x", additional_kwargs={"msg_idx": idx})

    assert chat_msg_idx(chat("user", 3)) == 3 and chat_msg_idx(chat("assistant", 0)) == 0
    assert chat_msg_idx(chat("system", 4)) is None  # a system note: never stored
    assert chat_msg_idx(SystemMessage("SESSION_START")) is None  # a control message
    for bad in ("3", True, -1, None):
        with pytest.raises(ValueError, match="needs msg_idx, a non-negative int, got"):
            chat_msg_idx(chat("user", bad))


def test_offered_summary_takes_the_first_offered_summary_the_server_would_take():
    from agentstate.memory import offered_summary

    def reply(*calls):
        return AIMessage(
            content="",
            tool_calls=[
                {"name": n, "args": a, "id": f"c{i}", "type": "tool_call"}
                for i, (n, a) in enumerate(calls)
            ],
        )

    assert offered_summary(reply(("add_entry", {"summary": "asks about Lisbon"}))) == (
        "asks about Lisbon"
    )
    assert offered_summary(reply(("put_context", {"summary": "no"}))) is None  # another tool
    assert offered_summary(reply(("add_entry", {"raw_entry": "x"}))) is None  # none offered
    first_unusable = reply(("add_entry", {"summary": "  "}), ("add_entry", {"summary": "ok"}))
    assert offered_summary(first_unusable) is None  # as in the package's guard: ours instead
    assert offered_summary(reply(("add_entry", {"summary": "a\x00b"}))) is None
    assert offered_summary(reply(("add_entry", {"summary": "x" * 5000}))) is None
    assert offered_summary(AIMessage(content="I will remember that.")) is None


def test_add_entry_args_take_text_role_and_msg_idx_from_the_message_only():
    from agentstate.memory import add_entry_args

    turn = ChatMessage(role="assistant", content=" Lisbon \n", additional_kwargs={"msg_idx": 4})
    ids = {"thread_id": "t", "vault_id": VAULT, "memory_id": "m.trip"}
    args = add_entry_args(turn, "a summary", ids)
    assert args == {
        "vault_id": VAULT,
        "memory_id": "m.trip",
        "raw_entry": " Lisbon \n",
        "summary": "a summary",
        "tags": {"role": "assistant", "msg_idx": 4},
    }
    assert add_entry_args(turn, None, ids)["summary"] == "assistant #4: Lisbon"  # the default
    with pytest.raises(ValueError, match="only user and assistant messages are stored, got"):
        add_entry_args(SystemMessage("FLUSH_CONTEXT"), None, ids)
    with pytest.raises(ValueError, match="ids must name memory_id"):
        add_entry_args(turn, None, {"vault_id": VAULT})


def test_proof_summary_counts_the_resends_and_lists_the_kinds():
    from agentstate.memory import RandomProposals, proof_summary, random_events

    runs = [(*random_events(seed, n_messages=8), True) for seed in range(3)]
    resends = sum(len(sent) - len(chat.events) for chat, sent, _ in runs)
    assert resends > 0  # the seeds this test uses do resend messages
    policy = RandomProposals(seed=0)
    policy.tried, policy.kinds = 30, {"flush", "duplicate"}
    lines = proof_summary([*runs[:2], (*runs[2][:2], False)], policy).splitlines()
    sent = sum(len(s) for _, s, _ in runs)
    assert lines[0] == (
        f"3 random chats, {sent} events sent: messages, control events and {resends} resends; "
        "30 model replies"
    )
    kinds = " ".join(line.strip() for line in lines[1:-1])
    assert kinds.startswith("kinds proposed, 2 of 11: duplicate, flush (never: nothing,")
    assert all(len(line) <= 90 for line in lines)
    assert lines[-1] == "stores that hold their chat once, in order: 2 of 3"
    with pytest.raises(ValueError, match="no runs to tally"):
        proof_summary([], policy)
    with pytest.raises(TypeError, match="policy is a RandomProposals, got PolicyChatModel"):
        proof_summary(runs, PolicyChatModel(policy=policy))


def test_start_server_serves_a_new_sqlite_file_each_time():
    from agentstate.memory import SyncMemoryClient, start_server

    first, second = start_server(), start_server()
    try:
        assert first.db != second.db and first.db.parent != second.db.parent
        with SyncMemoryClient(first.url) as client:
            assert client.call("create_memory", vault_id=VAULT, memory_id="s.one") == "created"
        assert first.db.exists()
    finally:
        first.stop()
        second.stop()
    assert first.proc is None and second.proc is None


def test_stores_by_message_needs_an_agent(server):
    from agentstate.memory import stores_by_message

    with pytest.raises(ValueError, match="name at least one agent and its memory"):
        stores_by_message(server.db, load("solo_travel"), "trip", {})


def test_rules_for_is_the_capture_prompt_of_the_memory_the_invoke_names():
    from agentstate.memory import rules_for

    ids = {"thread_id": "t", "vault_id": VAULT, "memory_id": "m.trip"}
    shown = rules_for(ids)
    assert isinstance(shown, SystemMessage)
    assert shown.content == system_prompt(VAULT, "m.trip")
    assert ids_from([shown]) == (VAULT, "m.trip")
    with pytest.raises(ValueError, match="rules_for: ids must name vault_id and memory_id"):
        rules_for({"thread_id": "t"})


async def test_rules_kept_sets_each_agents_entries_and_calls_beside_the_rules(server):
    """Section 3's table, as the page builds it: the replayed loop bootstraps twice and skips
    the periodic flushes (after 6 and 12), the teaching guard makes no call but add_entry,
    and the package's graph keeps every rule; each column read from the server's file."""
    from agentstate.memory import observe, replay_model, rules_kept

    travel, n = load("solo_travel"), next(_memories)
    stores = {"loop": f"kept{n}.loop", "teaching": f"kept{n}.teach", "package": f"kept{n}.pkg"}
    async with MemoryClient(server.url) as client:
        tools = await client.tools()
        agents = {
            "loop": react_loop(replay_model(), tools, stores["loop"]),
            "teaching": teaching_guard()(replay_model(), tools, InMemorySaver()),
            "package": build_capture_graph(replay_model(), tools, InMemorySaver()),
        }
        for name, agent in agents.items():
            await observe(agent, client, server.db, travel.events, stores[name])
    rows = {r["rule"]: r for r in rules_kept(server.db, travel, "trip", stores)}
    periodic = "flush after msg_idx: every 6th"
    on_control = "flush after msg_idx: on FLUSH_CONTEXT, SESSION_END"
    assert list(rows) == [
        "entries stored",
        "the chat, once, in order",
        "bootstrap: get_context, list_entries",
        periodic,
        on_control,
    ]  # no row of flushes nobody asked for: none of the three made one
    columns = ["the rules ask", "loop", "teaching", "package"]
    assert [rows["entries stored"][c] for c in columns] == [14, 21, 14, 14]
    assert [rows["the chat, once, in order"][c] for c in columns] == ["yes", "no", "yes", "yes"]
    bootstrap = [rows["bootstrap: get_context, list_entries"][c] for c in columns]
    assert bootstrap == ["1, 1", "2, 2", "0, 0", "1, 1"]
    # what asks each flush: the loop's missing ones are the periodic ones (after 6 and 12)
    assert [rows[periodic][c] for c in columns] == ["6, 12", "(none)", "(none)", "6, 12"]
    assert [rows[on_control][c] for c in columns] == ["8, 14", "8, 14", "(none)", "8, 14"]
    with pytest.raises(ValueError, match="rules_kept: name at least one agent and its memory"):
        rules_kept(server.db, travel, "trip", {})


async def test_rules_kept_shows_a_flush_nobody_asked_for_in_a_row_of_its_own(server):
    """A put_context before any message (after msg_idx 0) answers no rule: it gets the row
    "not asked for", and the rows of the flushes the rules ask stay "(none)"."""
    from agentstate.memory import rules_kept

    travel, memory_id = load("solo_travel"), f"unasked{next(_memories)}.trip"
    async with MemoryClient(server.url) as client:
        await client.call("create_memory", vault_id=VAULT, memory_id=memory_id)
        await client.call("put_context", vault_id=VAULT, memory_id=memory_id, content="early")
    rows = {r["rule"]: r for r in rules_kept(server.db, travel, "trip", {"odd": memory_id})}
    assert rows["flush after msg_idx: not asked for"] == {
        "rule": "flush after msg_idx: not asked for",
        "the rules ask": "(none)",
        "odd": "0",
    }
    assert rows["flush after msg_idx: every 6th"]["odd"] == "(none)"
