"""Stage 05 on the real engine: llama.cpp's server with SmolLM2, started and stopped here.

Marked ``engine`` (``make test`` installs it with ``make engine``; without it
these tests skip and say so). The assertions are generous on purpose: timing
figures belong to scripts/bench_experts.py, these only check that the prefix
cache really works and that the bytes sent are the ones we built.
"""

import json
import os

import pytest

from agentstate.cli import main
from agentstate.engine import EngineServer, engine_installed
from agentstate.experts import (
    ExpertsConfig,
    build_experts_graph,
    common_prefix_length,
    load_manual,
    system_prefix,
    user_turn,
)
from agentstate.experts.benchmark import evict
from agentstate.experts.llm import RequestRecorder, chat_model
from agentstate.models import ModelSettings

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not engine_installed(), reason="engine not installed: run `make engine`"),
]
MANUAL = load_manual(sections=2)  # about 1k prompt tokens: cold ~10 s on 2 cores, warm < 2 s
ALL3 = "The batch outage debited a customer twice: what must we report to the regulator?"
TWO = "The overnight batch outage: what must we report to the regulator?"


@pytest.fixture(scope="module")
def server():
    with EngineServer() as running:
        yield running
    assert running.process.poll() is not None  # nothing left behind


def run(server, policy, query, recorder=None, manual=MANUAL):
    model = chat_model(ModelSettings(base_url=server.base_url), max_tokens=8, recorder=recorder)
    evict(model)
    config = ExpertsConfig(manual=manual, mode="llm", expert_model=model, prefix_policy=policy,
                           synthesis="combine")  # fmt: skip
    return build_experts_graph(config).invoke(user_turn(query))


def test_warm_experts_are_several_times_faster_and_bytes_are_identical(server):
    recorder = RequestRecorder()
    state = run(server, "invariant", ALL3, recorder)
    first, *rest = state["route"]["experts"]
    assert len(rest) == 2
    cold, warm = state["ttft_ms"][first], max(state["ttft_ms"][e] for e in rest)
    assert warm * 3 <= cold, state["ttft_ms"]
    bodies = recorder.bodies[1:]  # after the eviction call
    assert len(bodies) == 3
    shared = min(common_prefix_length(bodies[0], b) for b in bodies[1:])
    for body in bodies:
        assert shared > body.index(b"=== END OF MANUAL ===")
    assert set(recorder.first_system_messages()[1:]) == {system_prefix(MANUAL).text}


def test_a_timestamp_before_the_manual_keeps_every_expert_cold(server):
    small = MANUAL.leading(1)  # ~600 tokens keeps the three cold calls quick
    busted = run(server, "timestamp_first", TWO, manual=small)
    fixed = run(server, "invariant", TWO, manual=small)
    experts = busted["route"]["experts"]
    assert len(experts) == 2
    second = experts[1]
    assert busted["ttft_ms"][second] >= 3 * fixed["ttft_ms"][second], (busted, fixed)
    assert len(set(busted["prefix_by_call"].values())) == 2


def test_cli_start_run_stop_leaves_no_process(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENTSTATE_ENGINE_STATE", str(tmp_path / "engine.json"))
    assert main(["engine", "start"]) == 0
    record = json.loads((tmp_path / "engine.json").read_text())
    try:
        assert record["base_url"].startswith("http://127.0.0.1:")
        capsys.readouterr()
        code = main(["experts", "run", "--mode", "llm", "--sections", "1", "--max-tokens", "8",
                     "--base-url", record["base_url"], "--json", "--input",
                     "Which sanctions lists do we screen?"])  # fmt: skip
        result = json.loads(capsys.readouterr().out)
        assert code == 0 and result["experts"] == ["compliance_auditor"]
        assert result["ttft_ms"]["compliance_auditor"] > 0 and result["response"]
    finally:
        assert main(["engine", "stop"]) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(record["pid"], 0)
