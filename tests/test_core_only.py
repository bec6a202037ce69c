"""The core works with no extra installed; every other part names the extra it needs (issue 24).

``agentstate.core``, ``agentstate.doctor`` and the scripted model need only
LangGraph and LangChain. Two ways to check it:

- here, in any venv: a subprocess in which the extras' libraries cannot be
  imported (``sys.modules[name] = None``, Python's own way to block a module)
  imports the core, diagnoses a broken and a fixed agent, runs the README's
  notes agent and ``agentstate doctor``, and tries every other part;
- in the fresh venvs of ``make ends`` (``scripts/both_ends.py``), where they are
  really absent (``AGENTSTATE_CORE_ONLY=1``): the same, plus that nothing of
  the extras is installed at all.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentstate._extras import DIST, EXTRAS, missing

ROOT = Path(__file__).resolve().parents[1]

# every library of every extra, by the name it is imported with
BLOCKED = sorted({module for modules in EXTRAS.values() for module in modules})
BLOCK = f"import sys\nfor name in {BLOCKED!r}:\n    sys.modules[name] = None\n"


def readme_block() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Use it in your own agent", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run_without_extras(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter where no library of any extra can be imported.

    Run from a file in ``cwd``: the doctor reads a tool's source, which ``-c`` code has not.
    """
    script = cwd / "without_extras.py"
    script.write_text(BLOCK + textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


CORE_WORKS = """
import json
from typing import Annotated, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.core import merge_fields
from agentstate.doctor import diagnose
from agentstate.doctor.checks.diagnosis import WITHOUT_DEEPAGENTS
from agentstate.models import ScriptedChatModel, reply, tool_call


class Plain(AgentState):
    tags: NotRequired[dict[str, bool]]


class Merged(AgentState):
    tags: Annotated[NotRequired[dict[str, bool]], merge_fields]


@tool
def save_tag(name: str, runtime: ToolRuntime) -> Command:
    \"\"\"Save one tag.\"\"\"
    return Command(update={
        "tags": {name: True},
        "messages": [ToolMessage("ok", tool_call_id=runtime.tool_call_id)],
    })


def agent(schema):
    script = [reply(tool_call("save_tag", name="a"), tool_call("save_tag", name="b")),
              reply(text="done")]
    return create_agent(ScriptedChatModel(script=script), tools=[save_tag], state_schema=schema)


broken, fixed = diagnose(agent(Plain)), diagnose(agent(Merged))
state = agent(Merged).invoke({"messages": [{"role": "user", "content": "a and b"}]})
blocked = sorted(n for n, m in sys.modules.items() if m is not None and n in BLOCKED)
print(json.dumps({
    "broken": broken.codes(), "fixed": fixed.codes(), "tags": state["tags"],
    "notes_said": list(fixed.notes) == [WITHOUT_DEEPAGENTS], "imported": blocked,
}))
"""


def test_the_core_and_the_doctor_work_with_no_extra_importable(tmp_path):
    done = run_without_extras(f"BLOCKED = {BLOCKED!r}\n" + CORE_WORKS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == {
        "broken": ["unreduced-parallel-write"],
        "fixed": [],
        "tags": {"a": True, "b": True},
        "notes_said": True,  # the deepagents check is skipped, and the report says so
        "imported": [],
    }


def test_the_readme_notes_agent_and_the_doctor_command_run_with_no_extra(tmp_path):
    (tmp_path / "notes.py").write_text(readme_block())
    cli = "from agentstate.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    done = run_without_extras(cli, "doctor", "notes.py:agent", cwd=tmp_path)
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "notes.py:agent: no findings")
    assert "deepagents is not installed" in done.stderr
    listed = run_without_extras(cli, "--help", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "(needs the 'experts' extra)" in listed.stdout
    refused = run_without_extras(cli, "experts", "ask", "why?", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    (line,) = refused.stderr.splitlines()  # one line, no traceback
    assert line.startswith(
        "agentstate experts: error: agentstate.experts needs the 'experts' extra: "
        f"pip install '{DIST}[experts]' (missing: "
    )


# what is imported -> the part its message names (a module's package guards it) and the extra
PARTS = {
    "agentstate.rds": ("agentstate.rds", "rds"),
    "agentstate.rds.validator": ("agentstate.rds", "rds"),
    "agentstate.experts": ("agentstate.experts", "experts"),
    "agentstate.memory": ("agentstate.memory", "memory"),
    "agentstate.memory.client": ("agentstate.memory", "memory"),
    "agentstate.persistence": ("agentstate.persistence", "persistence"),
    "agentstate.servers.postgres": ("agentstate.servers.postgres", "persistence"),
    "agentstate.lessons.fixtures": ("agentstate.lessons.fixtures", "lessons"),
    "agentstate.lessons.served": ("agentstate.lessons.fixtures", "lessons"),
    "agentstate.lessons.purity": ("agentstate.lessons.fixtures", "lessons"),
}


def test_a_part_whose_extra_is_missing_names_it(tmp_path):
    done = run_without_extras(
        f"""
        import json
        said = {{}}
        for module in {list(PARTS)!r}:
            try:
                __import__(module)
            except ImportError as error:
                said[module] = [type(error).__name__, getattr(error, "extra", None), str(error)]
        print(json.dumps(said))
        """,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert {m: s[:2] for m, s in said.items()} == {
        module: ["MissingExtraError", extra] for module, (_, extra) in PARTS.items()
    }
    for module, (part, extra) in PARTS.items():
        assert said[module][2].startswith(
            f"{part} needs the {extra!r} extra: pip install '{DIST}[{extra}]' (missing: "
        )


def test_a_real_model_without_the_openai_extra_names_it(tmp_path):
    done = run_without_extras(
        """
        from agentstate.models import ModelSettings, get_chat_model
        try:
            get_chat_model(settings=ModelSettings(base_url="http://127.0.0.1:9/v1"))
        except ImportError as error:
            print(error)
        """,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "needs the 'openai' extra: pip install 'agentstate-langgraph[openai]'" in done.stdout


def test_a_missing_module_of_the_package_itself_is_not_blamed_on_an_extra():
    from agentstate._extras import needs

    with pytest.raises(ModuleNotFoundError) as caught:
        with needs("rds", "agentstate.rds"):
            import agentstate.no_such_module  # noqa: F401
    assert type(caught.value) is ModuleNotFoundError


@pytest.mark.skipif(
    os.environ.get("AGENTSTATE_CORE_ONLY") != "1",
    reason="only in the core-only venvs of `make ends` (scripts/both_ends.py)",
)
def test_only_the_core_is_installed_here():
    """In `make ends`: no library of any extra is installed, and the package is the wheel."""
    import agentstate

    assert {extra: missing(extra) for extra in EXTRAS} == {e: list(m) for e, m in EXTRAS.items()}
    assert "site-packages" in agentstate.__file__, agentstate.__file__


# --- issue 43 item 6: docs/layout.md says which extra each module needs ---

LAYOUT_ROW = re.compile(r"^\| `(agentstate[\w.]*)` \| (nothing|`(\w+)`) \|", re.M)
IMPORT_EACH = """
import importlib, json, sys
from agentstate._extras import MissingExtraError
found = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        found[name] = "nothing"
    except MissingExtraError as error:
        found[name] = error.extra
print(json.dumps(found))
"""


def layout_table() -> dict[str, str]:
    """docs/layout.md's table: module -> the extra it says importing it needs ("nothing")."""
    page = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    return {m[1]: m[3] or "nothing" for m in LAYOUT_ROW.finditer(page)}


def test_the_layout_page_says_which_extra_each_module_needs(tmp_path):
    claimed = layout_table()
    package = ROOT / "src" / "agentstate"
    top = {p.stem for p in package.glob("*.py") if not p.name.startswith("_")}
    top |= {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    listed = {name.split(".")[1] for name in claimed}
    assert listed == top, "every public top-level module of the package has a row"
    done = run_without_extras(IMPORT_EACH, *claimed, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == claimed


def test_the_layout_page_counts_the_hazards_that_need_deepagents():
    from agentstate.hazards.registry import HAZARDS

    page = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    count = sum("deepagents" in h.needs for h in HAZARDS)
    assert f"{count} of its {len(HAZARDS)} reproductions: `deepagents`" in page
