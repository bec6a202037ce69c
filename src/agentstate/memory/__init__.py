"""Lesson 06: tool-only memory capture over a real MCP memory server (notebook 06).

Two halves that meet only over MCP:

- ``service/``: the memory service standing in for Mycelian, what runs in the
  server process: ``store`` (SQLite: durable write queue, entries with FTS5,
  context snapshots, call log), ``writer`` (drains the queue), ``server`` (the
  FastMCP tools), ``options`` and ``cli`` (``agentstate memory serve``),
  ``process`` (start/stop it on 127.0.0.1); for a fleet, ``store_postgres``
  (one Postgres database behind several replicas) and ``fleet_writer``, with
  ``stores`` choosing the backend ``--db`` names and ``targets`` reading it.
- ``capture/``: lesson 06's fix, the tool-only graph (``graph``, its ``guard``),
  the rules (``calls``, ``prompt``), offline models (``policy``), the recorded
  input (``conversations``), ``observer``, ``checkpoints``, ``worker``; and in
  ``capture/baselines/`` what it is measured against: the prebuilt ReAct agent
  (``react``) and the ``auditor``.

Between them, ``client`` (the agent side of the wire: tools through
langchain-mcp-adapters over one kept session, retries made safe by each write's
``idempotency_key``; with several URLs it fails over between replicas); on top,
``lesson`` (the notebook's helpers, its observer among them), ``drawing`` (a memory drawn message by
message beside the rules) and ``fleet`` (replicas started together, the
recorded fleet benchmark).

The names below are the public API: ``from agentstate.memory import
build_capture_graph``. They are imported on first use, so ``import
agentstate.memory`` (and the ``agentstate`` command) stays quick.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentstate._extras import require

# Checked without importing anything: `import agentstate.memory` stays quick.
require("memory", "agentstate.memory")

_HOMES = {
    # the failure and the fix
    "AS_REPORTED": "capture.policy",  # the faults reported of the prebuilt agent (notebook 06)
    "CaptureRun": "capture.observer",  # replays a conversation through the tool-only graph
    "CaptureState": "capture.graph",  # the tool-only graph's state
    "CapturePolicy": "capture.policy",  # the offline model: what a well-behaved model emits
    "Faults": "capture.policy",  # which misbehaviours the offline model shows
    "InvalidTurn": "capture.graph",  # a message the capture graph refuses, before any write
    "ReactRun": "capture.observer",  # replays a conversation through the prebuilt ReAct agent
    "build_capture_graph": "capture.graph",  # the fix: the tool-only LangGraph workflow
    "build_react_agent": "capture.baselines.react",  # the baseline: the prebuilt ReAct agent
    "check_turn": "capture.graph",  # validate one turn at the boundary
    "guard": "capture.graph",  # the rules that build a turn's plan
    "policy_model": "capture.policy",  # a chat model playing a policy (or the real endpoint)
    # conversations
    "CONTROLS": "capture.conversations",  # SESSION_START, FLUSH_CONTEXT, SESSION_END
    "Conversation": "capture.conversations",  # numbered events over one or more threads
    "Event": "capture.conversations",  # one control or conversation message
    "available": "capture.conversations",  # names in data/conversations
    "load": "capture.conversations",  # data/conversations/<name>.json
    "parse": "capture.conversations",  # validate and number raw events
    "synthetic": "capture.conversations",  # a generated conversation of N messages
    # the server and its client
    "MemoryAccessDenied": "client",  # the server wants a (different) bearer token
    "MemoryClient": "client",  # tools and direct calls over one kept MCP session
    "SyncMemoryClient": "client",  # the same client for sync code (its own event-loop thread)
    "MemoryInputError": "service.checks",  # bad input or unknown memory; nothing written
    "MemoryServerUnavailable": "client",  # nothing answers; says how to start it
    "MemoryStore": "service.store",  # the server's SQLite storage
    "MemoryToolError": "client",  # the server refused a call (its message)
    "ServerProcess": "service.process",  # the server as a real process on 127.0.0.1
    "StoreInUseError": "service.store",  # another server process already serves the file
    "TOKEN_ENV": "service.options",  # AGENTSTATE_MEMORY_TOKEN
    "build_server": "service.server",  # the FastMCP app over an SQLite file or a Postgres URL
    "port_open": "service.process",  # is something listening on 127.0.0.1:port
    "url_open": "service.process",  # does the host and port an http(s) URL names answer
    # a fleet: several replicas over one Postgres database (issue 35)
    "Fleet": "fleet",  # start N replicas of the server on one database URL
    "PostgresMemoryStore": "service.store_postgres",  # the store over Postgres, shared by replicas
    "StoreUnavailableError": "service.sql_store",  # the database is down: one line, nothing acked
    "fleet_rows": "fleet",  # the recorded fleet benchmark as table rows
    "open_store": "service.stores",  # the store --db names: an SQLite path or a Postgres URL
    "write_in_flight": "fleet",  # does a replica hold a claimed write uncommitted right now
    # checking and teaching
    "FAULTS": "lesson",  # the notebook's knob: fault name -> Faults
    "Violation": "capture.baselines.auditor",  # one broken capture rule
    "audit": "capture.baselines.auditor",  # every violation in the store for a conversation
    "compare": "lesson",  # three agents on one conversation, audited
    "draw_capture": "drawing",  # a memory drawn message by message beside the rules
    "add_entry": "capture.calls",  # builds the one add_entry call of a message (guard and auditor)
    "curated": "capture.graph",  # what the capture model is shown: prompt and conversation only
    "rules_table": "lesson",  # the capture rules applied to one conversation
    "without_guard": "lesson",  # the capture graph with its guard removed (a proof)
    "add_entry_args": "lesson",  # the teaching guard's add_entry, built from the message
    "chat_msg_idx": "lesson",  # msg_idx of a message the teaching guard stores, else None
    "rules_for": "lesson",  # the capture rules of one memory, as the teaching guard's prompt
    "offered_summary": "lesson",  # the one thing the teaching guard takes from a reply
    "proof_summary": "lesson",  # the random proof's tally: resends, kinds, exact stores
    "start_server": "lesson",  # a memory server on a fresh SQLite file (notebook 06)
    "stores_by_message": "lesson",  # per msg_idx, what the chat said and each agent stored
    "rules_kept": "lesson",  # the capture rules beside each agent's store and call log
    "PROPOSAL_KINDS": "lesson",  # the kinds of tool call a random model proposes
    "RandomProposals": "lesson",  # a model proposing random tool calls (the guard's property test)
    "expected_entries": "lesson",  # the entries the capture rules call for
    "observe": "lesson",  # feed an agent a chat, one event per invoke; return the store
    "observe_sync": "lesson",  # the same for sync agents and a SyncMemoryClient
    "random_events": "lesson",  # a random conversation for the property test
    "random_model": "lesson",  # a chat model playing RandomProposals (the lesson's proof)
    "replay_model": "lesson",  # the scripted model replaying the reported faults
    "replay_schedule": "lesson",  # where that replay's faults fire in a chat
    "store_rows": "lesson",  # a memory's stored entries as table rows
    "replay_vs_store": "lesson",  # the replay's schedule beside the wrong entries it left
    "awrite_entries": "lesson",  # the teaching guard's write: add_entry per entry, a refusal raises
    "write_entries": "lesson",  # the same, sync
    "stored_entries": "lesson",  # the entries a memory holds
    "system_prompt": "capture.prompt",  # the capture prompt every agent is given
    "turn_line": "capture.prompt",  # one conversation message as the model sees it
    "counts": "capture.baselines.auditor",  # violations per kind
    "read_memory": "capture.baselines.auditor",  # entries, call log and queue of one memory
    "side_by_side": "capture.baselines.auditor",  # violations per kind, one column per agent
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
