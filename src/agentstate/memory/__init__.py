"""Stage 06: tool-only memory capture over a real MCP memory server (notebook 06).

Server side: ``store`` (SQLite, durable write queue, FTS5), ``writer``,
``server`` (FastMCP tools), ``process`` (start/stop it on loopback), ``cli``.
Agent side: ``client`` (tools through langchain-mcp-adapters, retries),
``conversations`` (the replayed chats in ``data/conversations``), ``prompt``,
``policy`` (the offline models), ``react`` (the prebuilt-agent baseline),
``capture`` (the tool-only graph), ``observer`` (feeds a conversation to an
agent), ``auditor`` (checks the store against the conversation).
"""
