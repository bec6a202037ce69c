"""Issue 25 item 5: the memory service touches a file only when it is its own.

``lstat`` first: a symlink, a FIFO, a device or anything but a regular file
is refused in one line before it is opened or chmodded (the store ``--db``,
its side files, the ``<db>.log``, ``--token-file``, the worker's
``--checkpoints``). The log is 0600 like the store; a token file is at most
4096 bytes. Tests run as root here, so no test ever lets the code near
``/dev/null``'s mode: device paths are checked with every call that could
open or chmod a file replaced by one that fails the test.
"""

import builtins
import os
import resource
import stat
import subprocess
import sys

import pytest

from agentstate import private_files as own_files
from agentstate.memory.service.process import ServerProcess, free_port
from agentstate.memory.service.store import MemoryInputError, MemoryStore, check_store_path
from agentstate.private_files import (
    NotOwnFileError,
    check_own_file,
    own_file,
    read_small_file,
)
from agentstate.servers.loopback import LoopbackServerError


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def serve(*args, env=None, timeout=60, memory_limit=None):
    """``agentstate memory serve ...`` as a user runs it (a hang is a failure, not a wait)."""

    def limit():  # a regression that reads /dev/zero must not eat the shared machine's memory
        if memory_limit:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    env = {k: v for k, v in (env or os.environ).items() if k != "AGENTSTATE_MEMORY_TOKEN"}
    try:
        return subprocess.run(
            [sys.executable, "-m", "agentstate.cli", "memory", "serve", *args],
            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
            env=env, preexec_fn=limit,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"`agentstate memory serve {' '.join(args)}` hung for {timeout} s")


def one_line_refusal(done, *words):
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-1500:]
    assert lines[0].startswith("agentstate memory serve: error:"), lines[0]
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def never_open(monkeypatch):
    """Every call that could open, create or chmod a file fails the test instead."""

    def refuse(name):
        def fail(*args, **kwargs):
            raise AssertionError(f"{name}{args!r} called on a path that must be refused first")

        return fail

    for name in ("open", "chmod", "fchmod", "lchmod"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse(f"os.{name}"))
    monkeypatch.setattr(builtins, "open", refuse("open"))


# --- --db: a FIFO, a symlink, a device --------------------------------------------------


def test_a_fifo_as_db_is_refused_in_one_line_and_keeps_its_mode(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo, 0o644)
    os.chmod(fifo, 0o644)
    done = serve("--db", str(fifo), "--transport", "http", "--port", str(free_port()))
    one_line_refusal(done, "FIFO", "not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and mode(fifo) == 0o644
    assert not (tmp_path / "pipe.lock").exists()


def test_a_symlink_as_db_is_refused_and_the_file_it_points_at_is_not_taken_over(tmp_path):
    target = tmp_path / "someone-elses.sqlite"
    target.write_bytes(b"")
    target.chmod(0o644)
    link = tmp_path / "memory.sqlite"
    link.symlink_to(target)
    done = serve("--db", str(link), "--transport", "http", "--port", str(free_port()))
    one_line_refusal(done, "symbolic link")
    assert mode(target) == 0o644 and target.read_bytes() == b""
    assert not (tmp_path / "memory.sqlite.lock").exists()
    with pytest.raises(MemoryInputError, match="symbolic link"):
        MemoryStore(link)
    assert mode(target) == 0o644 and target.read_bytes() == b""


def test_a_symlink_beside_the_store_is_refused_before_the_store_is_touched(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("not SQLite's")
    (tmp_path / "memory.sqlite-wal").symlink_to(target)
    with pytest.raises(MemoryInputError, match="side file .*memory.sqlite-wal is a symbolic link"):
        MemoryStore(tmp_path / "memory.sqlite")
    assert not (tmp_path / "memory.sqlite").exists() and target.read_text() == "not SQLite's"


@pytest.mark.parametrize("device", ["/dev/null", "/dev/zero"])
def test_a_device_as_db_is_refused_before_any_open_or_chmod(device, never_open):
    before = os.stat(device)
    with pytest.raises(MemoryInputError, match="character device"):
        check_store_path(device)
    with pytest.raises(MemoryInputError, match="character device"):
        MemoryStore(device)
    with pytest.raises(NotOwnFileError, match="character device"):
        own_file(device)
    after = os.stat(device)
    assert (after.st_mode, after.st_uid) == (before.st_mode, before.st_uid)


def test_the_command_line_refuses_a_device_db_before_any_open_or_chmod(never_open, capsys):
    from agentstate.memory.service.options import OneLineParser, add_serve_arguments, preflight

    parser = add_serve_arguments(OneLineParser(prog="agentstate memory serve"))
    args = parser.parse_args(["--db", "/dev/null"])
    with pytest.raises(SystemExit) as exit_:
        preflight(args, parser.error)
    assert exit_.value.code == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "--db /dev/null" in line and "character device" in line


# --- the race each open closes ----------------------------------------------------------


def test_a_symlink_that_appears_after_the_check_is_not_followed(tmp_path, monkeypatch):
    """O_NOFOLLOW: the lstat saw a regular file, then the path became a symlink."""
    target = tmp_path / "victim"
    target.write_text("x")
    target.chmod(0o644)
    path = tmp_path / "store"
    regular = os.lstat(target)
    path.symlink_to(target)
    monkeypatch.setattr(own_files, "check_own_file", lambda p, what="file": regular)
    with pytest.raises(NotOwnFileError, match="cannot open it as a file"):
        own_file(path)
    assert mode(target) == 0o644


def test_a_fifo_that_appears_after_the_check_is_neither_waited_on_nor_chmodded(
    tmp_path, monkeypatch
):
    """O_NONBLOCK and fstat: the open returns at once and the mode is never set."""
    fifo = tmp_path / "store"
    os.mkfifo(fifo, 0o644)
    os.chmod(fifo, 0o644)
    monkeypatch.setattr(own_files, "check_own_file", lambda p, what="file": None)
    with pytest.raises(NotOwnFileError):
        own_file(fifo)
    assert mode(fifo) == 0o644


def test_own_file_creates_0600_and_tightens_a_regular_file(tmp_path):
    created = own_file(tmp_path / "new")
    assert mode(created) == 0o600
    loose = tmp_path / "loose"
    loose.write_text("kept")
    loose.chmod(0o644)
    assert mode(own_file(loose)) == 0o600 and loose.read_text() == "kept"
    assert check_own_file(tmp_path / "missing") is None


# --- <db>.log -----------------------------------------------------------------------------


def test_the_server_log_is_private_like_the_store(tmp_path):
    db = tmp_path / "memory.sqlite"
    old_log = tmp_path / "old.sqlite.log"
    old_log.write_text("an earlier run\n")
    old_log.chmod(0o644)
    for store in (db, tmp_path / "old.sqlite"):
        with ServerProcess(store):
            pass
        log = store.with_name(store.name + ".log")
        assert mode(log) == 0o600, log
        assert mode(store) == 0o600, store
    assert old_log.read_text().startswith("an earlier run")  # appended to, not replaced


def test_a_symlinked_log_is_refused_and_nothing_starts(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("someone's notes\n")
    target.chmod(0o644)
    (tmp_path / "memory.sqlite.log").symlink_to(target)
    server = ServerProcess(tmp_path / "memory.sqlite")
    with pytest.raises(LoopbackServerError, match="log .* is a symbolic link"):
        server.start()
    assert server.process is None
    assert target.read_text() == "someone's notes\n" and mode(target) == 0o644
    assert not (tmp_path / "memory.sqlite").exists()


# --- --token-file -------------------------------------------------------------------------


def test_a_fifo_token_file_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo, 0o600)
    db = str(tmp_path / "m.sqlite")
    done = serve("--db", db, "--transport", "http", "--port", str(free_port()),
                 "--token-file", str(fifo), timeout=30)  # fmt: skip
    one_line_refusal(done, "--token-file", "FIFO")
    assert not (tmp_path / "m.sqlite").exists()


def test_dev_zero_as_token_file_is_refused_in_one_line(tmp_path):
    db = str(tmp_path / "m.sqlite")
    done = serve("--db", db, "--transport", "http", "--port", str(free_port()),
                 "--token-file", "/dev/zero", timeout=60, memory_limit=2 << 30)  # fmt: skip
    one_line_refusal(done, "--token-file", "character device")


def test_a_token_file_must_be_a_small_regular_file(tmp_path):
    big = tmp_path / "big"
    big.write_text("t" * 5000)
    real = tmp_path / "real-token"
    real.write_text("tok3n\n")
    link = tmp_path / "linked-token"
    link.symlink_to(real)
    db = str(tmp_path / "m.sqlite")
    http = ["--db", db, "--transport", "http", "--port", str(free_port())]
    one_line_refusal(serve(*http, "--token-file", str(big)), "larger than 4096 bytes")
    one_line_refusal(serve(*http, "--token-file", str(link)), "symbolic link")
    assert read_small_file(real) == b"tok3n\n"
    with pytest.raises(NotOwnFileError, match="larger than 4096 bytes"):
        read_small_file(big)


# --- the capture worker's --checkpoints -------------------------------------------------


def test_the_worker_refuses_a_fifo_or_a_symlink_as_its_checkpoints(tmp_path):
    fifo = tmp_path / "ck-fifo"
    os.mkfifo(fifo, 0o644)
    os.chmod(fifo, 0o644)
    target = tmp_path / "target.sqlite"
    target.write_bytes(b"")
    target.chmod(0o644)
    (tmp_path / "ck-link").symlink_to(target)
    url = f"http://127.0.0.1:{free_port()}/mcp"
    for path, word in ((fifo, "FIFO"), (tmp_path / "ck-link", "symbolic link")):
        done = subprocess.run(
            [sys.executable, "-m", "agentstate.memory.capture.worker", "--url", url,
             "--checkpoints", str(path), "--retry-for", "0"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and word in lines[0], done.stderr[-800:]
    assert mode(fifo) == 0o644 and mode(target) == 0o644
