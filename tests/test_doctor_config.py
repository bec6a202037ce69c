"""``agentstate doctor`` configured as a linter: suppression comments, ``[tool.agentstate.doctor]``,
``--select``/``--ignore``, ``--fail-on``, ``--exit-zero``, ``--output-file``, ``-q``, ``--version``.

Every project is written to ``tmp_path`` and checked by the ``agentstate`` console script in
a subprocess, as a reader's shell, CI job or pre-commit hook runs it (pre-commit itself:
``tests/test_pre_commit_hook.py``). The resolution of codes is checked in process too.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentstate.doctor.report import config
from agentstate.doctor.report.config import ConfigError, Layer, resolve
from agentstate.doctor.report.findings import CODES, Code
from agentstate.doctor.report.suppression import comments, declarations, key_candidates

AGENTSTATE = Path(sys.executable).with_name("agentstate")

STATE = """
from typing import TypedDict


class State(TypedDict):
    docs: list  # agentstate: ignore[unreduced-parallel-write]
    notes: list  # agentstate: ignore[same-batch-read]


class Tags(TypedDict):
    tags: list


class Unused(TypedDict):  # a schema no graph has: its comment may serve a graph not checked
    memo: str  # agentstate: ignore[same-batch-read]


LIMIT = 3  # agentstate: ignore[unreduced-paralel-write]
"""

GRAPHS = """
from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from agentstate.models import ScriptedChatModel, reply
from state import State, Tags


def a(state: State) -> dict:
    return {"docs": ["a"], "notes": ["a"]}


def b(state: State) -> dict:
    return {"docs": ["b"], "notes": ["b"]}


def fan_out(schema, first, second):
    builder = StateGraph(schema)
    builder.add_node(first.__name__, first)
    builder.add_node(second.__name__, second)
    builder.add_edge(START, first.__name__)
    builder.add_edge(START, second.__name__)
    builder.add_edge([first.__name__, second.__name__], END)
    return builder.compile()


keys = fan_out(State, a, b)


def c(state: Tags) -> dict:  # agentstate: ignore[unreduced-parallel-write]
    return {"tags": ["c"]}


def d(state: Tags) -> dict:
    return {"tags": ["d"]}


lines = fan_out(Tags, c, d)


class Plain(AgentState):
    saved: dict


@tool
def save_tag(name: str, runtime: ToolRuntime) -> Command:  # agentstate: ignore
    \"\"\"Save one tag.\"\"\"
    return Command(update={
        "saved": {name: True},
        "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)],
    })


tools = create_agent(ScriptedChatModel(script=[reply(text="ok")]), tools=[save_tag],
                     state_schema=Plain)
def e(state: Tags) -> dict:
    return {"tags": ["e"]}


def f(state: Tags) -> dict:
    return {"tags": ["f"]}


unsilenced = fan_out(Tags, e, f)
"""


def doctor(*args: str, cwd: Path, env: dict[str, str] | None = None):
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITHUB_WORKSPACE")}
    return subprocess.run(
        [str(AGENTSTATE), "doctor", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
    )


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def lgjson(*names: str) -> str:
    return json.dumps({"graphs": {n: f"./graphs.py:{n}" for n in names}})


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return write(
        tmp_path_factory.mktemp("configured"),
        {
            "state.py": STATE,
            "graphs.py": GRAPHS,
            "langgraph.json": lgjson("keys", "lines", "tools", "unsilenced"),
            "only_keys.json": lgjson("keys"),
        },
    )


def line_of(text: str, needle: str) -> int:
    return textwrap.dedent(text)[: textwrap.dedent(text).index(needle)].count("\n") + 1


def graphs_of(done) -> dict[str, dict]:
    return {g["graph"]: g for g in json.loads(done.stdout)["graphs"]}


def test_suppressions_on_a_key_s_declaration_and_on_a_def_line_through_the_cli(project):
    """Without any comment each graph has its error; with them only the unsilenced ones stay,
    and the comments that silence nothing are reported (a typo'd code, a code with no finding
    there)."""
    bare = doctor("langgraph.json", "--format", "json", "--isolated", cwd=project)
    unsilenced = {n: g["codes"] for n, g in graphs_of(bare).items()}
    assert unsilenced == {
        "keys": ["unreduced-parallel-write"],
        "lines": [],
        "tools": [],
        "unsilenced": ["unreduced-parallel-write"],
    }
    keys = graphs_of(bare)["keys"]
    assert [f["subject"] for f in keys["findings"]] == ["notes"]  # docs: silenced at its key
    unused = json.loads(bare.stdout)["unused_suppressions"]
    assert [(Path(u["file"]).name, u["line"], u["code"], u["severity"]) for u in unused] == [
        ("state.py", line_of(STATE, "notes: list"), "unused-suppression", "warning"),
        ("state.py", line_of(STATE, "LIMIT = 3"), "unused-suppression", "warning"),
    ]
    assert "no `same-batch-read` finding" in unused[0]["message"]
    assert "unknown code `unreduced-paralel-write`" in unused[1]["message"]
    assert unused[0]["explain"] == "agentstate doctor --explain unused-suppression"
    assert bare.returncode == 1  # the errors of keys and unsilenced; warnings never fail alone


def test_without_the_comments_every_graph_has_its_error(project, tmp_path):
    """The control: the same code with the comments taken out."""
    for name in ("state.py", "graphs.py"):
        text = (project / name).read_text()
        cleaned = "\n".join(line.split("  # agentstate:")[0] for line in text.splitlines())
        (tmp_path / name).write_text(cleaned + "\n")
    (tmp_path / "langgraph.json").write_text(lgjson("keys", "lines", "tools"))
    done = doctor("langgraph.json", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1
    graphs = graphs_of(done)
    assert [f["subject"] for f in graphs["keys"]["findings"]] == ["docs", "notes"]
    assert graphs["lines"]["codes"] == graphs["tools"]["codes"] == ["unreduced-parallel-write"]
    assert json.loads(done.stdout)["unused_suppressions"] == []


def test_the_text_output_says_where_the_unused_suppressions_are(project):
    done = doctor("langgraph.json", "--isolated", cwd=project)
    assert done.returncode == 1
    assert "2 unused suppressions" in done.stdout
    memo = line_of(STATE, "notes: list")
    shown = done.stdout.splitlines()
    at = shown.index(f"state.py:{memo}:5: unused-suppression warning")
    assert shown[at + 1].startswith("    `# agentstate: ignore[same-batch-read]` is unused")
    assert "see: agentstate doctor --explain unreduced-parallel-write" in done.stdout
    assert "see: agentstate doctor --explain unused-suppression" in done.stdout


def test_fail_on_warning_fails_on_an_unused_suppression(project):
    done = doctor("langgraph.json", "--select", "unused-suppression", "--fail-on", "warning",
                  "--format", "json", cwd=project)  # fmt: skip
    assert done.returncode == 1
    assert all(g["findings"] == [] for g in graphs_of(done).values())
    ignored = doctor("langgraph.json", "--ignore", "unused-suppression,unreduced-parallel-write",
                     "--fail-on", "warning", "--format", "json", cwd=project)  # fmt: skip
    assert ignored.returncode == 0
    assert json.loads(ignored.stdout)["unused_suppressions"] == []


def test_a_suppression_for_a_code_not_selected_is_not_called_unused(project):
    """As with ruff, a comment for a code this run does not report cannot be judged."""
    done = doctor("langgraph.json", "--ignore", "same-batch-read", "--format", "json",
                  cwd=project)  # fmt: skip
    unused = json.loads(done.stdout)["unused_suppressions"]
    assert [u["line"] for u in unused] == [line_of(STATE, "LIMIT = 3")]


# --- [tool.agentstate.doctor] in pyproject.toml ---


def configured(root: Path, section: str, where: str = "pyproject.toml") -> Path:
    write(root, {"state.py": STATE, "graphs.py": GRAPHS, where: section})
    (root / "langgraph.json").write_text(lgjson("keys", "unsilenced"))
    return root


def test_the_nearest_pyproject_with_the_section_is_used_from_the_target_upward(tmp_path):
    """As ruff: the target's directory, then its parents; a pyproject.toml without the section
    (a sub-package's) is passed over."""
    configured(tmp_path, '[tool.agentstate.doctor]\nignore = ["unreduced-parallel-write"]\n')
    sub = tmp_path / "sub"
    write(sub, {"pyproject.toml": '[project]\nname = "sub"\n', "state.py": STATE})
    (sub / "graphs.py").write_text(textwrap.dedent(GRAPHS))
    (sub / "langgraph.json").write_text(lgjson("keys"))
    outside = tmp_path.parent
    done = doctor(str(sub / "langgraph.json"), "--format", "json", cwd=outside)
    assert done.returncode == 0, done.stdout + done.stderr
    assert graphs_of(done)["keys"]["findings"] == []
    isolated = doctor(str(sub / "langgraph.json"), "--isolated", cwd=outside)
    assert isolated.returncode == 1
    cli = doctor(str(sub / "langgraph.json"), "--select", "unreduced-parallel-write", cwd=outside)
    assert cli.returncode == 1  # --select replaces the file's select and ignore, as ruff's does


def test_select_per_graph_ignores_and_fail_on_from_the_file(tmp_path):
    configured(
        tmp_path,
        """
        [tool.agentstate.doctor]
        select = ["unreduced-parallel-write", "unused-suppression"]
        per-graph-ignores = { "unsil*" = ["unreduced-parallel-write"] }
        fail-on = "warning"
        """,
    )
    done = doctor("langgraph.json", "--format", "json", cwd=tmp_path)
    graphs = graphs_of(done)
    assert graphs["unsilenced"]["findings"] == []
    assert graphs["keys"]["codes"] == ["unreduced-parallel-write"]
    # same-batch-read is not selected: its comment is not judged; the unknown code is
    assert [u["line"] for u in json.loads(done.stdout)["unused_suppressions"]] == [
        line_of(STATE, "LIMIT = 3")
    ]
    assert done.returncode == 1
    assert doctor("langgraph.json", "--exit-zero", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ('select = ["no-such-code"]', "'select': unknown code 'no-such-code' (known: "),
        ('ignores = ["undeclared-key"]', "unknown key 'ignores' (known: graphs, select, ignore, "),
        ('fail-on = "info"', "'fail-on' is 'info', not one of error, warning"),
        ("timeout = 0", "'timeout' is 0, not a finite number of seconds above 0"),
        ("select = [", "is not TOML: "),
    ],
)
def test_a_configuration_the_doctor_cannot_use_is_one_line_and_exit_2(tmp_path, section, message):
    configured(tmp_path, f"[tool.agentstate.doctor]\n{section}\n")
    done = doctor("langgraph.json", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith("agentstate doctor: error: ") and message in line


def test_an_unknown_code_on_the_command_line_is_one_line_and_exit_2(project):
    done = doctor("langgraph.json", "--select", "undeclared-key,nope", cwd=project)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("agentstate doctor: error: --select: unknown code 'nope'")


# --- the other options ---


def test_exit_zero_and_a_target_that_cannot_load(project):
    assert doctor("graphs.py:keys", "--exit-zero", cwd=project).returncode == 0
    (project / "broken.json").write_text(json.dumps({"graphs": {"x": "./nowhere.py:graph"}}))
    assert doctor("broken.json", "--exit-zero", cwd=project).returncode == 2


def test_output_file_quiet_and_version(project, tmp_path):
    out = tmp_path / "report.sarif"
    done = doctor("langgraph.json", "--format", "sarif", "-o", str(out), cwd=project)
    assert (done.returncode, done.stdout) == (1, "")
    log = json.loads(out.read_text())
    version = importlib.metadata.version("agentstate-langgraph")
    assert log["runs"][0]["tool"]["driver"]["version"] == version
    quiet = doctor("graphs.py:lines", "-q", "--ignore", "unused-suppression", cwd=project)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    loud = doctor("graphs.py:lines", "--ignore", "unused-suppression", cwd=project)
    assert loud.stdout.startswith("graphs.py:lines: no findings\n\n0 errors, 0 warnings, ")
    shown = doctor("--version", cwd=project)
    assert (shown.returncode, shown.stdout) == (0, f"agentstate doctor {version}\n")


# --- in process: how codes resolve, what a comment is ---


def test_layers_resolve_as_ruff_s_select_and_ignore():
    every = set(config.known_codes())
    assert resolve([]).enabled == every
    file = Layer(select=("undeclared-key", "same-batch-read"), ignore=("same-batch-read",))
    assert resolve([file]).enabled == {"undeclared-key"}
    assert resolve([file, Layer(ignore=("undeclared-key",))]).enabled == set()
    assert resolve([file, Layer(select=("same-batch-read",))]).enabled == {"same-batch-read"}
    assert resolve([Layer(select=("ALL",), ignore=("undeclared-key",))]).enabled == every - {
        "undeclared-key"
    }
    rules = resolve([Layer(per_graph_ignores=(("tests/*", ("ALL",)),))])
    assert not rules.reports("undeclared-key", "tests/a") and rules.reports("undeclared-key", "a")


def test_a_code_added_to_the_registry_is_accepted_with_no_change(monkeypatch):
    """One registry: the codes the checks report are the codes the configuration knows."""
    with pytest.raises(ConfigError, match="unknown code 'brand-new-code'"):
        config.check_codes(["brand-new-code"], "select")
    monkeypatch.setitem(CODES, "brand-new-code", Code("brand-new-code", "warning", "02", "new"))
    assert config.check_codes(["brand-new-code"], "select") == ("brand-new-code",)
    assert "brand-new-code" in resolve([]).enabled


def test_only_real_comments_are_suppressions():
    source = textwrap.dedent(
        '''
        """A docstring quoting # agentstate: ignore[undeclared-key] is not a comment."""
        x = "# agentstate: ignore"
        y = 1  # agentstate: ignore[undeclared-key, same-batch-read]
        z = 2  # noqa: E501  # agentstate: ignore
        w = 3  # agentstate: ignored on purpose: not a suppression
        '''
    )
    found = comments("m.py", source)
    assert {line: s.codes for line, s in found.items()} == {
        4: ("undeclared-key", "same-batch-read"),
        5: None,
    }


def test_declarations_of_a_class_body_and_a_functional_typed_dict():
    source = textwrap.dedent(
        """
        from typing import Annotated, TypedDict

        class S(TypedDict):
            docs: Annotated[
                list, "a reducer"
            ]
            n: int

        F = TypedDict("F", {"user:profile": int, "other": str})
        """
    )
    found = {(d.key, d.first, d.last, tuple(sorted(d.fields))) for d in declarations(source)}
    assert found == {
        ("docs", 5, 7, ("docs", "n")),
        ("n", 8, 8, ("docs", "n")),
        ("user:profile", 10, 10, ("other", "user:profile")),
        ("other", 10, 10, ("other", "user:profile")),
    }
    assert key_candidates("researcher:notes") == ["researcher:notes", "notes"]
    assert key_candidates("writer > user:profile") == ["user:profile", "profile"]
