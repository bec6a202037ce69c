"""Stage 06: tool-only memory capture over a real MCP memory server (notebook 06).

Server side: ``store`` (SQLite: durable write queue, entries with FTS5,
context snapshots, call log), ``writer`` (drains the queue), ``server`` (the
FastMCP tools), ``process`` (start/stop it on 127.0.0.1), ``cli``
(``agentstate memory serve``).
Agent side: ``client`` (tools through langchain-mcp-adapters, retry that
checks before re-writing), ``conversations`` (``data/conversations``),
``prompt`` and ``calls`` (the capture rules), ``policy`` (offline models,
well-behaved and as reported), ``react`` (the prebuilt baseline), ``capture``
(the tool-only graph), ``observer`` (replays a conversation into an agent),
``worker`` (a killable capture process), ``auditor`` (checks the store),
``lesson`` (notebook helpers).
"""
