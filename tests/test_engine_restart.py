"""Issue 26: the primed prefix survives an engine restart (real engine processes, HTTP).

An engine primes the manual's preamble and saves its state; a new engine
process on the same folder restores it before its first request, reuses the
whole prefix (its verbose log's prefix-hit line) and answers the same greedy
tokens as the warm engine did; an engine on another model file starts cold;
a clean stop saves a primed prefix whose state went missing; two engines
priming at once leave one whole state; ``agentstate experts prime`` (the
experts' prefix), ``agentstate engine prime --file`` (any prefix) and
``agentstate engine states|remove|status`` drive it; what it writes is 0600
and leaves no lock file (issue 33). No assertion depends on timing. Marked
``engine``.
"""

import json
import os
import shutil
import stat
import threading
import urllib.request

import pytest

from agentstate.cli import main
from agentstate.engine import EngineServer, engine_installed
from agentstate.engine.prefix_client import engine_state, prime
from agentstate.engine.state_files import file_problem, saved_states
from agentstate.servers.loopback import LoopbackServerError

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not engine_installed(), reason="engine not installed: run `make engine`"),
]

if engine_installed():
    from agentstate.engine import locate_model
    from agentstate.experts import EXPERTS, Manual, load_manual, system_prefix

    _FULL = load_manual()
    PREAMBLE = Manual(name="preamble", data=_FULL.data[: _FULL.data.index(b"\n## ") + 1])
    PREFIX = system_prefix(PREAMBLE).text
QUERY = "The overnight batch outage: what must we report to the regulator?"


def engine(folder, tmp_path, name, **options):
    return EngineServer(state_dir=folder, verbose=True, log_path=tmp_path / f"{name}.log",
                        **options)  # fmt: skip


def answer(server):
    """One expert call, greedy, 16 tokens: the reply text."""
    body = {
        "model": "local",
        "messages": [
            {"role": "system", "content": PREFIX},
            {"role": "system", "content": EXPERTS["compliance_auditor"].system_text()},
            {"role": "user", "content": QUERY},
        ],
        "max_tokens": 16,
        "temperature": 0,
    }
    request = urllib.request.Request(
        server.base_url + "/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=900) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def primed(tmp_path_factory):
    """A folder with the preamble's state, the warm answer, and the prefix's token count."""
    tmp = tmp_path_factory.mktemp("primed")
    folder = tmp / "states"
    with engine(folder, tmp, "first") as first:
        assert engine_state(first.base_url)["restored"] is False
        done = prime(first.base_url, PREFIX, "preamble")
        assert done["source"] == "prefill" and done["saved"]["written"] is True
        before = len(first.prefix_hits())
        warm = answer(first)
        assert first.prefix_hits()[before:] == [done["tokens"]]  # warm: the whole prefix reused
    return {"folder": folder, "warm": warm, "tokens": done["tokens"]}


@pytest.fixture
def copy(primed, tmp_path):
    return shutil.copytree(primed["folder"], tmp_path / "states")


def test_a_restarted_engine_reuses_the_whole_prefix_and_answers_as_warm(
    primed, copy, tmp_path, monkeypatch, capsys
):
    with engine(copy, tmp_path, "restarted") as server:
        state = engine_state(server.base_url)
        assert state["restored"] is True and state["prefix"]["tokens"] == primed["tokens"]
        assert server.state_lines()[0].startswith("restored the prefix state")
        assert server.prefix_hits() == []  # nothing asked yet
        assert answer(server) == primed["warm"]
        assert server.prefix_hits() == [primed["tokens"]]  # the first request: whole prefix
        record = tmp_path / "engine.json"
        record.write_text(json.dumps({"pid": server.pid, "port": server.port,
                                      "base_url": server.base_url}))  # fmt: skip
        monkeypatch.setenv("AGENTSTATE_ENGINE_STATE", str(record))
        assert main(["engine", "status"]) == 0
        out = capsys.readouterr().out
        assert "at start: restored the prefix state" in out and "primed prefix: preamble" in out


def test_an_engine_on_another_model_file_starts_cold(primed, copy, tmp_path):
    with engine(copy, tmp_path, "shipped", model_path=locate_model()) as server:
        state = engine_state(server.base_url)
        assert state["restored"] is False and state["prefix"] is None
        (line,) = server.state_lines()
        assert line.startswith("cold prefill: ") and "another model file" in line
        answer(server)
        assert server.prefix_hits() == []  # the whole prompt was read: cold


def test_a_clean_stop_saves_the_primed_prefix_if_its_state_went_missing(primed, copy, tmp_path):
    server = engine(copy, tmp_path, "stopping").start()
    try:
        assert engine_state(server.base_url)["restored"] is True
        assert main(["engine", "remove", "--all", "--dir", str(copy)]) == 0
        assert saved_states(copy) == []
    finally:
        server.stop()
    assert server.state_lines()[-1].startswith("saved the prefix state")
    (state,) = saved_states(copy)
    assert state.manifest["n_tokens"] == primed["tokens"] and file_problem(state) is None


def test_two_engines_priming_at_once_leave_one_whole_state(primed, tmp_path):
    folder = tmp_path / "shared"
    one = engine(folder, tmp_path, "one", restore="none").start()
    two = engine(folder, tmp_path, "two", restore="none").start()
    results = {}
    try:
        threads = [threading.Thread(target=lambda s=s: results.update({s.port: prime(
            s.base_url, PREFIX, "preamble")})) for s in (one, two)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        one.stop()
        two.stop()
    assert len(results) == 2 and all(r["source"] == "prefill" for r in results.values())
    lines = [line for s in (one, two) for line in s.state_lines() if "prefix state" in line]
    assert all(x.startswith(("saved the", "not saved: another engine holds")) for x in lines)
    (state,) = saved_states(folder)
    assert file_problem(state) is None and not list(folder.glob("*.tmp"))
    with engine(folder, tmp_path, "third", restore="none") as third:  # cold start, then prime:
        assert engine_state(third.base_url)["restored"] is False
        done = prime(third.base_url, PREFIX, "preamble")
        assert done["source"] == "restored" and done["saved"]["written"] is False  # no prefill
        assert answer(third) == primed["warm"]


def test_the_operator_commands_prime_list_and_remove(tmp_path, capsys):
    folder = tmp_path / "states"
    with engine(folder, tmp_path, "operator", restore="none") as server:
        assert main(["experts", "prime", "--sections", "1", "--base-url", server.base_url]) == 0
        out = capsys.readouterr().out
        assert "operations_manual.md[:1 sections]: " in out and " prefilled in " in out
        assert out.splitlines()[1].startswith(f"saved: {folder}")
        assert main(["experts", "prime", "--sections", "1", "--base-url", server.base_url]) == 0
        assert "already in the engine's cache" in capsys.readouterr().out
    (state,) = saved_states(folder)
    assert main(["engine", "states", "--dir", str(folder)]) == 0
    out = capsys.readouterr().out
    label = f"{state.key}  operations_manual.md[:1 sections]  {state.manifest['n_tokens']} tokens"
    assert label in out
    assert "valid for SmolLM2-135M-Instruct.Q4_0.gguf" in out and "STALE" not in out
    assert main(["engine", "remove", state.key[:6], "--dir", str(folder)]) == 0
    assert "removed 1 state(s)" in capsys.readouterr().out and saved_states(folder) == []


def test_the_engine_primes_any_prefix_it_is_given_and_writes_it_0600(tmp_path, capsys):
    """Not the experts' text: a prefix of the caller's own, from a file (issue 34 item 9)."""
    folder = tmp_path / "states"
    prefix = tmp_path / "support_bot.txt"
    prefix.write_text("You are the support bot of a bicycle shop. Answer in one sentence.\n")
    old = os.umask(0o022)  # the default umask: before issue 33, states were written 0644
    try:
        with engine(folder, tmp_path, "general", restore="none") as server:
            argv = ["engine", "prime", "--file", str(prefix), "--base-url", server.base_url]
            assert main(argv) == 0
    finally:
        os.umask(old)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("support_bot.txt: ") and " prefilled in " in out[0]
    (state,) = saved_states(folder)
    assert state.manifest["label"] == "support_bot.txt" and file_problem(state) is None
    modes = {p.name: stat.S_IMODE(os.lstat(p).st_mode) for p in folder.iterdir()}
    assert modes == {f"{state.key}.state": 0o600, f"{state.key}.json": 0o600}  # no lock left


def test_two_engines_saving_and_evicting_at_once_never_fail_a_prime(tmp_path, monkeypatch):
    """Issue 33 item 7: each engine's eviction meets the other's temporaries and fresh states."""
    monkeypatch.setenv("AGENTSTATE_ENGINE_STATE_BUDGET_MB", "0")  # each save evicts the rest
    folder = tmp_path / "shared"
    servers = [engine(folder, tmp_path, f"busy-{n}", restore="none").start() for n in (1, 2)]
    done, failed = [], []

    def run(server, who):
        for i in range(6):
            text = f"You are assistant {who}.{i} of a bicycle shop. Answer in one sentence."
            try:
                done.append(prime(server.base_url, text, f"{who}.{i}"))
            except LoopbackServerError as err:  # before: HTTP 500 after the state was written
                failed.append(str(err))

    try:
        threads = [threading.Thread(target=run, args=(s, n)) for n, s in enumerate(servers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for server in servers:
            server.stop()
    assert failed == [] and len(done) == 12
    lines = [line for s in servers for line in s.state_lines() if "prefix state" in line]
    assert all(x.startswith(("saved the", "not saved: another engine holds")) for x in lines)
    left = saved_states(folder)
    assert left and all(file_problem(s) is None for s in left)
    assert sorted(p.suffix for p in folder.iterdir()) == sorted([".json", ".state"] * len(left))
