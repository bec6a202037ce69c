"""Ready-made runs for the RDS lessons: the same batches, agents and readouts every time.

Notebooks 01-04 and the tests share these so a lesson's numbers come from
the package, not from code pasted into a cell.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import ToolMessage

from agentstate.models import ScriptedChatModel, reply, tool_call
from agentstate.rds.storage import REQUIREMENTS_PATH, read_json_file
from agentstate.tracing import ToolEvent

USER_REQUEST = "Give me a Postgres 15.5 manifest with sensible defaults"

# What a model collects from that request in one reply.
POSTGRES_FIELDS: dict[str, Any] = {
    "engine": "postgres",
    "engine_version": "15.5",
    "instance_class": "db.t3.micro",
    "allocated_storage_gb": 20,
    "username": "dbadmin",
}

# The rest of a valid manifest (the password only as a secret reference).
VALID_REQUIREMENTS: dict[str, Any] = {
    "name": "orders-db",
    **POSTGRES_FIELDS,
    "password": "$secret:rds-master-password",
    "subnet_ids": ["subnet-0a1b2c3d", "subnet-4e5f6a7b"],
}


def store_calls(fields: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One ``store_requirement`` call per field, in the mapping's order."""
    return [tool_call("store_requirement", field_name=k, value=v) for k, v in fields.items()]


def label_fields(n: int) -> dict[str, str]:
    """``n`` distinct valid fields (metadata labels) for scale runs."""
    return {f"labels.k{i:03d}": str(i) for i in range(n)}


def one_batch_model(
    fields: Mapping[str, Any], *, extra: list[dict[str, Any]] = (), name: str = "scripted"
) -> ScriptedChatModel:
    """A model whose first reply stores ``fields`` in parallel (plus ``extra`` calls)."""
    return ScriptedChatModel(
        script=[reply(*store_calls(fields), *extra), reply(text="Done.")], model_name=name
    )


def one_call_per_step_model(fields: Mapping[str, Any]) -> ScriptedChatModel:
    """The serial workaround: one store call per model reply."""
    return ScriptedChatModel(script=[reply(c) for c in store_calls(fields)] + [reply(text="Done.")])


def user_turn(text: str = USER_REQUEST) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def finish_last_first(order: list[str], unit: float = 0.02) -> Callable[[str], float]:
    """Tool delays under which the last call of the AIMessage finishes first."""
    return lambda field: unit * (len(order) - order.index(field))


def file_fields(state: Mapping[str, Any]) -> dict[str, Any]:
    """What ``/requirements.json`` holds in a state."""
    return read_json_file(state.get("files"), REQUIREMENTS_PATH)


def timeline_rows(events: list[ToolEvent]) -> list[dict[str, Any]]:
    """Events as table rows; threads renamed T1, T2... in order of first start."""
    by_start = sorted(events, key=lambda e: e.start)
    names = {t: f"T{i + 1}" for i, t in enumerate(dict.fromkeys(e.thread for e in by_start))}
    t0 = by_start[0].start if by_start else 0.0
    finish_rank = {e.call_id: i + 1 for i, e in enumerate(sorted(events, key=lambda e: e.end))}
    return [
        {
            "step": e.step,
            "call #": e.position + 1,
            "field": e.args.get("field_name", e.name),
            "thread": names[e.thread],
            "start ms": round((e.start - t0) * 1000),
            "end ms": round((e.end - t0) * 1000),
            "finished": finish_rank[e.call_id],
        }
        for e in events
    ]


def reader_batch_model(
    fields: Mapping[str, Any], trials: int, reader: str = "get_collected_requirements"
) -> ScriptedChatModel:
    """``trials`` turns, each one reply with the store calls AND a reader, then a final reply."""
    turn = [reply(*store_calls(fields), tool_call(reader)), reply(text="Done.")]
    return ScriptedChatModel(script=turn * trials, model_name="reader-batch")


def fields_seen_by_reader(state: Mapping[str, Any]) -> int:
    """How many fields the last ``get_collected_requirements`` reply listed (-1 if it failed)."""
    for message in reversed(state["messages"]):
        if isinstance(message, ToolMessage) and message.name == "get_collected_requirements":
            return -1 if message.status == "error" else len(json.loads(message.content))
    raise ValueError("no get_collected_requirements reply in this state")


def same_batch_reader_trials(
    agent: Any,
    trials: int,
    config: Callable[[], dict[str, Any]] = dict,
    progress: bool = False,
) -> list[int]:
    """Invoke ``agent`` ``trials`` times (its model scripted by :func:`reader_batch_model`)
    and return how many of the batch's writes the same-batch reader saw each time."""
    from tqdm.auto import trange

    return [
        fields_seen_by_reader(agent.invoke(user_turn(), config()))
        for _ in trange(trials, disable=not progress, leave=False)
    ]
