"""The ``agentstate`` command as a stranger first meets it: ``--version``, ``--help`` (issue 34).

``agentstate --help`` imports no system (each is listed from ``agentstate.cli.SYSTEMS``),
so it answers at once; how long it takes is measured by ``scripts/time_help.py``, not
asserted here (machines here are noisy). What is asserted is why it is quick: what a
fresh interpreter has imported after printing it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
from collections.abc import Iterator

import pytest

import agentstate
from agentstate import cli
from agentstate._extras import DIST, EXTRAS, MissingExtraError


def run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``code`` then ``agentstate ARGS`` in a fresh interpreter."""
    script = code + "\nfrom agentstate.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", "import sys\n" + script, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version_is_the_packages_and_the_distributions():
    done = run("", "--version")
    assert (done.returncode, done.stdout) == (0, f"agentstate {agentstate.__version__}\n")
    # one source: hatch reads agentstate.__version__ into the distribution's metadata
    assert importlib.metadata.version(DIST) == agentstate.__version__


REPORT_IMPORTS = """
import atexit
@atexit.register
def _report():
    print("IMPORTED", sorted(sys.modules))
"""


def test_help_imports_no_system_and_no_library():
    done = run(REPORT_IMPORTS, "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: agentstate" in done.stdout
    imported = set(done.stdout.split("IMPORTED", 1)[1].strip(" []\n").replace("'", "").split(", "))
    ours = {name for name in imported if name.startswith("agentstate")}
    assert ours == {"agentstate", "agentstate._extras", "agentstate.cli"}
    heavy = ("langchain", "langchain_core", "pydantic", "mcp", "openai", "llama_cpp", "httpx")
    assert sorted(n for n in imported if n.split(".")[0] in heavy) == []
    # find_spec of a dotted extra module imports its parents: langgraph's are namespaces
    assert {n for n in imported if n.startswith("langgraph")} <= {
        "langgraph",
        "langgraph.checkpoint",
    }


def test_a_system_whose_extra_is_missing_says_so_in_its_help_line():
    blocked = "".join(f"sys.modules[{m!r}] = None\n" for m in EXTRAS["engine"] + EXTRAS["memory"])
    done = run(blocked, "--help")
    lines = {line.split()[0]: " ".join(line.split()[1:]) for line in entries(done.stdout)}
    assert lines["engine"].startswith("(needs the 'engine' extra) the local llama.cpp server")
    assert lines["memory"].startswith("(needs the 'memory' extra) the MCP memory server")
    assert "needs" not in lines["doctor"]


def entries(help_text: str) -> list[str]:
    """The subcommand lines of ``--help``, each joined with its wrapped continuation."""
    body = help_text.split("positional arguments:", 1)[1].split("options:", 1)[0]
    lines: list[str] = []
    for line in body.splitlines()[2:]:
        if line.startswith(" " * 8) and lines:
            lines[-1] += " " + line.strip()
        elif line.strip():
            lines.append(line.strip())
    return lines


def test_the_listing_and_each_systems_own_help_line_agree():
    """The help line written in SYSTEMS is the one the system's CLI module registers."""
    for system in cli.SYSTEMS:
        try:
            parser = cli.build_parser(system.name)
        except MissingExtraError:
            continue
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        (registered,) = [a.help for a in sub._choices_actions if a.dest == system.name]
        if registered and registered.startswith("(needs the"):
            continue  # the extra is missing here: the module did not register itself
        assert registered == system.help, system.name


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from parsers(child)


@pytest.mark.parametrize("system", [None, *cli.NAMES])
def test_help_is_plain_text_and_names_no_repository_path(system):
    """What a wheel user reads: no reST markup, no path of a checkout they do not have."""
    top = cli.listing_parser() if system is None else cli.build_parser(system)
    for parser in parsers(top):
        text = parser.format_help()
        assert "``" not in text, parser.prog
        assert "docs/" not in text, parser.prog


def test_the_doctors_help_names_the_explain_command():
    text = " ".join(cli.build_parser("doctor")._subparsers._group_actions[0]  # type: ignore[union-attr]
                    .choices["doctor"].format_help().split())  # fmt: skip
    assert "agentstate doctor --explain CODE" in text


def test_no_system_named_is_a_usage_error():
    done = run("")
    assert done.returncode == 2 and "arguments are required: {experts," in done.stderr
    done = run("", "doctr")
    assert done.returncode == 2 and "invalid choice: 'doctr'" in done.stderr
