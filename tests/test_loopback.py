"""agentstate.loopback: a served process stops at once on Ctrl-C or SIGTERM."""

import signal
import subprocess
import sys
import time

import pytest

from agentstate.loopback import serve_until_interrupted

SERVE = """
import subprocess, sys
from agentstate.loopback import serve_until_interrupted
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("ready", flush=True)
interrupted = serve_until_interrupted(lambda: child.poll() is None, poll=0.01)
child.terminate()
child.wait(timeout=5)  # a Popen lock left held by the signal would make this time out
print("stopped", interrupted, flush=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_ends_the_wait_and_leaves_the_process_usable(sig):
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.2)  # inside the loop, polling the child a hundred times a second
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (0, "stopped True\n", "")


def test_the_wait_ends_by_itself_when_the_server_stops_and_handlers_are_restored():
    before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    states = iter([True, True, False])
    assert serve_until_interrupted(lambda: next(states), poll=0.001) is False
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == before
