"""The compiled experts graph for ``langgraph dev`` (see ``langgraph.json``).

The Agent Server brings its own checkpointer, so the graph is compiled
without one; its threads persist there. Configuration comes from environment
variables (see :mod:`agentstate.experts.settings`): stub mode offline, llm
mode when ``AGENTSTATE_LLM_BASE_URL`` is set. Taught in notebook 05.
"""

from agentstate.experts.graph import build_experts_graph
from agentstate.experts.settings import config_from_env

graph = build_experts_graph(config_from_env())
