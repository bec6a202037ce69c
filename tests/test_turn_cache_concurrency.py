"""Many users on one turn-cached agent at once (notebook 03's cache, issue 16).

24 threads call ``invoke`` and 24 call ``ainvoke`` on one compiled graph at
the same time, half with their own thread id and half with none (so their
batches differ only by AIMessage id): every reader must see the 5 writes of
its own batch, never another run's, and no batch may stay in memory.
"""

import asyncio
import threading

from agentstate.core import TurnCacheMiddleware
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    fields_seen_by_reader,
    store_calls,
    user_turn,
)
from agentstate.lessons.simulation import ToolLatencyMiddleware
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds import READER_TOOLS, WRITER_TOOLS, build_reducer_agent

RUNS = 24


def test_24_invoke_and_24_ainvoke_threads_each_reader_sees_its_own_batch():
    batch = reply(*store_calls(POSTGRES_FIELDS), tool_call("get_collected_requirements"))

    def step(messages):
        return batch if messages[-1].type == "human" else reply(text="Done.")

    cache = TurnCacheMiddleware(writers=WRITER_TOOLS, readers=READER_TOOLS, key="requirements")
    agent = build_reducer_agent(
        ScriptedChatModel(script=[step] * (4 * RUNS)),
        middleware=[cache, ToolLatencyMiddleware(0.005, seed=4)],
    )
    seen: dict[str, int] = {}
    start = threading.Barrier(2 * RUNS)

    def run(name: str, how: str) -> None:
        config = {"configurable": {"thread_id": name}} if int(name[1:]) % 2 else {}
        start.wait()
        if how == "invoke":
            state = agent.invoke(user_turn(), config)
        else:
            state = asyncio.run(agent.ainvoke(user_turn(), config))
        seen[name] = fields_seen_by_reader(state)

    threads = [
        threading.Thread(target=run, args=(f"{how[0]}{i}", how))
        for i in range(RUNS)
        for how in ("invoke", "ainvoke")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(seen) == 2 * RUNS
    assert set(seen.values()) == {len(POSTGRES_FIELDS)}, seen
    assert cache.open_batches == 0
