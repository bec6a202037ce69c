"""Notebook 04's setup: the parent's script and reader tool, and the readouts of a turn.

The page builds the two agents under study (the collector and its parent) in view; what they
run on (the parent's scripted replies, the tool that reads the parent's state) and how a turn
is read back (what each side said, which keys ``task`` brought up) live here, so the page
reaches its first result in a dozen lines. Used by notebook 04 and its solutions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import tool

from agentstate.lessons.display import Table
from agentstate.lessons.fixtures import (
    POSTGRES_FIELDS,
    delegate,
    fields_seen_by_reader,
    reader_replies,
)
from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.tracing import CommandRecorder, TaskInputs


@tool
def get_collected_requirements(runtime: ToolRuntime) -> str:
    """List every requirement field collected so far, as JSON."""
    # The parent's reader: its own state's ``requirements`` (lesson 01's reader of the same
    # name, in agentstate.lessons.fixtures, reads files instead).
    return json.dumps(runtime.state.get("requirements", {}))


def parent_script(*field_sets: Mapping[str, Any]) -> ScriptedChatModel:
    """The parent's replies: one ``task`` per field set (one reply), read its state, "Done."

    With no field set it delegates the five Postgres fields; several field sets are
    parallel ``task`` calls (give their collector ``collector_model(tasks=n)``).
    """
    read = reply(tool_call("get_collected_requirements"))
    first = delegate(*(field_sets or [POSTGRES_FIELDS]))
    return ScriptedChatModel(script=[first, read, reply(text="Done.")], model_name="parent")


def what_each_said(state: Mapping[str, Any]) -> Table:
    """The collector's report (``task``'s reply) beside what the parent's reader got."""
    said = reader_replies(state)
    missing = {"task", "get_collected_requirements"} - set(said)
    if missing:
        raise ValueError(f"what_each_said: no reply from {sorted(missing)} in this state")
    got = said["get_collected_requirements"]
    return Table([{"collector said": said["task"], "parent's reader got": got}])


def what_went_down(handed: TaskInputs, collector_model: ScriptedChatModel, parent: Any) -> Table:
    """The keys ``task`` handed the collector, the parent's state keys it kept out, and the
    messages the collector's model was given, each as its type and first characters.

    ``parent`` is the compiled parent graph: its state keys, less those handed down, are the
    kept-out ones.
    """
    if not handed.inputs or not collector_model.seen:
        raise ValueError("what_went_down: run one turn with `handed` in the config's callbacks")
    keys = getattr(parent, "stream_channels_list", None)  # a compiled graph's state keys
    if keys is None:
        got = type(parent).__name__
        raise TypeError(f"what_went_down: expected the compiled parent, got {got}")
    down = sorted(handed.inputs[0])
    kept_out = sorted(k for k in keys if k not in down)
    given = [f"{m.type}: {_first(m.text, 40)}" for m in collector_model.seen[0]]
    return Table([{"task handed down": down, "kept out": kept_out, "its model got": given}])


def _first(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def task_report(who: str, state: Mapping[str, Any], recorder: CommandRecorder) -> Table:
    """One row: the state keys ``task`` brought up besides ``messages``, and what the reader got."""
    if not recorder.updates:
        raise ValueError("task_report: the recorder saw no `task` call (is it the parent's?)")
    up = ", ".join(k for k in recorder.updates[0]["update keys"] if k != "messages")
    got = f"{fields_seen_by_reader(state)} fields"
    return Table(
        [{"declared by": who, "state keys brought up": up or "none", "parent's reader got": got}]
    )
