"""agentstate.servers.loopback: a served process stops at once on Ctrl-C or SIGTERM."""

import os
import shlex
import signal
import socket
import subprocess
import sys

import pytest

from agentstate.servers.loopback import (
    LoopbackProcess,
    LoopbackServerError,
    _family,
    listens_on,
    port_open,
    serve_until_interrupted,
    wait_gone,
)

SERVE = """
import subprocess, sys
from agentstate.servers.loopback import serve_until_interrupted
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
asked = []


def running():  # first asked inside the wait, once its signal handlers are in place
    if not asked:
        asked.append(print("ready", flush=True))
    return child.poll() is None


interrupted = serve_until_interrupted(running, poll=0.01)
child.terminate()
child.wait(timeout=5)  # a Popen lock left held by the signal would make this time out
print("stopped", interrupted, flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_ends_the_wait_and_leaves_the_process_usable(sig):
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "ready\n"  # printed inside the wait: no sleep to outlast
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (0, "stopped True\n", "")


def test_the_wait_ends_by_itself_when_the_server_stops_and_handlers_are_restored():
    before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    states = iter([True, True, False])
    assert serve_until_interrupted(lambda: next(states), poll=0.001) is False
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == before


# --- a port another process takes between free_port() and the child's bind ---

LISTEN = """
import socket, sys, time
sock = socket.socket()
try:
    sock.bind(("127.0.0.1", int(sys.argv[1])))
except OSError as exc:
    print(f"error: {exc}", flush=True)  # as the memory server's preflight does
    sys.exit(2)
sock.listen()
print("listening", flush=True)
time.sleep(600)
"""


class Listener(LoopbackProcess):
    """The smallest loopback server: binds its port and waits (slow to start, like a real one)."""

    name = "listener"

    def command(self):
        return [sys.executable, "-c", "import time; time.sleep(0.5)\n" + LISTEN, str(self.port)]


@pytest.fixture
def squatter():
    """Another process's socket, listening on a port before our child can bind it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def test_a_port_another_process_answers_on_is_not_taken_for_the_childs(squatter):
    """Readiness is the child's own socket: with the chosen port lost to another listener, the
    child starts on a new free port instead of the start returning on the other's answer."""
    listener = Listener(log_path=None)
    listener.port = squatter  # what free_port() said was free a moment ago
    with listener:
        assert listener.port != squatter
        assert listens_on(listener.pid, listener.port)
        assert not listens_on(listener.pid, squatter)


def test_a_port_the_caller_chose_is_refused_when_taken(squatter):
    with pytest.raises(LoopbackServerError, match=f"port {squatter} .* already in use"):
        Listener(port=squatter).start()


def test_a_child_that_loses_the_race_after_the_check_is_restarted_on_a_new_port():
    """The race itself: the port is free at the check, taken before the child binds it."""
    sock = socket.socket()
    taken: list[int] = []

    class Late(Listener):
        def command(self):
            if not taken:  # first start: take the port right after the check, before the bind
                sock.bind(("127.0.0.1", self.port))
                sock.listen()
                taken.append(self.port)
            return super().command()

    try:
        with Late() as late:
            assert taken and late.port != taken[0]
            assert listens_on(late.pid, late.port)
    finally:
        sock.close()


class Wrapped(Listener):
    """A server started through a shell that stays its parent (a launcher, a wrapper script)."""

    name = "wrapped listener"

    def command(self):
        inner = shlex.join(super().command())
        return ["sh", "-c", f"{inner}; exit $?"]  # not the shell's last command: it forks


def _end(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_server_a_wrapper_started_counts_as_the_childs_own_and_ends_with_it(how):
    wrapped = Wrapped().start(timeout=15)
    family = _family(wrapped.pid)
    try:
        assert len(family) == 2  # the shell and the server it started
        assert listens_on(wrapped.pid, wrapped.port)
        getattr(wrapped, how)()
        server = (family - {wrapped.pid}).pop()
        assert wait_gone(server, 5), "the wrapper's server outlived the stop"
        assert not port_open(wrapped.port)
    finally:
        _end(family - {wrapped.pid})  # never leave a listener behind, even on failure
