"""How ``make test`` orders its work (every notebook's tests run through it).

``make test`` runs pytest-xdist with ``--dist loadscope --no-loadscope-reorder``:
each test module and each notebook goes whole to one worker, in collection
order. The scopes that take longest start first, so that no worker picks one
up near the end while the others sit idle. The list comes from
``pytest --durations=0`` under ``make test`` on a 2-core machine; a scope
missing from it only starts later, nothing is skipped.
"""

import os
import shutil
import tempfile

import pytest

LONGEST_FIRST = (
    "tests/test_notebook_browser.py",
    # every Python block of the README and docs/, each in a fresh process
    "tests/test_docs_blocks.py",
    "tests/test_lesson_06.py",
    "notebooks/05_prefix_cached_experts.ipynb",
    "tests/test_postgres.py",
    "notebooks/03_same_turn_visibility.ipynb",
    "notebooks/06_tool_only_memory_capture.ipynb",
    "tests/test_engine_integration.py",
    "tests/test_served.py",
    "tests/test_openai_wire.py",
    "tests/test_memory_reliability.py",
    "tests/test_memory_exactly_once.py",
    "tests/test_memory_fleet.py",
    "tests/test_turn_cache_middleware.py",
    "tests/test_secrets_providers.py",
    "tests/test_refused_input.py",
    "tests/test_doctor_fix.py",
    "tests/test_memory_remote.py",
    # a fresh venv resolving the route without make; the wheel and the sdist built
    "tests/test_packaging.py",
    "tests/test_wheel.py",
)


def pytest_collection_modifyitems(config, items):
    """Move the longest scopes to the front; the order inside a scope is kept."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def pytest_runtest_setup(item):
    """Skip a test marked ``extras(...)`` when one of them is missing: the core-only
    venvs of ``make ends`` (scripts/both_ends.py) run the core and doctor tests alone."""
    marker = item.get_closest_marker("extras")
    if marker is None:
        return
    from agentstate._extras import missing

    absent = [extra for extra in marker.args if missing(extra)]
    if absent:
        pytest.skip(f"needs the {', '.join(map(repr, absent))} extra (not installed)")


def pytest_configure(config):
    """nbval's kernels talk over Unix sockets (IPC), not TCP ports on 127.0.0.1.

    jupyter_client picks a kernel's five ports by binding port 0 and closing it; the
    kernel binds them a moment later. Meanwhile the tests beside it (4 workers) open
    thousands of loopback connections and servers on ephemeral ports, and once in a
    few full runs one took a kernel's port first: the kernel died at start ("Kernel
    died before replying to kernel_info") and every cell of its notebook errored.
    Sockets in a private folder cannot collide.
    """
    try:
        import nbval.kernel
        from jupyter_client.manager import KernelManager
    except ImportError:  # the core-only venvs of `make ends` have no nbval
        return
    folder = tempfile.mkdtemp(prefix="nbk-")  # short: a Unix socket path holds 107 bytes
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))

    class IPCKernelManager(KernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", ip=os.path.join(folder, "k"), **kwargs)

    nbval.kernel.KernelManager = IPCKernelManager
