"""Issue 26: a saved prefix state is restored only where it is right; else the engine starts cold.

In-process llama.cpp contexts (the same ``PrefixStore`` the engine process
uses, without HTTP, so each case costs a model load and a short prefill):
a state saved by the Q4_0 engine is restored by an identical one and its
greedy answer equals the warm one; every invalidating change (another model
file, another KV type, an ``n_ctx`` too small, other prefix bytes, a
truncated or corrupt file) leaves the cache empty and the answer that of a
cold engine. The prefix is the manual's preamble (about 240 tokens), so the
tests stay quick. Marked ``engine``.
"""

import contextlib
import io
import json
import shutil
import subprocess
import sys

import pytest

from agentstate.engine import engine_installed
from agentstate.engine.state_files import saved_states
from tests.test_engine_state_hostile import change_in_place

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not engine_installed(), reason="engine not installed: run `make engine`"),
]

if engine_installed():
    import llama_cpp
    import numpy as np

    from agentstate.engine import default_model, locate_model
    from agentstate.engine.model import file_sha256, quiet_fd2
    from agentstate.engine.state_cache import (
        PrefixStore,
        chat_tokens,
        forget_all,
        held_tokens,
        keep_only,
        prefix_sha256,
        shared_prefix_tokens,
    )
    from agentstate.experts import EXPERTS, Manual, load_manual, system_prefix

    _FULL = load_manual()
    PREAMBLE = Manual(name="preamble", data=_FULL.data[: _FULL.data.index(b"\n## ") + 1])
    PREFIX = system_prefix(PREAMBLE).text
    PREAMBLE_SHA = system_prefix(PREAMBLE).sha256
    QUERY = "The overnight batch outage: what must we report to the regulator?"
    BUDGET = 10**9


def make_llama(model=None, n_ctx=1024, **settings):
    with quiet_fd2(), contextlib.redirect_stderr(io.StringIO()):
        return llama_cpp.Llama(str(model or default_model()), n_ctx=n_ctx, n_threads=1,
                               n_threads_batch=1, verbose=False, **settings)  # fmt: skip


def expert_messages(prefix=None):
    return [
        {"role": "system", "content": prefix or PREFIX},
        {"role": "system", "content": EXPERTS["compliance_auditor"].system_text()},
        {"role": "user", "content": QUERY},
    ]


def answer(llama, prefix=None):
    """The greedy reply of one expert call (16 tokens)."""
    reply = llama.create_chat_completion(expert_messages(prefix), max_tokens=16, temperature=0.0)
    return reply["choices"][0]["message"]["content"]


def next_logits(llama):
    """The logits of an expert call's first reply token, reusing what the cache holds."""
    tokens = chat_tokens(llama, expert_messages())
    held = held_tokens(llama, tokens)
    keep_only(llama, held)
    llama.eval(tokens[held:])
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama.ctx, -1),
                                 shape=(llama.n_vocab(),)).copy()  # fmt: skip


def store(llama, folder, model=None):
    return PrefixStore(llama, model or default_model(), folder, BUDGET)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A folder with the preamble's state saved by the Q4_0 engine, and its warm answer."""
    folder = tmp_path_factory.mktemp("states")
    llama = make_llama()
    tokens = shared_prefix_tokens(llama, PREFIX)
    llama.eval(tokens)
    outcome = store(llama, folder).save(prefix_sha256(PREFIX), tokens, "preamble")
    assert outcome.ok, outcome.line
    warm = answer(llama)
    llama.close()
    return {"folder": folder, "tokens": tokens, "warm": warm, "state": outcome.state}


@pytest.fixture
def copy(saved, tmp_path):
    """A private copy of the saved folder, free to damage."""
    return shutil.copytree(saved["folder"], tmp_path / "states")


def cold(outcome, llama):
    """The restore was refused and left the KV cache empty."""
    return not outcome.ok and outcome.line.startswith("cold prefill: ") and llama.n_tokens == 0


def test_the_prefix_is_what_the_experts_and_the_prime_call_share(saved):
    llama = make_llama()
    tokens, n = saved["tokens"], len(saved["tokens"])
    expert = chat_tokens(llama, expert_messages())
    primer = chat_tokens(llama, [{"role": "system", "content": PREFIX},
                                 {"role": "user", "content": "Reply with OK."}])  # fmt: skip
    assert expert[:n] == primer[:n] == tokens and expert[n] != primer[n] and 200 < n < 260
    manifest = saved["state"].manifest
    assert manifest["tokens"] == tokens and manifest["prefix_sha256"] == PREAMBLE_SHA
    assert manifest["valid_for"]["model_sha256"] == file_sha256(default_model())
    llama.close()


def test_a_restored_state_answers_like_the_warm_engine(saved, copy):
    llama = make_llama()
    outcome = store(llama, copy).restore()
    assert outcome.ok and outcome.line.startswith("restored the prefix state"), outcome.line
    assert held_tokens(llama, saved["tokens"]) == len(saved["tokens"]) == llama.n_tokens
    assert answer(llama) == saved["warm"]
    llama.close()


def test_another_model_file_is_turned_away_by_the_hash_check(saved, copy):
    shipped = make_llama(locate_model())
    outcome = store(shipped, copy, locate_model()).restore()
    assert cold(outcome, shipped) and "another model file" in outcome.line, outcome.line
    cold_logits = next_logits(shipped)
    # what llama.cpp alone does with that file: it loads it, and the model reads other numbers
    out = (llama_cpp.llama_token * 4096)()
    count = llama_cpp.ctypes.c_size_t(0)
    fresh = make_llama(locate_model())
    read = llama_cpp.llama_state_seq_load_file(
        fresh.ctx, str(saved["state"].state_path).encode(), 0, out, 4096,
        llama_cpp.ctypes.byref(count),
    )  # fmt: skip
    assert read > 0 and count.value == len(saved["tokens"])  # accepted silently
    fresh.input_ids[: count.value] = list(out[: count.value])
    fresh.n_tokens = count.value
    wrong = next_logits(fresh)
    assert np.abs(wrong - cold_logits).max() > 0.5  # not what the shipped model computes
    again = make_llama(locate_model())
    assert np.abs(next_logits(again) - cold_logits).max() < 1e-3  # a cold rerun agrees with it
    for llama in (shipped, fresh, again):
        llama.close()


def test_another_kv_type_falls_back_cold_whether_the_manifest_or_llama_cpp_refuses(saved, copy):
    f32 = make_llama(type_k=0, type_v=0)
    outcome = store(f32, copy).restore()
    assert cold(outcome, f32) and "type_k 1 != 0" in outcome.line, outcome.line
    # a manifest that claims the new KV type: llama.cpp itself refuses the file
    manifest_path = next(copy.glob("*.json"))
    manifest = json.loads(manifest_path.read_text())
    manifest["valid_for"] |= {"type_k": 0, "type_v": 0}
    manifest_path.write_text(json.dumps(manifest))
    outcome = store(f32, copy).restore()
    assert cold(outcome, f32) and "refused by llama.cpp" in outcome.line, outcome.line
    assert answer(f32) == answer(make_llama(type_k=0, type_v=0))  # what a cold engine says
    f32.close()


def test_flash_attention_on_is_refused(saved, copy):
    flash = make_llama(flash_attn=True)
    outcome = store(flash, copy).restore()
    assert cold(outcome, flash) and "flash_attn False != True" in outcome.line, outcome.line
    flash.close()


def test_an_n_ctx_smaller_than_the_state_falls_back_cold(saved, copy):
    """llama.cpp pads its cache to 256 cells and would load 240 tokens into n_ctx 200."""
    small = make_llama(n_ctx=200)
    outcome = store(small, copy).restore()
    assert cold(outcome, small) and "more than n_ctx 200" in outcome.line, outcome.line
    larger = make_llama(n_ctx=2048)  # a larger context is fine (the probe: accepted, correct)
    assert store(larger, copy).restore().ok and answer(larger) == saved["warm"]
    small.close()
    larger.close()


def test_other_prefix_bytes_never_use_the_state(saved, copy):
    changed = "W" + PREFIX[1:]  # "You work ..." -> "Wou work ...": one byte
    assert changed != PREFIX
    llama = make_llama()
    prefix_store = store(llama, copy)
    tokens = shared_prefix_tokens(llama, changed)
    assert prefix_store.candidates(prefix_sha256(changed)) == ([], [])  # nothing saved for it
    # a manifest renamed to the changed prefix, still holding the old tokens: refused
    manifest_path = next(copy.glob("*.json"))
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "prefix_sha256": prefix_sha256(changed)}))
    (state,) = prefix_store.candidates(prefix_sha256(changed))[0]
    outcome = prefix_store.load(state, tokens)
    assert not outcome.ok and "other tokens than this prefix's" in outcome.line
    assert llama.n_tokens == 0
    llama.close()


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_a_truncated_or_corrupt_state_file_falls_back_cold(saved, copy, damage):
    path = next(copy.glob("*.state"))
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # same size, zeroed KV bytes
    path.write_bytes(bytes(data))
    llama = make_llama()
    outcome = store(llama, copy).restore()
    assert cold(outcome, llama) and damage in outcome.line, outcome.line
    assert answer(llama) == saved["warm"]  # the cold answer of this engine: right, not the file's
    llama.close()


def test_a_damaged_manifest_is_ignored_not_trusted(saved, copy):
    manifest_path = next(copy.glob("*.json"))
    manifest = json.loads(manifest_path.read_text())
    manifest["tokens"] = manifest["tokens"][:-1] + [manifest["tokens"][-1] + 1]
    manifest_path.write_text(json.dumps(manifest))
    llama = make_llama()
    outcome = store(llama, copy).restore()
    assert cold(outcome, llama) and "manifest" in outcome.line and "damaged" in outcome.line
    manifest_path.write_text("{not json")
    assert saved_states(copy) == []
    assert store(llama, copy).restore().line.startswith("cold prefill: no saved prefix state")
    llama.close()


HOLD_LOCK = """
import fcntl, sys, time
handle = open(sys.argv[1], "a+b")
fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
"""


def test_a_state_another_engine_is_writing_is_not_written_twice(saved, tmp_path):
    llama = make_llama()
    tokens = saved["tokens"]
    llama.eval(tokens)
    prefix_store = store(llama, tmp_path)
    key = prefix_store.key(prefix_sha256(PREFIX))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path / f"{key}.lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        outcome = prefix_store.save(prefix_sha256(PREFIX), tokens)
        assert not outcome.ok and "another engine holds the lock" in outcome.line
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"{key}.lock"]  # nothing written
    finally:
        holder.communicate("\n")
    outcome = prefix_store.save(prefix_sha256(PREFIX), tokens)
    assert outcome.ok and outcome.state.size == saved["state"].size
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".state"]  # lock: gone
    llama.close()


def test_a_state_changed_in_place_with_its_mtime_put_back_is_refused_by_the_same_engine(
    saved, copy
):
    """Issue 33 item 13: the engine hashed the file at its first restore; a second must too."""
    llama = make_llama()
    prefix_store = store(llama, copy)
    assert prefix_store.restore().ok  # hashed once
    forget_all(llama)
    change_in_place(next(copy.glob("*.state")))  # same size, same mtime, other KV bytes
    outcome = prefix_store.restore()
    assert cold(outcome, llama) and "corrupt" in outcome.line, outcome.line
    llama.close()


def test_llama_cpp_state_files_start_as_eviction_expects(saved):
    """An orphan ``KEY.state`` is removed only when it starts with llama.cpp's header."""
    from agentstate.engine.state_files import STATE_MAGIC

    assert saved["state"].state_path.read_bytes()[:4] == STATE_MAGIC
