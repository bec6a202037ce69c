"""Stage 05 on the real engine: llama.cpp's server with SmolLM2, started and stopped here.

Marked ``engine`` (``make test`` installs it with ``make engine``; without it
these tests skip and say so). No assertion depends on timing or machine load:
timing figures belong to scripts/bench_experts.py. The server runs verbose, so
its log says how many prompt tokens each request reused from the KV cache;
the tests count those tokens, and compare the bytes sent.
"""

import json
import os

import pytest

from agentstate.cli import main
from agentstate.engine import EngineServer, count_tokens, engine_installed
from agentstate.experts import (
    ExpertsConfig,
    Manual,
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
# The manual's preamble alone: 232 prompt tokens with the instructions, against 609 with its
# first chapter. What is checked is which tokens the engine reuses, not how many, and every
# cold prefill costs in proportion (these tests run beside the others in `make test`).
_FULL = load_manual()
MANUAL = Manual(name=f"{_FULL.name}[preamble]", data=_FULL.data[: _FULL.data.index(b"\n## ") + 1])
ALL3 = "The batch outage debited a customer twice: what must we report to the regulator?"
TWO = "The overnight batch outage: what must we report to the regulator?"
SLOW = 900  # client timeout: a loaded 2-core machine may take minutes for one cold prefill


@pytest.fixture(scope="module")
def server():
    with EngineServer(verbose=True) as running:
        yield running
    assert running.process.poll() is not None  # nothing left behind


def run(server, policy, query, recorder=None, manual=MANUAL):
    """One evicted run; the prefix-cache hits the server logged during it."""
    model = chat_model(ModelSettings(base_url=server.base_url), max_tokens=8, recorder=recorder,
                       timeout=SLOW)  # fmt: skip
    evict(model)
    before = len(server.prefix_hits())
    config = ExpertsConfig(manual=manual, mode="llm", expert_model=model, prefix_policy=policy,
                           synthesis="combine")  # fmt: skip
    state = build_experts_graph(config).invoke(user_turn(query))
    return state, server.prefix_hits()[before:]


def test_warm_experts_reuse_the_whole_manual_and_bytes_are_identical(server):
    recorder = RequestRecorder()
    state, hits = run(server, "invariant", ALL3, recorder)
    first, *rest = state["route"]["experts"]
    assert len(rest) == 2 and all(state["ttft_ms"][e] > 0 for e in state["ttft_ms"])
    prefix_tokens = count_tokens(system_prefix(MANUAL).text)
    assert sum(hit >= prefix_tokens for hit in hits) == 2, hits  # experts 2 and 3 reuse it
    bodies = recorder.bodies[1:]  # after the eviction call
    assert len(bodies) == 3
    shared = min(common_prefix_length(bodies[0], b) for b in bodies[1:])
    for body in bodies:
        assert shared > body.index(b"=== END OF MANUAL ===")
    assert set(recorder.first_system_messages()[1:]) == {system_prefix(MANUAL).text}


def test_a_timestamp_before_the_manual_keeps_every_expert_cold(server):
    busted, busted_hits = run(server, "timestamp_first", TWO)
    fixed, fixed_hits = run(server, "invariant", TWO)
    assert len(busted["route"]["experts"]) == len(fixed["route"]["experts"]) == 2
    assert len(set(busted["prefix_by_call"].values())) == 2
    prefix_tokens = count_tokens(system_prefix(MANUAL).text)
    assert max(busted_hits, default=0) < 50, busted_hits  # only the template and "Current time"
    assert max(fixed_hits) >= prefix_tokens, fixed_hits


def test_cli_start_run_stop_leaves_no_process(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AGENTSTATE_ENGINE_STATE", str(tmp_path / "engine.json"))
    assert main(["engine", "start"]) == 0
    record = json.loads((tmp_path / "engine.json").read_text())
    try:
        assert record["base_url"].startswith("http://127.0.0.1:") and record["n_ctx"] == 8192
        capsys.readouterr()
        code = main(["experts", "run", "--mode", "llm", "--sections", "1", "--max-tokens", "8",
                     "--base-url", record["base_url"], "--json", "--timeout", str(SLOW), "--input",
                     "Which sanctions lists do we screen?"])  # fmt: skip
        result = json.loads(capsys.readouterr().out)
        assert code == 0 and result["experts"] == ["compliance_auditor"]
        assert result["ttft_ms"]["compliance_auditor"] > 0 and result["response"]
        # the whole manual does not fit the recorded 8k context: refused before sending
        code = main(["experts", "run", "--mode", "llm", "--base-url", record["base_url"],
                     "--input", "Which sanctions lists do we screen?"])  # fmt: skip
        out = capsys.readouterr().out
        assert code == 2 and "context of 8192 tokens" in out and out.count("\n") == 1
    finally:
        assert main(["engine", "stop"]) == 0
    assert "stopped pid" in capsys.readouterr().out
    with pytest.raises(ProcessLookupError):  # stopped and reaped: the pid is gone
        os.kill(record["pid"], 0)
