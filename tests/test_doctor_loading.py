"""``agentstate doctor`` loads projects as ``langgraph dev`` does; bad input is one line, exit 2.

Every project is written to ``tmp_path`` and checked by the ``agentstate``
console script in a subprocess (its ``sys.path`` starts at the script's
directory, not the project's, as a reader's shell or pre-commit runs it), with
no ``PYTHONPATH``: the doctor itself must find the project's modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentstate.doctor.report.loading import TargetError, definition_line, project_paths

AGENTSTATE = Path(sys.executable).with_name("agentstate")

STATE = """
from typing import TypedDict


class State(TypedDict):
    question: str
    answer: str
"""

# a package's graph module as the LangGraph templates write it: absolute imports of its own package
GRAPH = """
import contextlib

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph_sdk.runtime import ServerRuntime

from my_agent.state import State

print("my_agent.graph: imported")  # a module that prints must not spoil --format json


def answer(state: State) -> dict:
    return {"answer": state["question"].upper()}


def builder(node: str = "answer") -> StateGraph:
    b = StateGraph(State)
    b.add_node(node, answer)
    b.add_edge(START, node)
    b.add_edge(node, END)
    return b


graph = builder().compile()
uncompiled = builder()


def make_graph():
    return builder().compile()


def make_configured(config: RunnableConfig):
    return builder(config["configurable"].get("node", "configured")).compile()


async def make_async(config: RunnableConfig):
    return builder("awaited").compile()


def make_with_runtime(config: RunnableConfig, runtime: ServerRuntime):
    assert runtime.access_context == "assistants.read", runtime
    return builder("served").compile()


@contextlib.asynccontextmanager
async def managed():
    yield builder("managed").compile()
"""

SHAPES = {
    "compiled": "./src/my_agent/graph.py:graph",
    "module_form": "my_agent.graph:make_graph",
    "uncompiled": "./src/my_agent/graph.py:uncompiled",
    "configured": "./src/my_agent/graph.py:make_configured",
    "async": "./src/my_agent/graph.py:make_async",
    "runtime": {"path": "./src/my_agent/graph.py:make_with_runtime", "description": "d"},
    "context_manager": "./src/my_agent/graph.py:managed",
}


def doctor(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_WORKSPACE")}
    return subprocess.run(
        [str(AGENTSTATE), "doctor", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def src_layout(tmp_path_factory) -> Path:
    """The LangGraph templates' layout: pyproject.toml, src/my_agent/, dependencies ["."]."""
    return write(
        tmp_path_factory.mktemp("src-layout"),
        {
            "pyproject.toml": '[project]\nname = "my-agent"\nversion = "0.1.0"\n',
            "src/my_agent/__init__.py": "",
            "src/my_agent/state.py": STATE,
            "src/my_agent/graph.py": GRAPH,
            "langgraph.json": json.dumps({"dependencies": ["."], "graphs": SHAPES}),
        },
    )


def test_a_src_layout_project_loads_every_graph_shape_langgraph_json_allows(src_layout):
    done = doctor("langgraph.json", "--format", "json", cwd=src_layout)
    assert done.returncode == 0, done.stderr
    reports = json.loads(done.stdout)["graphs"]  # the module's print went to stderr
    assert [r["graph"] for r in reports] == list(SHAPES)
    assert "my_agent.graph: imported" in done.stderr


def test_the_json_s_own_directory_counts_not_the_current_one(src_layout):
    done = doctor(f"{src_layout.name}/langgraph.json", "--format", "json", cwd=src_layout.parent)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["graphs"]) == len(SHAPES)


def test_a_folder_of_packages_listed_as_a_dependency_and_a_sibling_module(tmp_path):
    """``"dependencies": ["./src"]`` (no pyproject) and a graph file importing its neighbour."""
    write(
        tmp_path,
        {
            "src/agent/__init__.py": "",
            "src/agent/state.py": STATE,
            "src/agent/graph.py": GRAPH.replace("my_agent.state", "agent.state"),
            "helpers.py": "NODE = 'helper'\n",
            "flat.py": "from helpers import NODE\nfrom agent.graph import builder\n"
            "graph = builder(NODE).compile()\n",
            "langgraph.json": json.dumps(
                {
                    "dependencies": ["./src", "langchain-openai"],
                    "graphs": {"packaged": "agent.graph:graph", "flat": "./flat.py:graph"},
                }
            ),
        },
    )
    done = doctor("langgraph.json", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [r["graph"] for r in json.loads(done.stdout)["graphs"]] == ["packaged", "flat"]


# --- bad input: one line, exit 2, nothing on stdout ---

BAD_MODULES = {
    "lazy.py": "def __getattr__(name):\n    raise RuntimeError('lazy import failed')\n",
    "weird.py": textwrap.dedent(
        """
        class Weird:
            def __getattribute__(self, name):
                raise RuntimeError("no attribute today")

        agent = Weird()
        """
    ),
    "exits.py": "import sys\nsys.exit(0)\n",
    "factories.py": textwrap.dedent(
        """
        import sys


        def make_graph():
            raise TypeError("unknown model name 'gpt-x'")


        async def make_async():
            raise ValueError("no API key")


        def make_verbose():
            raise ValueError("first line\\n  second line\\n\\nthird line")


        def make_exit():
            sys.exit(0)


        def make_three(a, b, c):
            return None


        def make_nothing():
            return 42
        """
    ),
}


def nested_json(root: Path) -> str:
    (root / "deep.json").write_text('{"graphs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return "deep.json"


def latin1_json(root: Path) -> str:
    (root / "latin.json").write_bytes(b'{"graphs": {"a": "./caf\xe9.py:graph"}}')
    return "latin.json"


def nul_json(root: Path) -> str:
    (root / "nul.json").write_text(json.dumps({"graphs": {"a": "./agent\u0000.py:graph"}}))
    return "nul.json"


def nul_dependency_json(root: Path) -> str:
    config = {"dependencies": ["./sr\u0000c"], "graphs": {"a": "./lazy.py:agent"}}
    (root / "nuldep.json").write_text(json.dumps(config))
    return "nuldep.json"


def long_name_json(root: Path) -> str:
    config = {"graphs": {"a": "./" + "a" * 300 + ".py:graph"}}
    (root / "long.json").write_text(json.dumps(config))
    return "long.json"


def fifo(name: str):
    def make(root: Path) -> str:
        os.mkfifo(root / name)
        return f"{name}:graph" if name.endswith(".py") else name

    return make


def missing_dependency_json(root: Path) -> str:
    config = {"dependencies": ["./nowhere"], "graphs": {"a": "./lazy.py:agent"}}
    (root / "nodep.json").write_text(json.dumps(config))
    return "nodep.json"


BAD = [
    pytest.param(
        "lazy.py:agent",
        "getting 'agent' from lazy.py raised RuntimeError: lazy import failed",
        id="module __getattr__ raises",
    ),
    pytest.param(
        "weird.py:agent",
        "looking at it raised RuntimeError: no attribute today",
        id="object attribute access raises",
    ),
    pytest.param(
        "exits.py:graph",
        "importing exits.py failed: SystemExit (it called sys.exit(0))",
        id="sys.exit(0) at import",
    ),
    pytest.param(
        "factories.py:make_exit",
        "factory make_exit raised SystemExit (it called sys.exit(0))",
        id="sys.exit(0) in the factory",
    ),
    pytest.param(
        "factories.py:make_graph",
        "factory make_graph raised TypeError: unknown model name 'gpt-x'",
        id="TypeError inside a zero-argument factory",
    ),
    pytest.param(
        "factories.py:make_async",
        "factory make_async raised ValueError: no API key",
        id="async factory raises",
    ),
    pytest.param(
        "factories.py:make_verbose",
        "factory make_verbose raised ValueError: first line second line third line",
        id="a factory's exception of several lines",
    ),
    pytest.param(
        "factories.py:make_three",
        "factory make_three takes 3 arguments",
        id="factory with three arguments",
    ),
    pytest.param(
        "factories.py:make_nothing",
        "expected its factory to build a compiled LangGraph graph, got int",
        id="factory builds no graph",
    ),
    pytest.param(nested_json, "deep.json is nested too deeply", id="deeply nested langgraph.json"),
    pytest.param(
        latin1_json,
        "latin.json is not UTF-8 (byte 0xe9 at offset 23)",
        id="non-UTF-8 langgraph.json",
    ),
    pytest.param(
        nul_json,
        r"nul.json > a: ./agent\x00.py: the path contains a NUL byte",
        id="NUL byte in a listed path",
    ),
    pytest.param(
        nul_dependency_json,
        "dependency './sr\\x00c': the path contains a NUL byte",
        id="NUL byte in a dependency",
    ),
    pytest.param(
        long_name_json, "a file name in it is too long", id="file name over 255 characters"
    ),
    pytest.param(
        missing_dependency_json,
        "dependency './nowhere': no such file or directory",
        id="missing dependency folder",
    ),
    pytest.param(fifo("x.json"), "x.json is a FIFO, not a regular file", id="FIFO named x.json"),
    pytest.param(
        fifo("x.py"), "x.py:graph: x.py is a FIFO, not a regular file", id="FIFO named x.py"
    ),
]


@pytest.fixture(scope="module")
def bad_project(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("doctor-bad"), BAD_MODULES)


@pytest.mark.parametrize(("target", "message"), BAD)
def test_bad_input_is_one_line_naming_its_cause_and_exit_2(bad_project, target, message):
    if callable(target):
        target = target(bad_project)
    done = doctor(target, cwd=bad_project, timeout=60)  # a FIFO opened for reading would hang
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    (line,) = done.stderr.splitlines()  # no traceback, no "coroutine ... never awaited"
    assert line.startswith("agentstate doctor: error: ")
    assert message in line


# --- the loader's parts, in process ---


def test_project_paths_are_the_root_its_local_dependencies_and_a_packages_src(tmp_path):
    write(
        tmp_path,
        {
            "pkg/pyproject.toml": "",
            "pkg/src/mod/__init__.py": "",
            "flat/__init__.py": "",
            "plain/agent.py": "",
        },
    )
    deps = [".", "./pkg", "./flat", "./plain", "langchain-openai"]
    assert project_paths(tmp_path, deps, "langgraph.json") == (
        tmp_path,
        tmp_path / "pkg",
        tmp_path / "pkg" / "src",
        tmp_path / "flat",
        tmp_path / "plain",
    )
    (tmp_path / "file.txt").write_text("")
    with pytest.raises(TargetError, match=r"dependency './file.txt' is not a directory"):
        project_paths(tmp_path, ["./file.txt"], "langgraph.json")
    with pytest.raises(TargetError, match="'dependencies' is not a list of strings"):
        project_paths(tmp_path, "./pkg", "langgraph.json")


def test_definition_line_finds_the_last_top_level_binding(tmp_path):
    source = tmp_path / "agent.py"
    source.write_text(
        textwrap.dedent(
            """
            import os

            agent = None


            def make():
                agent = 1  # a local: not the module's
                return agent


            if os.environ.get("X"):
                agent = make()
            else:
                from json import loads as agent
            """
        )
    )
    assert definition_line(str(source), "make") == 7
    assert definition_line(str(source), "agent") == 15
    assert definition_line(str(source), "missing") is None
    assert definition_line(None, "agent") is None


# --- issue 32, item 9: loading as `langgraph dev` does, to the end ---

NEEDS_KEY = """
import os

from langgraph.graph import END, START, StateGraph

from my_state import State

KEY = os.environ["AGENT_API_KEY"]  # as ChatOpenAI() reads OPENAI_API_KEY when it is built
print("key seen at import:", KEY)


def answer(state: State) -> dict:
    return {"answer": KEY}


b = StateGraph(State)
b.add_node("answer", answer)
b.add_edge(START, "answer")
b.add_edge("answer", END)
graph = b.compile()
"""


def env_project(root: Path, env: object, files: dict[str, str] | None = None) -> Path:
    return write(
        root,
        {
            "my_state.py": STATE,
            "agent.py": NEEDS_KEY,
            "langgraph.json": json.dumps({"graphs": {"agent": "./agent.py:graph"}, "env": env}),
            **(files or {}),
        },
    )


@pytest.mark.parametrize("env", ["./.env", ".env"])
def test_the_env_file_of_langgraph_json_is_set_before_the_graph_is_imported(tmp_path, env):
    """Before: the key in `.env` was never set, so the import raised KeyError and exited 2."""
    env_project(tmp_path, env, {".env": "# the project's secrets\nAGENT_API_KEY=sk-from-dotenv\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = doctor(str(tmp_path / "langgraph.json"), "--format", "json", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert "key seen at import: sk-from-dotenv" in done.stderr  # relative to the json, not cwd
    (report,) = json.loads(done.stdout)["graphs"]
    assert (report["graph"], report["error"]) == ("agent", None)


def test_the_env_mapping_of_langgraph_json_is_set_too(tmp_path):
    env_project(tmp_path, {"AGENT_API_KEY": "sk-from-mapping"})
    done = doctor("langgraph.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "key seen at import: sk-from-mapping" in done.stderr


def test_env_does_not_override_what_the_shell_set(tmp_path):
    """A value the caller set (a CI job's dummy key) wins over "env"; what the shell lacks
    comes from "env" (langgraph dev itself would replace it: docs/doctor/README.md says so)."""
    env_project(tmp_path, "./.env", {".env": "AGENT_API_KEY=sk-from-dotenv\n"})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(AGENTSTATE), "doctor", "langgraph.json"],
        cwd=tmp_path,
        env={**env, "AGENT_API_KEY": "sk-from-shell"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "key seen at import: sk-from-shell" in done.stderr


def test_a_missing_env_file_sets_nothing_and_says_so(tmp_path):
    env_project(tmp_path, "./.env")
    done = doctor("langgraph.json", cwd=tmp_path)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert errors == [
        "agentstate doctor: error: langgraph.json > agent: importing ./agent.py failed: "
        "KeyError: 'AGENT_API_KEY'"
    ]
    assert (
        "agentstate doctor: note: langgraph.json: env './.env' does not exist: no variables set "
        "from it (as langgraph dev)" in done.stderr
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AGENT_API_KEY": 1}, "'env' maps 'AGENT_API_KEY' to a non-string value"),
        (["A=1"], "'env' is neither a path to a .env file nor a mapping"),
    ],
)
def test_a_malformed_env_is_one_line_and_exit_2(tmp_path, env, message):
    env_project(tmp_path, env)
    done = doctor("langgraph.json", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line == f"agentstate doctor: error: langgraph.json: {message}"


def test_an_env_fifo_is_refused_never_opened(tmp_path):
    env_project(tmp_path, "./.env")
    os.mkfifo(tmp_path / ".env")
    done = doctor("langgraph.json", cwd=tmp_path, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.endswith("langgraph.json: env './.env' is a FIFO, not a regular file")


FAN_OUT = """
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    docs: list


b = StateGraph(State)
b.add_node("a", lambda s: {"docs": ["a"]})
b.add_node("b", lambda s: {"docs": ["b"]})
b.add_edge(START, "a")
b.add_edge(START, "b")
b.add_edge(["a", "b"], END)
graph = b.compile()
"""


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    """A langgraph.json of a graph that loads (with an error finding) and graphs that cannot."""
    return write(
        tmp_path_factory.mktemp("mixed"),
        {
            "fan_out.py": FAN_OUT,
            "boom.py": "raise RuntimeError('no model configured')\n",
            "spin.py": "while True:\n    pass\n",
            "stubborn.py": textwrap.dedent(
                """
                import time

                while True:  # swallows every exception, the time limit's too
                    try:
                        time.sleep(0.05)
                    except BaseException:
                        pass
                """
            ),
            "echo.py": "import subprocess\n\nsubprocess.run(['echo', 'hi'], check=True)\n"
            + FAN_OUT,
            "langgraph.json": json.dumps(
                {"graphs": {"broken": "./boom.py:graph", "fan_out": "./fan_out.py:graph"}}
            ),
            "hangs.json": json.dumps(
                {"graphs": {"spins": "./spin.py:graph", "fan_out": "./fan_out.py:graph"}}
            ),
        },
    )


def test_one_graph_that_cannot_load_hides_no_other_report(mixed):
    """Before: stdout was empty and only the failure was said; now every graph is reported,
    the failure on its own line, and the exit status is the worst of all (2)."""
    done = doctor("langgraph.json", cwd=mixed)
    assert done.returncode == 2
    assert (
        "langgraph.json > fan_out: 1 finding\n" in done.stdout
        and "unreduced-parallel-write" in done.stdout
    )
    (line,) = done.stderr.splitlines()
    assert line == (
        "agentstate doctor: error: langgraph.json > broken: importing ./boom.py failed: "
        "RuntimeError: no model configured"
    )
    as_json = doctor("langgraph.json", "--format", "json", cwd=mixed)
    graphs = {g["graph"]: g for g in json.loads(as_json.stdout)["graphs"]}
    assert graphs["broken"]["error"] == line.removeprefix("agentstate doctor: error: ")
    assert (graphs["broken"]["findings"], graphs["fan_out"]["error"]) == ([], None)
    assert graphs["fan_out"]["codes"] == ["unreduced-parallel-write"]


def test_a_failure_is_in_sarif_s_invocation_and_github_s_annotations(mixed):
    sarif = json.loads(doctor("langgraph.json", "--format", "sarif", cwd=mixed).stdout)
    (run,) = sarif["runs"]
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error"
    assert "langgraph.json > broken: importing ./boom.py failed" in notification["message"]["text"]
    assert [r["ruleId"] for r in run["results"]] == ["unreduced-parallel-write"]
    github = doctor("langgraph.json", "--format", "github", cwd=mixed).stdout.splitlines()
    assert github[0].startswith("::error title=doctor could not check a graph::langgraph.json")
    assert github[1].startswith("::error file=fan_out.py,line=")


def test_an_endless_loop_at_import_is_one_line_past_the_timeout_and_the_rest_reported(mixed):
    """Before: the CLI hung forever (and had no --timeout)."""
    done = doctor("hangs.json", "--timeout", "3", "--format", "json", cwd=mixed, timeout=100)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line == (
        "agentstate doctor: error: hangs.json > spins: loading took longer than 3 s "
        "(--timeout); an endless loop or a call that blocks, at import or in its factory?"
    )
    graphs = {g["graph"]: g for g in json.loads(done.stdout)["graphs"]}
    assert graphs["fan_out"]["codes"] == ["unreduced-parallel-write"]
    assert graphs["spins"]["error"] == line.removeprefix("agentstate doctor: error: ")


def test_a_target_that_swallows_the_time_limit_still_ends_in_one_line(mixed):
    done = doctor("stubborn.py:graph", "--timeout", "2", cwd=mixed, timeout=100)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith("agentstate doctor: error: stubborn.py:graph: loading took longer")


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_a_process_a_target_starts_at_import_cannot_write_into_the_report(mixed, fmt):
    """Before: `echo hi` wrote to file descriptor 1 and spoiled the JSON and SARIF."""
    done = doctor("echo.py:graph", "--format", fmt, cwd=mixed)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[0] == "hi"
    json.loads(done.stdout)  # valid: nothing but the report on stdout
    assert "hi" not in done.stdout.split()


@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_a_timeout_that_is_not_a_positive_number_is_one_line(mixed, timeout):
    done = doctor("fan_out.py:graph", "--timeout", timeout, cwd=mixed)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line == (
        f"agentstate doctor: error: --timeout {timeout}: give a finite number of seconds above 0"
    )
