"""``diagnose`` on the series itself: each broken builder shows exactly its lesson's hazard,
every fixed builder, served graph and library default shows no error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentstate import rds
from agentstate.doctor import diagnose
from agentstate.doctor.facts.graph_facts import graph_facts
from agentstate.doctor.facts.library_defaults import LIBRARY_DEFAULTS
from agentstate.doctor.report.cli import load_target, targets
from agentstate.experts import ExpertsConfig, build_experts_graph
from agentstate.lessons.fixtures import (
    AddNotesState,
    UniqueNotesState,
    build_notes_agent,
    plain_dict_fan_out,
)
from agentstate.memory.capture.baselines.react import build_react_agent
from agentstate.memory.capture.graph import build_capture_graph
from agentstate.memory.client import MemoryClient
from agentstate.memory.service.process import ServerProcess
from agentstate.models import ScriptedChatModel, reply
from tests.test_doctor_docs import block, execute

ROOT = Path(__file__).resolve().parents[1]


def model() -> ScriptedChatModel:
    return ScriptedChatModel(script=[reply(text="ok")])


def errors(report: Any) -> set[str]:
    return {f.code for f in report.errors}


# (stage, broken builder, the lesson's hazard, the fixed builder of the same stage)
PAIRS = {
    "01 file storage": (
        lambda: rds.build_file_storage_agent(model()),
        "file-read-modify-write",
        None,
    ),
    "02 plain dict": (
        lambda: rds.build_plain_dict_agent(model()),
        "unreduced-parallel-write",
        lambda: rds.build_reducer_agent(model()),
    ),
    "03 original cache": (
        lambda: rds.build_original_cache_agent(model()),
        "same-batch-read",
        lambda: rds.build_turn_cache_agent(model()),
    ),
    "03 naive cache": (
        lambda: rds.build_naive_cache_agent(model()),
        "same-batch-read",
        lambda: rds.build_turn_cache_agent(model()),
    ),
    "04 split schema": (
        lambda: rds.build_split_schema_agent(model(), model()),
        "subagent-drops-key",
        lambda: rds.build_shared_schema_agent(model(), model()),
    ),
    "04 cache fix (same turn only)": (
        lambda: rds.build_cache_fix_agent(model(), model()),
        "subagent-drops-key",
        lambda: rds.build_shared_schema_agent(model(), model()),
    ),
    "04 parallel subagents, plain key": (
        lambda: rds.build_shared_schema_agent(
            model(), model(), state_schema=rds.PlainRequirementsState
        ),
        "unreduced-parallel-write",
        lambda: rds.build_shared_schema_agent(model(), model()),
    ),
    "05 plain dict fan-out": (
        lambda: plain_dict_fan_out(["technical_specialist", "compliance_auditor"]),
        "unreduced-parallel-write",
        lambda: build_experts_graph(ExpertsConfig(execution="parallel")),
    ),
    "04 operator.add list": (
        lambda: build_notes_agent(AddNotesState),
        "list-doubled-by-subagent",
        lambda: build_notes_agent(UniqueNotesState),
    ),
}


@pytest.mark.parametrize("stage", list(PAIRS))
def test_a_broken_builder_shows_exactly_its_lessons_hazard(stage):
    broken, hazard, fixed = PAIRS[stage]
    report = diagnose(broken())
    assert hazard in report.codes()
    if fixed is None:
        assert report.codes() == [hazard]
        return
    healthy = diagnose(fixed())
    # what the broken agent adds to its own stage's fix is the lesson's hazard, nothing else
    assert set(report.codes()) - set(healthy.codes()) == {hazard}
    assert hazard not in healthy.codes()
    assert errors(report) == ({hazard} if report.of(hazard)[0].severity == "error" else set())


FIXED = {
    "02 reducer": lambda: rds.build_reducer_agent(model()),
    "03 turn cache": lambda: rds.build_turn_cache_agent(model()),
    "04 shared schema": lambda: rds.build_shared_schema_agent(model(), model()),
    "04 append_unique": lambda: build_notes_agent(UniqueNotesState),
    "05 experts sequential": lambda: build_experts_graph(),
    "05 experts parallel": lambda: build_experts_graph(ExpertsConfig(execution="parallel")),
    "05 experts primed": lambda: build_experts_graph(ExpertsConfig(execution="primed")),
    **LIBRARY_DEFAULTS,
}


@pytest.mark.parametrize("name", list(FIXED))
def test_fixed_builders_and_library_defaults_have_no_error(name):
    assert diagnose(FIXED[name]()).errors == []


def test_the_turn_cache_agent_is_clean_and_says_what_it_cannot_cover():
    report = diagnose(rds.build_turn_cache_agent(model()))
    assert report.codes() == []
    # deepagents' general-purpose subagent copies the tools but not the turn cache
    assert {f.severity for f in report} == {"info"}
    assert "general-purpose:requirements" in {f.subject for f in report}


def test_the_library_defaults_have_no_finding_at_all():
    for build in LIBRARY_DEFAULTS.values():
        assert diagnose(build()).findings == []


SERVED = {name: (spec, base) for name, spec, base in targets(str(ROOT / "langgraph.json"))}


@pytest.mark.parametrize("name", list(SERVED))
def test_every_served_graph_has_no_error(name):
    spec, base = SERVED[name]
    graph = load_target(spec, base=base)
    assert diagnose(graph, name).errors == []


def test_the_readme_notes_agent_is_clean():
    heading = "Use it in your own agent"
    code = block((ROOT / "README.md").read_text(), heading)
    agent = execute(code, f"<README: {heading}>")["agent"]
    assert diagnose(agent).findings == []
    # not clean for want of looking: the doctor read what each tool writes and reads
    tools = graph_facts(agent).tools
    assert tools["save_note"].code.writes == {"notes", "messages"}
    assert tools["read_notes"].code.reads == {"notes"}


@pytest.fixture(scope="module")
def memory_tools(tmp_path_factory):
    import asyncio

    async def load(url: str) -> list:
        async with MemoryClient(url) as client:
            return await client.tools()

    with ServerProcess(tmp_path_factory.mktemp("doctor") / "memory.sqlite") as server:
        yield asyncio.run(load(server.url))


def test_the_react_memory_baseline_is_named_and_the_capture_graph_passes(memory_tools):
    react = diagnose(build_react_agent(model(), memory_tools, "v", "m"))
    assert react.codes() == ["memory-in-react-loop"]
    assert {f.subject for f in react.warnings} == {"add_entry", "put_context"}
    capture = diagnose(build_capture_graph(model(), memory_tools))
    assert capture.codes() == []  # code, not the model, dispatches the memory writes
