"""The baseline of notebook 06: the prebuilt ReAct agent doing memory capture.

``create_agent`` with the same MCP tools and the same capture prompt as the
fix. The loop is the model's: whatever it says stays in state, and whatever
it calls runs. With the reported model (``policy.AS_REPORTED``) that means
agent-authored text in state, a second ``add_entry`` for one message, an
assistant turn stored as the user's and a doubled bootstrap; the rules live
only in the prompt, so nothing stops them.
"""

from __future__ import annotations

from langchain.agents import create_agent

from agentstate.memory.capture.prompt import system_prompt


def build_react_agent(model, tools: list, vault_id: str, memory_id: str, checkpointer=None):
    """One prebuilt agent per memory (its ids are in its prompt)."""
    return create_agent(
        model, tools, system_prompt=system_prompt(vault_id, memory_id), checkpointer=checkpointer
    )
