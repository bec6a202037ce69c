"""The memory hazard (notebook 06): a ReAct loop that decides what to store, replayed.

LangChain's prebuilt loop runs whatever memory calls the model makes; nothing
in it knows which text was the user's or that a message is already stored.
The model here replays a reported failure (its schedule is the script below):
it stores its own reply as the user's, and stores one message twice.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.tools import tool
from langgraph.store.memory import InMemoryStore

from agentstate.hazards.registry import Result, reproduced_unless
from agentstate.models.scripted import ScriptedChatModel, reply, tool_call

CHAT = ["I fly to Lisbon on May 3.", "I am vegetarian."]
AGENT_TEXT = "Noted, Lisbon on May 3."


@tool
def remember(text: str, role: str, runtime: ToolRuntime) -> str:
    """Store one message of the conversation in long-term memory."""
    assert runtime.store is not None
    key = str(len(runtime.store.search(("memories",), limit=1000)))
    runtime.store.put(("memories",), key, {"text": text, "role": role})
    return "stored"


def replay() -> ScriptedChatModel:
    """The reported failure's schedule: turn 1 stores its own text as the user's; turn 2
    stores the user's message twice in one reply."""
    return ScriptedChatModel(
        script=[
            reply(
                tool_call("remember", text=CHAT[0], role="user"),
                tool_call("remember", text=AGENT_TEXT, role="user"),
            ),
            reply(text=AGENT_TEXT),
            reply(
                tool_call("remember", text=CHAT[1], role="user"),
                tool_call("remember", text=CHAT[1], role="user"),
            ),
            reply(text="Noted."),
        ]
    )


def react_loop_memory() -> Result:
    """Two user messages through the prebuilt loop: how many entries, and whose?"""
    store = InMemoryStore()
    agent = create_agent(replay(), [remember], store=store)
    messages: list[dict[str, str]] = []
    for text in CHAT:
        messages.append({"role": "user", "content": text})
        inputs: Any = {"messages": messages}
        messages = agent.invoke(inputs)["messages"]
    entries = [item.value["text"] for item in store.search(("memories",), limit=1000)]
    not_said = [e for e in entries if e not in CHAT]
    twice = len(entries) - len(set(entries))
    outcome = reproduced_unless(not not_said and not twice)
    return Result(
        "memory-in-react-loop",
        outcome,
        f"replay: {len(CHAT)} user messages, {len(entries)} entries "
        f"({len(not_said)} the agent's text, {twice} stored twice)",
    )
