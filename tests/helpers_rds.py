"""Shared builders for the RDS tests: a valid requirement set and one-batch scripts."""

from __future__ import annotations

from typing import Any

from agentstate.models import ScriptedChatModel, reply, tool_call

VALID: dict[str, Any] = {
    "name": "orders-db",
    "engine": "postgres",
    "engine_version": "15.5",
    "instance_class": "db.t3.micro",
    "allocated_storage_gb": 20,
    "username": "dbadmin",
    "password": "$secret:rds-master-password",
    "subnet_ids": ["subnet-a", "subnet-b"],
}

FIVE = {
    k: VALID[k]
    for k in ("engine", "engine_version", "instance_class", "allocated_storage_gb", "username")
}


def store_calls(fields: dict[str, Any]) -> list[dict[str, Any]]:
    return [tool_call("store_requirement", field_name=k, value=v) for k, v in fields.items()]


def one_batch_model(*calls: dict[str, Any], then: str = "done") -> ScriptedChatModel:
    """A model that emits ``calls`` in one AIMessage, then a final text reply."""
    return ScriptedChatModel(script=[reply(*calls), reply(text=then)], model_name="test")


def user(text: str = "Give me a Postgres 15.5 manifest") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}
