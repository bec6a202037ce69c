"""Lesson 06's fix: the tool-only capture graph and what drives it (notebook 06).

``graph`` (the LangGraph workflow; its ``guard`` builds each turn's plan),
``calls`` and ``prompt`` (the capture rules), ``policy`` (offline models,
well-behaved and as reported), ``conversations`` (the recorded input events),
``observer`` (replays a conversation into an agent), ``checkpoints`` (SQLite
checkpoints committed in the event loop) and ``worker`` (a killable capture
process: ``python -m agentstate.memory.capture.worker``). ``baselines`` holds
what the fix is measured against. The capture reaches the service only through
``agentstate.memory.client``, over MCP.
"""
