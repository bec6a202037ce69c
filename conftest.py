"""How ``make test`` orders its work (every notebook's tests run through it).

``make test`` runs pytest-xdist with ``--dist loadscope --no-loadscope-reorder``:
each test module and each notebook goes whole to one worker, in collection
order. The scopes that take longest start first, so that no worker picks one
up near the end while the others sit idle. The list comes from
``pytest --durations=0`` under ``make test`` on a 2-core machine; a scope
missing from it only starts later, nothing is skipped.
"""

import pytest

LONGEST_FIRST = (
    "tests/test_notebook_browser.py",
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
