"""Stage 05: langgraph.json points at a compiled graph that `langgraph dev` can serve."""

import importlib.util
import json
from pathlib import Path

from agentstate.experts import user_turn

ROOT = Path(__file__).resolve().parents[1]


def test_langgraph_json_names_the_experts_graph():
    config = json.loads((ROOT / "langgraph.json").read_text())
    path, _, symbol = config["graphs"]["experts"].partition(":")
    assert (ROOT / path).is_file() and symbol == "graph"
    assert config["dependencies"] == ["."]


def test_server_module_exposes_a_working_graph(monkeypatch):
    monkeypatch.delenv("AGENTSTATE_LLM_BASE_URL", raising=False)
    path = ROOT / "src/agentstate/experts/server.py"
    spec = importlib.util.spec_from_file_location("experts_server_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    state = module.graph.invoke(user_turn("Which sanctions lists do we screen?"))
    assert state["route"]["experts"] == ["compliance_auditor"] and state["response"]
    assert module.graph.checkpointer is None  # the Agent Server brings its own
