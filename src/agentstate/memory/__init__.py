"""Stage 06: tool-only memory capture over a real MCP memory server (notebook 06).

Server side: ``store`` (SQLite: durable write queue, entries with FTS5,
context snapshots, call log; one server process per file), ``writer`` (drains
the queue), ``server`` (the FastMCP tools, optional bearer token over HTTP),
``process`` (start/stop it on 127.0.0.1), ``cli`` (``agentstate memory serve``).
Agent side: ``client`` (tools through langchain-mcp-adapters over one kept
session, retries made safe by each write's ``idempotency_key``), ``conversations``
(``data/conversations``), ``prompt`` and ``calls`` (the capture rules),
``policy`` (offline models, well-behaved and as reported), ``react`` (the
prebuilt baseline), ``capture`` (the tool-only graph), ``observer`` (replays
a conversation into an agent), ``worker`` (a killable capture process),
``auditor`` (checks the store), ``lesson`` (notebook helpers).

The names below are the public API: ``from agentstate.memory import
build_capture_graph``. They are imported on first use, so ``import
agentstate.memory`` (and the ``agentstate`` command) stays quick.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    # the failure and the fix
    "AS_REPORTED": "policy",  # the faults reported of the prebuilt agent (notebook 06)
    "CaptureRun": "observer",  # replays a conversation through the tool-only graph
    "CaptureState": "capture",  # the tool-only graph's state
    "CapturePolicy": "policy",  # the offline model: what a well-behaved model emits
    "Faults": "policy",  # which misbehaviours the offline model shows
    "InvalidTurn": "capture",  # a message the capture graph refuses, before any write
    "ReactRun": "observer",  # replays a conversation through the prebuilt ReAct agent
    "build_capture_graph": "capture",  # the fix: the tool-only LangGraph workflow
    "build_react_agent": "react",  # the baseline: the prebuilt ReAct agent
    "check_turn": "capture",  # validate one turn at the boundary
    "guard": "capture",  # the rules that build a turn's plan
    "policy_model": "policy",  # a chat model playing a policy (or the real endpoint)
    # conversations
    "CONTROLS": "conversations",  # SESSION_START, FLUSH_CONTEXT, SESSION_END
    "Conversation": "conversations",  # numbered events over one or more threads
    "Event": "conversations",  # one control or conversation message
    "available": "conversations",  # names in data/conversations
    "load": "conversations",  # data/conversations/<name>.json
    "parse": "conversations",  # validate and number raw events
    "synthetic": "conversations",  # a generated conversation of N messages
    # the server and its client
    "MemoryAccessDenied": "client",  # the server wants a (different) bearer token
    "MemoryClient": "client",  # tools and direct calls over one kept MCP session
    "MemoryInputError": "store",  # bad input or unknown memory; nothing written
    "MemoryServerUnavailable": "client",  # nothing answers; says how to start it
    "MemoryStore": "store",  # the server's SQLite storage
    "MemoryToolError": "client",  # the server refused a call (its message)
    "ServerProcess": "process",  # the server as a real process on 127.0.0.1
    "StoreInUseError": "store",  # another server process already serves the file
    "TOKEN_ENV": "cli",  # AGENTSTATE_MEMORY_TOKEN
    "build_server": "server",  # the FastMCP app over one SQLite file
    "port_open": "process",  # is something listening on 127.0.0.1:port
    # checking and teaching
    "FAULTS": "lesson",  # the notebook's knob: fault name -> Faults
    "Violation": "auditor",  # one broken capture rule
    "audit": "auditor",  # every violation in the store for a conversation
    "compare": "lesson",  # three agents on one conversation, audited
    "add_entry": "calls",  # builds the one add_entry call of a message (guard and auditor)
    "curated": "capture",  # what the capture model is shown: prompt and conversation only
    "knob_counts": "lesson",  # the knob: one conversation on its own server, audited
    "knob_servers": "lesson",  # the servers the knob started (all stopped)
    "proposes_nothing": "lesson",  # a model that proposes no tool call at all
    "rules_table": "lesson",  # the capture rules applied to one conversation
    "without_guard": "lesson",  # the capture graph with its guard removed (a proof)
    "compare_sync": "lesson",  # the same from a widget callback
    "counts": "auditor",  # violations per kind
    "message_rows": "lesson",  # a state's messages as table rows
    "read_memory": "auditor",  # entries, call log and queue of one memory
    "side_by_side": "auditor",  # violations per kind, one column per agent
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'agentstate.memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"agentstate.memory.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
