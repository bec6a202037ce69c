"""Issue 26: the saved-state folder without llama.cpp: manifests, locks, budget, the CLI.

Manifests and state files are written here by hand (no engine needed): the
folder lists the most recently used first; the disk budget removes stale
states, orphans and then the least recently used, never the state just
saved nor one another process holds the lock of; ``agentstate engine
states|remove`` list and remove them and refuse bad input in one line.
"""

import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

from agentstate.cli import main
from agentstate.engine import state_files
from agentstate.engine.model import file_sha256
from agentstate.engine.state_files import (
    FORMAT,
    budget_bytes,
    enforce_budget,
    remove_orphans,
    remove_state,
    saved_states,
    stale_reason,
    tokens_sha256,
)

KEY = re.compile(r"[0-9a-f]{16}")  # state keys: 16 hex digits
STATE_MAGIC = b"qsgg"  # how llama.cpp's sequence state files start


def test_the_helpers_name_files_as_the_engine_does():
    assert state_files.KEY.pattern == KEY.pattern and state_files.STATE_MAGIC == STATE_MAGIC


def key(name):
    """A state key (16 hex digits) for a readable name; a key is kept as it is."""
    return name if KEY.fullmatch(name) else hashlib.sha256(name.encode()).hexdigest()[:16]


def fake_state(folder, name, *, size=1000, used="2026-11-24T10:00:00+00:00", model=None, **extra):
    """A state file of ``size`` bytes and its manifest, as the engine writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    key_ = key(name)
    state = folder / f"{key_}.state"
    state.write_bytes(STATE_MAGIC + os.urandom(size - len(STATE_MAGIC)))
    model = model or folder.parent / "model.gguf"
    if not model.exists():
        model.write_bytes(b"GGUF model bytes")
    tokens = [1, 2, 3]
    manifest = {
        "format": FORMAT, "key": key_, "label": f"label {name}", "prefix_sha256": "ab" * 32,
        "n_tokens": 3, "tokens": tokens, "tokens_sha256": tokens_sha256(tokens),
        "state_bytes": size, "state_sha256": file_sha256(state), "n_ctx": 8192,
        "model_path": str(model), "model_file": model.name,
        "valid_for": {"model_sha256": file_sha256(model), "llama_cpp_python": "0.3.36",
                      "llama_cpp": "ggml 0.25.3 (x)", "type_k": 1, "type_v": 1,
                      "flash_attn": False},
        "saved_at": used, "used_at": used, **extra,
    }  # fmt: skip
    (folder / f"{key_}.json").write_text(json.dumps(manifest))
    return state


HOLD_LOCK = """
import fcntl, sys
handle = open(sys.argv[1], "a+b")
fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
"""


def hold_lock(path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout.readline().strip() == "locked"
    return holder


def dead_pid():
    """The pid of a process that has exited and been reaped (gone, as a crashed writer's)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_states_are_listed_most_recently_used_first(tmp_path):
    folder = tmp_path / "states"
    fake_state(folder, "old", used="2026-11-01T00:00:00+00:00")
    fake_state(folder, "new", used="2026-11-20T00:00:00+00:00")
    fake_state(folder, "mid", used="2026-11-10T00:00:00+00:00")
    (folder / f"{key('broken')}.json").write_text("{not json")
    assert [s.key for s in saved_states(folder)] == [key("new"), key("mid"), key("old")]
    assert saved_states(tmp_path / "missing") == []


def test_the_budget_removes_the_least_recently_used_but_never_the_one_just_saved(tmp_path):
    folder = tmp_path / "states"
    for day, name in enumerate(["a", "b", "c", "d"], start=1):
        fake_state(folder, name, size=1000, used=f"2026-11-0{day}T00:00:00+00:00")
    removed = enforce_budget(folder, budget=2500, keep=key("a"))
    assert [s.key for s in saved_states(folder)] == [key("d"), key("a")]  # b and c went
    assert [line.split()[0] for line in removed] == [key("b"), key("c")]
    assert "over the 0.0025 MB budget" in removed[0]
    left = sorted(p.name for p in folder.iterdir())  # no lock file left behind
    assert left == sorted(f"{key(n)}.{ext}" for n in "ad" for ext in ("json", "state"))


def test_stale_states_and_orphans_go_first(tmp_path):
    folder = tmp_path / "states"
    model = tmp_path / "other.gguf"
    model.write_bytes(b"one model")
    fake_state(folder, "changed", model=model)
    model.write_bytes(b"the same path, another model")
    fake_state(folder, "gone", model=tmp_path / "gone.gguf")
    (tmp_path / "gone.gguf").unlink()
    fake_state(folder, "good")
    fake_state(folder, "oldversion")
    manifest_path = folder / f"{key('oldversion')}.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["valid_for"]["llama_cpp_python"] = "0.3.1"
    manifest_path.write_text(json.dumps(manifest))
    lonely = folder / f"{key('lonely')}.state"  # an older engine died before its manifest
    lonely.write_bytes(STATE_MAGIC + b"no manifest")
    writing = folder / f".{key('writing')}.state.agentstate-{dead_pid()}.tmp"
    dead = folder / f".{key('dead')}.state.agentstate-{dead_pid()}.tmp"
    writing.write_bytes(STATE_MAGIC + b"being written")
    dead.write_bytes(STATE_MAGIC + b"its writer died")
    leftover = folder / f"{key('crashed')}.lock"  # an older engine's lock files stayed
    leftover.write_bytes(b"")
    versions = {"llama_cpp_python": "0.3.36", "llama_cpp": "ggml 0.25.3 (x)"}
    state = {s.key: s for s in saved_states(folder)}
    assert "has changed" in stale_reason(state[key("changed")])
    assert "is gone" in stale_reason(state[key("gone")])
    assert "0.3.1" in stale_reason(state[key("oldversion")], versions)
    assert stale_reason(state[key("good")], versions) is None
    writer = hold_lock(folder / f"{key('writing')}.lock")  # its writer holds the key's lock
    try:
        removed = enforce_budget(folder, budget=10**9, versions=versions)
    finally:
        writer.communicate("\n")
    assert [s.key for s in saved_states(folder)] == [key("good")]
    assert len(removed) == 5 and writing.exists() and not dead.exists()
    assert not lonely.exists() and not leftover.exists()


def test_a_state_another_process_holds_is_neither_removed_nor_counted_as_orphan(tmp_path):
    folder = tmp_path / "states"
    fake_state(folder, "busy")
    writing = folder / f"{key('writing')}.state"
    writing.write_bytes(STATE_MAGIC + b"renamed into place, manifest next")
    holders = [hold_lock(folder / f"{key(n)}.lock") for n in ("busy", "writing")]
    try:
        (busy,) = saved_states(folder)
        assert remove_state(busy) is False and busy.state_path.exists()
        assert remove_orphans(folder) == [] and writing.exists()
        assert enforce_budget(folder, budget=0) == [] and busy.state_path.exists()
    finally:
        for holder in holders:
            holder.communicate("\n")
    assert remove_state(busy) is True and saved_states(folder) == []
    assert not (folder / f"{key('busy')}.lock").exists()  # the last holder deleted it


def test_cli_lists_and_removes_states(tmp_path, capsys):
    folder = tmp_path / "states"
    fake_state(folder, "1111aaaa11111111", size=2_500_000)
    fake_state(folder, "2222bbbb22222222", size=1_000_000, used="2026-11-25T00:00:00+00:00")
    assert main(["engine", "states", "--dir", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"2 saved prefix state(s) in {folder}, 3.5 MB:"
    assert out[1].startswith(
        "2222bbbb22222222  label 2222bbbb22222222  3 tokens  1.0 MB  valid for model.gguf"
    )
    assert "KV k1/v1, llama-cpp-python 0.3.36" in out[2]
    assert main(["engine", "states", "--dir", str(folder), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["key"] for r in listed["states"]] == ["2222bbbb22222222", "1111aaaa11111111"]
    assert main(["engine", "remove", "2222", "--dir", str(folder)]) == 0
    assert capsys.readouterr().out == f"removed 1 state(s) from {folder}\n"
    assert [s.key for s in saved_states(folder)] == ["1111aaaa11111111"]
    assert main(["engine", "remove", "--all", "--dir", str(folder)]) == 0
    assert main(["engine", "states", "--dir", str(folder)]) == 0
    assert capsys.readouterr().out.endswith(f"no saved prefix states in {folder}\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ffff"], "no saved state in"),
        (["zzzz"], "'zzzz' is not the start of a key"),
        (["1"], "2 saved states in"),
        ([], "name the keys to remove, or --stale, or --all"),
    ],
)
def test_cli_remove_refuses_what_it_cannot_resolve_and_removes_nothing(
    tmp_path, capsys, argv, message
):
    folder = tmp_path / "states"
    fake_state(folder, "1111aaaa11111111")
    fake_state(folder, "1111bbbb11111111")
    assert main(["engine", "remove", *argv, "--dir", str(folder)]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error: ") and message in out and out.count("\n") == 1
    assert len(saved_states(folder)) == 2


@pytest.mark.parametrize("value", ["latest", "abc", "0" * 63])
def test_a_bad_restore_choice_is_refused_in_one_line(capsys, value):
    with pytest.raises(SystemExit) as exit_:
        main(["engine", "start", "--restore", value])
    assert exit_.value.code == 2 and "--restore takes auto, none or a prefix sha256" in (
        capsys.readouterr().err
    )


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("AGENTSTATE_ENGINE_STATE_BUDGET_MB", "300")
    assert budget_bytes() == 300_000_000
    monkeypatch.setenv("AGENTSTATE_ENGINE_STATE_BUDGET_MB", "lots")
    with pytest.raises(ValueError, match="whole number of MB"):
        budget_bytes()


@pytest.mark.parametrize("command", ["engine", "experts"])
def test_prime_without_a_running_engine_says_how_to_start_one(
    tmp_path, monkeypatch, capsys, command
):
    monkeypatch.setenv("AGENTSTATE_ENGINE_STATE", str(tmp_path / "engine.json"))
    prefix = tmp_path / "prefix.txt"
    prefix.write_text("You answer questions about our runbook.\n")
    argv = ["--file", str(prefix)] if command == "engine" else ["--sections", "1"]
    assert main([command, "prime", *argv]) == 2
    out = capsys.readouterr().out
    assert out == "error: no engine is running: start one with `agentstate engine start`\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "name the prefix to prime: --file PATH"),
        (["--sections", "4"], "primed with `agentstate experts prime --sections 4`"),
        (["--file", "missing.txt"], "does not exist"),
        (["--file", "fifo.txt"], "is a FIFO (named pipe), not a regular file"),
        (["--file", "empty.txt"], "the prefix in empty.txt is empty"),
        (["--file", "latin1.txt"], "the prefix in latin1.txt is not UTF-8 text"),
    ],
)
def test_engine_prime_takes_the_prefix_it_is_given_and_refuses_bad_input_in_one_line(
    tmp_path, monkeypatch, capsys, argv, message
):
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo.txt")  # refused without being opened: nothing writes to it
    (tmp_path / "empty.txt").write_text(" \n")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    assert main(["engine", "prime", *argv]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error: ") and message in out and out.count("\n") == 1


def test_experts_prime_refuses_a_bad_chapter_count(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["experts", "prime", "--sections", "0"])
    assert exit_.value.code == 2 and "not a positive number of chapters: '0'" in (
        capsys.readouterr().err
    )
