"""Every stage's agent gives the same result through invoke, ainvoke and astream."""

import asyncio

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    collector_model,
    one_batch_model,
    parent_model,
    reader_batch_model,
    user_turn,
)
from agentstate.lessons.simulation import FinishOrder
from agentstate.rds import (
    build_cache_fix_agent,
    build_file_storage_agent,
    build_reducer_agent,
    build_shared_schema_agent,
    build_split_schema_agent,
    build_turn_cache_agent,
)
from agentstate.tracing import ToolTimeline, tool_replies

ORDER = list(POSTGRES_FIELDS)


def file_storage_last_first():
    """Stage 01 with its five stores running at once and ending last call first."""
    timeline = ToolTimeline()
    return build_file_storage_agent(
        one_batch_model(POSTGRES_FIELDS),
        between=FinishOrder(timeline, ORDER[::-1]),
        middleware=[timeline],
    )


AGENTS = {
    "01 file storage": file_storage_last_first,
    "02 reducer": lambda: build_reducer_agent(one_batch_model(POSTGRES_FIELDS)),
    "03 turn cache": lambda: build_turn_cache_agent(reader_batch_model(POSTGRES_FIELDS, 1)),
    "04 split schema": lambda: build_split_schema_agent(
        parent_model(POSTGRES_FIELDS), collector_model()
    ),
    "04 shared schema": lambda: build_shared_schema_agent(
        parent_model(POSTGRES_FIELDS), collector_model()
    ),
    "04 cache fix": lambda: build_cache_fix_agent(
        parent_model(POSTGRES_FIELDS), collector_model(), checkpointer=InMemorySaver()
    ),
}


def outcome(state) -> dict:
    """What a lesson asserts on: the requirements, the file, each tool's replies."""
    replies: dict[str, list[str]] = {}
    for m in tool_replies(state):
        replies.setdefault(m.name, []).append(m.content)
    return {
        "requirements": state.get("requirements"),
        "files": sorted(state.get("files", {})),
        "replies": {k: sorted(v) for k, v in replies.items()},
    }


def run(name: str, how: str) -> dict:
    agent = AGENTS[name]()
    config = {"configurable": {"thread_id": f"{name}-{how}"}}
    if how == "invoke":
        return outcome(agent.invoke(user_turn(), config))

    async def go():
        if how == "ainvoke":
            return await agent.ainvoke(user_turn(), config)
        chunks = [c async for c in agent.astream(user_turn(), config, stream_mode="values")]
        return chunks[-1]

    return outcome(asyncio.run(go()))


@pytest.mark.parametrize("name", list(AGENTS))
def test_same_result_sync_and_async(name):
    sync = run(name, "invoke")
    assert sync["replies"], "the agent ran no tool"
    assert run(name, "ainvoke") == sync
    assert run(name, "astream") == sync


def test_the_fixed_agents_results_are_the_lessons():
    assert run("02 reducer", "ainvoke")["requirements"] == POSTGRES_FIELDS
    assert run("04 shared schema", "astream")["requirements"] == POSTGRES_FIELDS
    assert not run("04 split schema", "ainvoke")["requirements"]  # dropped at the boundary
    file_agent = run("01 file storage", "ainvoke")
    assert file_agent["requirements"] is None and file_agent["files"] == ["/requirements.json"]
