"""Issue 33: the states folder the engine shares with files that are not its own.

Items 2, 7, 13, 14 and 16 of its attack round, each with real files, real
FIFOs and real processes (no engine needed: states and manifests are written
as the engine writes them, with :func:`write_state` or by hand):

- eviction deletes only the engine's own states: never ``package.json``,
  ``notes.state`` or ``backup.tmp`` beside them, no lock files left behind,
  and no symlink followed (item 2);
- two processes saving and evicting at once tolerate each other (item 7);
- a state file changed in place with its mtime put back is refused (item 13);
- FIFOs and folders named ``*.json`` are skipped without being opened,
  malformed manifests reported in one line, ``remove ''`` refused (item 14);
- states, manifests and locks are 0600 whatever the umask (item 16).
"""

import json
import os
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from agentstate.cli import main
from agentstate.engine import state_files
from agentstate.engine.model import file_sha256
from agentstate.engine.state_files import enforce_budget, file_problem, saved_states, write_json
from tests.test_engine_state_files import STATE_MAGIC, dead_pid, fake_state, key

HANG = 20.0  # seconds: far more than listing a folder takes, far less than forever


def snapshot(folder):
    """Name -> bytes of every regular file in ``folder`` (and what the others are)."""
    found = {}
    for path in sorted(folder.iterdir()):
        mode = os.lstat(path).st_mode
        found[path.name] = path.read_bytes() if stat.S_ISREG(mode) else stat.S_IFMT(mode)
    return found


# --- item 2: eviction deletes only what the engine wrote ---


def test_eviction_leaves_files_that_are_not_the_engines_and_leaves_no_lock_files(tmp_path):
    folder = tmp_path / "states"
    fake_state(folder, "ours, least recently used", used="2026-11-01T00:00:00+00:00")
    fake_state(folder, "ours, newest", used="2026-11-20T00:00:00+00:00")
    theirs = {
        "package.json": b'{"name": "a project of the user"}\n',
        "notes.state": b"the user's own notes\n",
        "backup.tmp": b"a backup the user keeps\n",
        ".hidden.state.1.tmp": b"not named as the engine names its temporaries\n",
        "0123.json": b'{"key": "0123"}\n',  # a manifest-like file, not named like ours
    }
    for name, data in theirs.items():
        (folder / name).write_bytes(data)
        os.utime(folder / name, (time.time() - 86400,) * 2)  # old: a dead writer's, once
    removed = enforce_budget(folder, budget=1500)  # room for one state
    assert [s.key for s in saved_states(folder)] == [key("ours, newest")]
    assert removed == [f"{key('ours, least recently used')} (over the 0.0015 MB budget)"]
    left = snapshot(folder)
    assert {n: left.get(n) for n in theirs} == theirs  # every byte of theirs still there
    assert not [n for n in left if n.endswith(".lock")]  # no lock file left behind
    assert sorted(set(left) - set(theirs)) == sorted(
        f"{key('ours, newest')}.{ext}" for ext in ("json", "state")
    )


def test_eviction_never_follows_or_deletes_a_symlink_named_like_a_state(tmp_path):
    folder = tmp_path / "states"
    outside = tmp_path / "precious.bin"
    outside.write_bytes(b"a file outside the states folder")
    state = fake_state(folder, "linked", used="2026-11-01T00:00:00+00:00")
    state.unlink()
    state.symlink_to(outside)  # KEY.state -> a file of the user's
    fake_state(folder, "newer", used="2026-11-20T00:00:00+00:00")
    enforce_budget(folder, budget=0, keep=key("newer"))
    assert outside.read_bytes() == b"a file outside the states folder"
    assert state.is_symlink()  # not deleted either: not a regular file, so not the engine's
    assert not (folder / f"{key('linked')}.json").exists()  # its manifest was stale: removed


def test_a_folder_named_like_a_manifest_is_skipped_by_eviction(tmp_path):
    folder = tmp_path / "states"
    fake_state(folder, "ours")
    (folder / "junk.json").mkdir()
    (folder / f"{key('dir')}.json").mkdir()
    enforce_budget(folder, budget=0)  # before: IsADirectoryError
    assert (folder / "junk.json").is_dir() and (folder / f"{key('dir')}.json").is_dir()
    assert saved_states(folder) == []


# --- item 14: FIFOs never opened, malformed manifests in one line, remove '' refused ---

LIST = "from agentstate.cli import main; import sys; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("name", ["plain.json", f"{key('fifo')}.json"])
@pytest.mark.parametrize("command", ["states", "evict"])
def test_a_fifo_named_like_a_manifest_does_not_hang_listing_or_eviction(tmp_path, name, command):
    folder = tmp_path / "states"
    fake_state(folder, "ours")
    os.mkfifo(folder / name)
    code = {
        "states": f"{LIST}",
        "evict": "from agentstate.engine.state_files import enforce_budget, saved_states; "
        "import sys; from pathlib import Path; enforce_budget(Path(sys.argv[-1]), 10**9); "
        "print(len(saved_states(Path(sys.argv[-1]))))",
    }[command]
    argv = ["engine", "states", "--dir", str(folder)] if command == "states" else [str(folder)]
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=HANG)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(os.lstat(folder / name).st_mode)  # still there, never opened
    if command == "evict":
        assert done.stdout == "1\n"
        return
    lines = done.stdout.splitlines()
    assert lines[-2].startswith("1 saved prefix state(s)") and lines[-1].startswith(key("ours"))
    if name != "plain.json":  # named like ours: said in one line, not opened
        assert lines[0] == f"skipped {name}: a FIFO (named pipe), not a regular file; not opened"


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda m: m.pop("n_tokens"), "no n_tokens"),
        (lambda m: m.update(tokens="1,2,3"), "tokens is str, not list"),
        (lambda m: m.update(n_tokens=4), "n_tokens 4 but 3 token ids"),
        (lambda m: m.update(key="0" * 16), "its key '0000000000000000' is not its file name's"),
    ],
)
def test_a_malformed_manifest_is_reported_in_one_line(tmp_path, capsys, edit, why):
    folder = tmp_path / "states"
    fake_state(folder, "good")
    fake_state(folder, "bad")
    path = folder / f"{key('bad')}.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    assert main(["engine", "states", "--dir", str(folder)]) == 0  # before: KeyError traceback
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"skipped {key('bad')}.json: not a manifest the engine wrote ({why})"
    assert out[1].startswith("1 saved prefix state(s)") and out[2].startswith(key("good"))
    assert main(["engine", "states", "--dir", str(folder), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["key"] for r in listed["states"]] == [key("good")] and len(listed["skipped"]) == 1
    enforce_budget(folder, budget=0)
    assert path.exists()  # not the engine's as far as it can tell: left alone


def test_remove_of_an_empty_key_is_refused_and_removes_nothing(tmp_path, capsys):
    folder = tmp_path / "states"
    fake_state(folder, "the only state")
    assert main(["engine", "remove", "", "--dir", str(folder)]) == 2
    out = capsys.readouterr().out
    assert out == ("error: '' is not the start of a key (1 to 16 hex digits, as `agentstate "
                   "engine states` lists them); nothing removed\n")  # fmt: skip
    assert [s.key for s in saved_states(folder)] == [key("the only state")]


# --- item 13: a state changed in place, its mtime put back ---


def change_in_place(path):
    """Flip bytes in the middle of ``path`` (same size), then put its times back."""
    before = os.stat(path)
    time.sleep(0.05)  # past the clock tick the file's times were last set in
    with open(path, "r+b") as handle:
        handle.seek(before.st_size // 2)
        data = handle.read(8)
        handle.seek(before.st_size // 2)
        handle.write(bytes(b ^ 0xFF for b in data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_a_state_changed_in_place_with_its_mtime_put_back_is_refused(tmp_path):
    folder = tmp_path / "states"
    path = fake_state(folder, "ours", size=100_000)
    (state,) = saved_states(folder)
    assert file_problem(state) is None  # hashed once, as a restore does
    change_in_place(path)
    assert file_problem(state) == (
        f"the state file {path} is corrupt (its sha256 differs from the manifest's)"
    )


def test_the_hash_cache_sees_a_file_changed_in_place_with_its_mtime_put_back(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(os.urandom(100_000))
    first = file_sha256(path)
    assert file_sha256(path) == first
    change_in_place(path)
    assert file_sha256(path) != first


# --- item 16: 0600 whatever the umask ---


@pytest.fixture(params=[0o000, 0o022, 0o077])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def llama_like_fill(tmp):
    """What llama.cpp does with the temporary's name: fopen(name, "wb") and write."""
    with open(tmp, "wb") as handle:
        return handle.write(b"qsgg" + os.urandom(5000))


def test_manifests_are_written_0600_whatever_the_umask(tmp_path, umask):
    path = tmp_path / f"{key('x')}.json"
    write_json(path, {"tokens": [1, 2, 3]})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_states_and_manifests_are_written_0600_whatever_the_umask(tmp_path, umask):
    folder = tmp_path / "states"
    done = state_files.write_state(folder, key("x"), llama_like_fill, lambda tmp: {"key": key("x")})
    modes = {p.name: stat.S_IMODE(os.stat(p).st_mode) for p in folder.iterdir()}
    assert modes == {f"{key('x')}.state": 0o600, f"{key('x')}.json": 0o600}
    assert done.manifest == {"key": key("x")}
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700 & ~umask  # a folder it created


# --- item 7: two processes saving and evicting at once ---

# The engine's save as the releases before and after issue 33 both do it on disk: under the
# key's lock, a temporary named as the engine names it, renamed into place, and a manifest;
# then the budget (a busy lock skips the save, as the engine does). Two of these run at once,
# on keys of their own, on one folder.
SAVER = textwrap.dedent(
    """
    import hashlib, json, os, sys
    from pathlib import Path
    from agentstate.engine.state_files import (
        StateLocked, enforce_budget, locked, temporary, write_json,
    )

    folder, who, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    model = folder.parent / "model.gguf"
    valid = {"model_sha256": hashlib.sha256(model.read_bytes()).hexdigest()}
    for i in range(rounds):
        key = hashlib.sha256(f"{who} {i % 3}".encode()).hexdigest()[:16]
        data = b"qsgg" + os.urandom(20_000)
        try:
            with locked(folder, key, exclusive=True):
                tmp = temporary(folder / f"{key}.state")
                tmp.write_bytes(data)
                manifest = {"format": 1, "key": key, "prefix_sha256": "ab" * 32,
                            "n_tokens": 1, "tokens": [1], "tokens_sha256": "x",
                            "state_bytes": len(data),
                            "state_sha256": hashlib.sha256(data).hexdigest(),
                            "valid_for": valid, "model_path": str(model),
                            "saved_at": f"2026-11-24T10:{i // 60 % 60:02d}:{i % 60:02d}+00:00"}
                tmp.replace(folder / f"{key}.state")
                write_json(folder / f"{key}.json", manifest)
        except StateLocked:
            pass
        enforce_budget(folder, 60_000, keep=key)
    print("done", flush=True)
    """
)


def run_at_once(script, folder, rounds, n=2):
    processes = [
        subprocess.Popen([sys.executable, "-c", script, str(folder), f"saver {i}", str(rounds)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(n)
    ]  # fmt: skip
    outcomes = [p.communicate(timeout=300) for p in processes]
    return [(p.returncode, out, err) for p, (out, err) in zip(processes, outcomes, strict=True)]


def test_two_processes_saving_and_evicting_at_once_tolerate_each_other(tmp_path):
    folder = tmp_path / "states"
    folder.mkdir()
    (tmp_path / "model.gguf").write_bytes(b"GGUF model bytes")
    outcomes = run_at_once(SAVER, folder, rounds=300)
    for code, out, err in outcomes:  # before: FileNotFoundError on the other's temporary
        assert (code, out) == (0, "done\n"), err.strip().splitlines()[-1:]
    left = saved_states(folder)
    assert left and all(file_problem(s) is None for s in left)
    assert sum(s.size for s in left) <= 60_000 + 20_004  # the budget, and the one just saved
    assert sorted(p.suffix for p in folder.iterdir()) == sorted([".json", ".state"] * len(left))


ENGINE_SAVER = textwrap.dedent(
    """
    import hashlib, os, sys
    from pathlib import Path
    from agentstate.engine.state_files import StateLocked, enforce_budget, write_state

    folder, who, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    model = folder.parent / "model.gguf"
    valid = {"model_sha256": hashlib.sha256(model.read_bytes()).hexdigest()}

    def fill(tmp):
        with open(tmp, "wb") as handle:  # as llama.cpp does
            return handle.write(b"qsgg" + os.urandom(20_000))

    def describe(tmp, key, i):
        data = tmp.read_bytes()
        return {"format": 1, "key": key, "prefix_sha256": "ab" * 32, "n_tokens": 1,
                "tokens": [1], "tokens_sha256": "x", "state_bytes": len(data),
                "state_sha256": hashlib.sha256(data).hexdigest(), "valid_for": valid,
                "saved_at": f"2026-11-24T10:{i // 60 % 60:02d}:{i % 60:02d}+00:00",
                "model_path": str(model)}

    for i in range(rounds):
        key = hashlib.sha256(f"{i % 4}".encode()).hexdigest()[:16]  # the same keys for both
        try:
            write_state(folder, key, fill, lambda tmp: describe(tmp, key, i))
        except StateLocked:
            pass  # the other one writes this prefix now
        enforce_budget(folder, 60_000, keep=key)
    print("done", flush=True)
    """
)


def test_two_engines_saving_the_same_keys_with_the_engines_write_path(tmp_path):
    folder = tmp_path / "states"
    folder.mkdir()
    (tmp_path / "model.gguf").write_bytes(b"GGUF model bytes")
    for code, out, err in run_at_once(ENGINE_SAVER, folder, rounds=300):
        assert (code, out) == (0, "done\n"), err.strip().splitlines()[-1:]
    left = saved_states(folder)
    assert left and all(file_problem(s) is None for s in left)
    assert sorted(p.suffix for p in folder.iterdir()) == sorted([".json", ".state"] * len(left))


# --- issue 40 item 10: eviction deletes only files it can prove are its own ---


def manifest_of(folder, name):
    """The manifest bytes the engine writes for ``name``'s state (a temporary's contents)."""
    fake_state(folder, name)
    manifest = (folder / f"{key(name)}.json").read_bytes()
    for ext in ("json", "state"):
        (folder / f"{key(name)}.{ext}").unlink()
    return manifest


def test_eviction_leaves_a_lock_file_that_holds_bytes(tmp_path):
    folder = tmp_path / "states"
    fake_state(folder, "kept")
    theirs = {
        f"{key('a user file')}.lock": b"pid 4242, a tool of the user\n",  # no state of its key
        f"{key('kept')}.lock": b"the user's bytes beside a state\n",
    }
    for name, data in theirs.items():
        (folder / name).write_bytes(data)
    assert state_files.remove_orphans(folder) == []
    enforce_budget(folder, budget=0)  # over budget: the state would go, but its lock is not ours
    left = snapshot(folder)
    assert {n: left.get(n) for n in theirs} == theirs
    assert [s.key for s in saved_states(folder)] == [key("kept")]
    with pytest.raises(state_files.StateLocked, match="not empty: not a lock file the engine"):
        with state_files.locked(folder, key("kept"), exclusive=True):
            pass


def test_a_lock_file_written_into_while_held_is_not_deleted_on_release(tmp_path):
    folder = tmp_path / "states"
    lock = folder / f"{key('x')}.lock"
    with state_files.locked(folder, key("x"), exclusive=True):
        lock.write_bytes(b"someone else's now\n")
    assert lock.read_bytes() == b"someone else's now\n"


def test_eviction_leaves_temporaries_it_cannot_prove_are_its_own(tmp_path):
    folder = tmp_path / "states"
    folder.mkdir()
    gone = dead_pid()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = {  # named as the engine names temporaries, but not provably its own
            f".{key('a')}.json.{gone}.tmp": b"an editor's swap file\n",  # not a manifest
            f".{key('b')}.json.agentstate-{gone}.tmp": manifest_of(folder, "another key"),
            f".{key('c')}.state.agentstate-{gone}.tmp": b"GGUF not a state\n",
            f".{key('d')}.state.agentstate-{sleeper.pid}.tmp": STATE_MAGIC + b"its writer runs",
            f".{key('e')}.json.{sleeper.pid}.tmp": manifest_of(folder, "e"),
            f".{key('f')}.state.agentstate-{gone}.tmp": b"",  # empty: nothing to read as ours
        }
        for name, data in theirs.items():
            (folder / name).write_bytes(data)
        assert enforce_budget(folder, budget=0) == []
        assert snapshot(folder) == theirs
    finally:
        sleeper.kill()
        sleeper.wait()


def test_eviction_removes_the_temporaries_a_dead_writer_left(tmp_path):
    folder = tmp_path / "states"
    folder.mkdir()
    gone = dead_pid()
    ours = {
        f".{key('a')}.state.agentstate-{gone}.tmp": STATE_MAGIC + b"half a state",
        f".{key('b')}.json.agentstate-{gone}.tmp": manifest_of(folder, "b"),
        f".{key('c')}.state.{gone}.tmp": STATE_MAGIC + b"named as before issue 33",
        f"{key('d')}.lock": b"",  # nobody holds it
    }
    for name, data in ours.items():
        (folder / name).write_bytes(data)
    removed = enforce_budget(folder, budget=0)
    assert sorted(removed) == sorted(f"orphan {n}" for n in ours if n.endswith(".tmp"))
    assert snapshot(folder) == {}


def test_a_file_at_the_writers_own_temporary_name_is_left_and_the_write_fails(tmp_path):
    folder = tmp_path / "states"
    folder.mkdir()
    k = key("mine")
    theirs = folder / f".{k}.state.agentstate-{os.getpid()}.tmp"
    theirs.write_bytes(b"not a state\n")

    def fill(tmp):
        raise AssertionError("never reached")

    with pytest.raises(OSError, match="not a temporary the engine wrote; left alone"):
        state_files.write_state(folder, k, fill, lambda tmp: {})
    assert theirs.read_bytes() == b"not a state\n"
    assert sorted(p.name for p in folder.iterdir()) == [theirs.name]  # no lock file left
