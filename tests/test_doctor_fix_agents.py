"""``agentstate doctor --fix`` on agents (issue 44 item 3): the fixes of notebooks 03 and 04.

``subagent-drops-key`` (the parent's schema handed to its subagents),
``list-doubled-by-subagent`` (a reducer that keeps each item once) and
``same-batch-read`` (the turn cache added to the agent's middleware). Each is
written into a file of a temporary project, then proven by a scripted run in a
fresh process that imports the fixed file, never by the doctor's own word; then
the never-harm rules (idempotent, a clean agent unchanged, ``ruff check``), and
each corpus graph of these codes fixed in a copy and proven by its own run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentstate.doctor import diagnose
from agentstate.doctor.facts.graph_facts import graph_facts
from agentstate.doctor.fix.command import run_fixes
from agentstate.doctor.fix.plan import FIXABLE, Fix, NoFix, plan
from tests.test_doctor_fix import _doctor, _load, _ruff, _run, doctor_fix

HEAD = """\
from typing import Annotated, NotRequired

from deepagents import DeepAgentState, create_deep_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.core import merge_fields
from agentstate.models import ScriptedChatModel, reply
"""

DROPS = (
    HEAD
    + '''

class NotesState(DeepAgentState):
    notes: Annotated[NotRequired[dict[str, str]], merge_fields]


class ParentOnly(AgentMiddleware):
    state_schema = NotesState  # only the parent declares `notes`


@tool
def save_note(title: str, text: str, runtime: ToolRuntime) -> Command:
    """Save one note."""
    return Command(
        update={
            "notes": {title: text},
            "messages": [ToolMessage("Saved.", tool_call_id=runtime.tool_call_id)],
        }
    )


def build(parent=None, helper=None):
    return create_deep_agent(
        parent or ScriptedChatModel(script=[reply(text="ok")]),
        middleware=[ParentOnly()],
        subagents=[
            {
                "name": "note-taker",
                "description": "Takes notes.",
                "system_prompt": "Save the notes you are given.",
                "tools": [save_note],
                "model": helper or ScriptedChatModel(script=[reply(text="ok")]),
            }
        ],
    )


graph = build()
'''
)

DELEGATE = (
    "from agentstate.models import tool_call\n"
    "parent = ScriptedChatModel(script=[reply(tool_call('task', subagent_type='note-taker', "
    "description='save')), reply(text='done')])\n"
)


def _write(path: Path, text: str) -> None:
    """The agent's file, passing ruff before the fix (so it must after it)."""
    path.write_text(text)
    assert _ruff(path, "check").returncode == 0, _ruff(path, "check").stdout
    assert _ruff(path, "format", "--check").returncode == 0


def _fix(path: Path, unsafe: bool) -> tuple[list[Fix | NoFix], str, list[str]]:
    graph = _load(path).graph  # type: ignore[attr-defined]
    plans = plan(graph_facts(graph), diagnose(graph).findings, (path.parent,))
    run = run_fixes(plans, (path.parent,), "fix", unsafe=unsafe)
    assert not run.refused, run.refused
    return plans, run.diff, [f.title for f in run.withheld]


def _proven_clean(path: Path, code: str) -> None:
    """The doctor, run on the fixed file, reports nothing of ``code``; a second fix writes
    nothing; ``ruff check`` passes on the result."""
    assert code not in diagnose(_load(path).graph).codes()  # type: ignore[attr-defined]
    before = path.read_text()
    _, again, _ = _fix(path, unsafe=True)
    assert again == "" and path.read_text() == before
    checked = _ruff(path, "check")
    assert checked.returncode == 0, checked.stdout
    assert _ruff(path, "format", "--check").returncode == 0, path.read_text()


# --- subagent-drops-key ------------------------------------------------------------------


def test_the_subagents_lost_write_reaches_the_parent_once_the_schema_is_handed_down(tmp_path):
    path = tmp_path / "drops.py"
    _write(path, DROPS)
    run = (
        DELEGATE + "helper = ScriptedChatModel(script=[reply(tool_call('save_note', title='t', "
        "text='x')), reply(text='saved')])\n"
        "out = build(parent, helper).invoke({'messages': [('user', 'go')]})\n"
        "print(json.dumps([out.get('notes', {}), out['messages'][-1].text]))"
    )
    assert _run(path, run) == [{}, "done"]  # the hazard: the note never reaches the parent
    plans, diff, _ = _fix(path, unsafe=False)
    assert [(p.code, p.subject, p.applicability) for p in plans if isinstance(p, Fix)] == [
        ("subagent-drops-key", "note-taker:notes", "safe")
    ]
    assert "+        state_schema=NotesState,\n" in diff
    assert _run(path, run) == [{"t": "x"}, "done"]  # the key delivered, the reply unchanged
    _proven_clean(path, "subagent-drops-key")


def test_a_compiled_subagent_gets_no_edit_and_the_finding_says_why(tmp_path):
    path = tmp_path / "compiled.py"
    path.write_text(
        DROPS.replace(
            "from langchain.agents.middleware",
            "from langchain.agents import create_agent\nfrom langchain.agents.middleware",
        )
        .replace(
            '"tools": [save_note],\n'
            '                "model": helper or ScriptedChatModel(script=[reply(text="ok")]),',
            '"runnable": create_agent(\n'
            '                    helper or ScriptedChatModel(script=[reply(text="ok")]), '
            "[save_note]\n                ),",
        )
        .replace('                "system_prompt": "Save the notes you are given.",\n', "")
    )
    graph = _load(path).graph  # type: ignore[attr-defined]
    (why,) = plan(graph_facts(graph), diagnose(graph).findings, (tmp_path,))
    assert isinstance(why, NoFix) and why.code == "subagent-drops-key"
    assert "is a graph compiled by your code: build it with the parent's schema" in why.reason
    assert why.reason.endswith("see docs/doctor/subagent-drops-key.md")


COMPILED = (
    DROPS.replace(
        "from langchain.agents.middleware import AgentMiddleware",
        "from langchain.agents import AgentState, create_agent\n"
        "from langchain.agents.middleware import AgentMiddleware",
    )
    .replace(
        "class ParentOnly(AgentMiddleware):",
        "class CollectorState(AgentState):\n"
        "    source: NotRequired[str]  # the collector's own key\n\n\n"
        "class ParentOnly(AgentMiddleware):",
    )
    .replace(
        '                "system_prompt": "Save the notes you are given.",\n'
        '                "tools": [save_note],\n'
        '                "model": helper or ScriptedChatModel(script=[reply(text="ok")]),\n',
        '                "runnable": create_agent(\n'
        '                    helper or ScriptedChatModel(script=[reply(text="ok")]),\n'
        "                    [save_note],\n"
        "                    state_schema=CollectorState,\n"
        "                ),\n",
    )
)


def test_a_compiled_subagent_with_a_schema_of_yours_gets_the_key_declared_as_the_parent_does(
    tmp_path,
):
    path = tmp_path / "compiled_own.py"
    _write(path, COMPILED)
    run = (
        DELEGATE + "helper = ScriptedChatModel(script=[reply(tool_call('save_note', title='t', "
        "text='x')), reply(text='saved')])\n"
        "out = build(parent, helper).invoke({'messages': [('user', 'go')]})\n"
        "print(json.dumps([out.get('notes', {}), out['messages'][-1].text]))"
    )
    assert _run(path, run) == [{}, "done"]
    plans, diff, _ = _fix(path, unsafe=False)
    assert [(p.code, p.applicability) for p in plans if isinstance(p, Fix)] == [
        ("subagent-drops-key", "safe")
    ]
    assert (
        "     source: NotRequired[str]  # the collector's own key\n"
        "+    notes: Annotated[NotRequired[dict[str, str]], merge_fields]\n"
    ) in diff
    assert _run(path, run) == [{"t": "x"}, "done"]
    _proven_clean(path, "subagent-drops-key")


# --- list-doubled-by-subagent ------------------------------------------------------------

DOUBLED = '''\
import operator
from typing import Annotated, NotRequired

from deepagents import DeepAgentState, create_deep_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.models import ScriptedChatModel, reply


class NotesState(DeepAgentState):
    notes: Annotated[NotRequired[list[str]], operator.add]  # every note, in order


@tool
def add_note(text: str, runtime: ToolRuntime) -> Command:
    """Append a note."""
    return Command(
        update={
            "notes": [text],
            "messages": [ToolMessage("Noted.", tool_call_id=runtime.tool_call_id)],
        }
    )


def build(parent=None, helper=None):
    return create_deep_agent(
        parent or ScriptedChatModel(script=[reply(text="ok")]),
        tools=[add_note],
        state_schema=NotesState,
        subagents=[
            {
                "name": "note-taker",
                "description": "Adds notes.",
                "system_prompt": "Add the note.",
                "tools": [add_note],
                "model": helper or ScriptedChatModel(script=[reply(text="ok")]),
            }
        ],
    )


graph = build()
'''


def test_a_list_a_subagent_hands_back_is_no_longer_doubled(tmp_path):
    path = tmp_path / "doubled.py"
    _write(path, DOUBLED)
    run = (
        DELEGATE + "helper = ScriptedChatModel(script=[reply(tool_call('add_note', text='new')), "
        "reply(text='added')])\n"
        "out = build(parent, helper).invoke({'messages': [('user', 'go')], 'notes': ['pre']})\n"
        "print(json.dumps([out['notes'], out['messages'][-1].text]))"
    )
    assert _run(path, run) == [["pre", "pre", "new"], "done"]
    plans, diff, withheld = _fix(path, unsafe=False)  # unsafe: held back without the flag
    # one finding per subagent that writes `notes` (note-taker, general-purpose), one edit
    assert (
        withheld
        == ["`NotesState.notes` gets the reducer `append_unique` (each item kept once)"] * 2
    )
    assert diff == "" and path.read_text() == DOUBLED
    _, diff, _ = _fix(path, unsafe=True)
    assert "+    notes: Annotated[NotRequired[list[str]], append_unique]  # every note" in diff
    assert "-import operator\n" in diff  # no longer used: ruff's F401 would flag it
    assert _run(path, run) == [["pre", "new"], "done"]
    _proven_clean(path, "list-doubled-by-subagent")


def test_a_string_handed_back_by_a_subgraph_gets_no_edit_and_points_at_the_page(tmp_path):
    path = tmp_path / "podcast.py"
    path.write_text(
        "import operator\nfrom typing import Annotated, TypedDict\n\n"
        "from langgraph.graph import START, StateGraph\n\n\n"
        "class PodcastState(TypedDict, total=False):\n"
        "    topic: Annotated[str, operator.add]\n    script: str\n\n\n"
        "class Segment(TypedDict, total=False):\n    topic: str\n    script: str\n\n\n"
        "segment = StateGraph(Segment)\n"
        "segment.add_node('write', lambda s: {'script': s['topic']})\n"
        "segment.add_edge(START, 'write')\n"
        "podcast = StateGraph(PodcastState)\n"
        "podcast.add_node('segment', segment.compile())\n"
        "podcast.add_edge(START, 'segment')\n"
        "graph = podcast.compile()\n"
    )
    graph = _load(path).graph  # type: ignore[attr-defined]
    (why,) = plan(graph_facts(graph), diagnose(graph).findings, (tmp_path,))
    assert isinstance(why, NoFix) and why.subject == "segment > topic"
    assert why.reason.startswith("`topic` is a string appended to itself: no reducer keeps one")
    assert "see docs/doctor/list-doubled-by-subagent.md" in why.reason


# --- same-batch-read ---------------------------------------------------------------------

SAME_BATCH = '''\
"""Notes saved and listed in one reply."""

from typing import Annotated, NotRequired

from langchain.agents import AgentState, create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command

from agentstate.core import merge_fields
from agentstate.models import ScriptedChatModel, reply


class NotesState(AgentState):
    notes: Annotated[NotRequired[dict[str, str]], merge_fields]


@tool
def save_note(title: str, text: str, runtime: ToolRuntime) -> Command:
    """Save one note."""
    return Command(
        update={
            "notes": {title: text},
            "messages": [ToolMessage("Saved.", tool_call_id=runtime.tool_call_id)],
        }
    )


@tool
def read_notes(runtime: ToolRuntime) -> str:
    """List the titles of every note."""
    return ", ".join(sorted(runtime.state.get("notes", {}))) or "none"


def build(model=None):
    return create_agent(
        model or ScriptedChatModel(script=[reply(text="ok")]),
        tools=[save_note, read_notes],
        state_schema=NotesState,
    )


graph = build()
'''

BATCH = (
    "from agentstate.models import tool_call\n"
    "model = ScriptedChatModel(script=[reply(tool_call('save_note', title='a', text='1'), "
    "tool_call('read_notes')), reply(text='done')])\n"
    "out = build(model).invoke({'messages': [('user', 'go')]})\n"
    "print(json.dumps([out['notes'], [m.text for m in out['messages'] if m.type == 'tool']]))"
)


@pytest.mark.parametrize("call", ["ainvoke", "invoke"])
def test_a_reader_in_its_writers_batch_sees_their_write_once_the_turn_cache_is_added(
    tmp_path, call
):
    path = tmp_path / f"batch_{call}.py"
    _write(path, SAME_BATCH)
    run = BATCH
    if call == "ainvoke":
        run = run.replace("build(model).invoke(", "asyncio.run(build(model).ainvoke(").replace(
            "'go')]})", "'go')]}))"
        )
        run = "import asyncio\n" + run
    assert _run(path, run) == [{"a": "1"}, ["Saved.", "none"]]  # the reader saw nothing
    _, diff, withheld = _fix(path, unsafe=False)
    assert diff == "" and len(withheld) == 1  # unsafe: it adds a dependency on agentstate
    _, diff, _ = _fix(path, unsafe=True)
    assert "+from agentstate.core import TurnCacheMiddleware, merge_fields\n" in diff
    assert (
        "+        middleware=[\n+            TurnCacheMiddleware(\n"
        '+                writers=["save_note"], readers=["read_notes"], key="notes"\n'
        "+            ),\n+        ],\n"
    ) in diff
    assert _run(path, run) == [{"a": "1"}, ["Saved.", "a"]]  # the reader saw the write
    _proven_clean(path, "same-batch-read")


def test_the_turn_cache_joins_an_existing_middleware_list(tmp_path):
    path = tmp_path / "listed.py"
    _write(
        path,
        SAME_BATCH.replace(
            "        state_schema=NotesState,\n",
            "        state_schema=NotesState,\n        middleware=[],  # none yet\n",
        ),
    )
    _, diff, _ = _fix(path, unsafe=True)
    assert "+        middleware=[\n+            TurnCacheMiddleware(" in diff
    assert "# none yet" in path.read_text()
    assert _run(path, BATCH) == [{"a": "1"}, ["Saved.", "a"]]
    _proven_clean(path, "same-batch-read")


BUILT_IN = """\
        middleware=[
            ModelCallLimitMiddleware(run_limit=5),
            ToolRetryMiddleware(max_retries=1, initial_delay=0),
            HumanInTheLoopMiddleware(interrupt_on={"save_note": False}),
            SummarizationMiddleware(model=model, trigger=("tokens", 100_000)),
        ],
"""

IMPORT_BUILT_INS = (
    "from langchain.agents import AgentState, create_agent\n",
    "from langchain.agents import AgentState, create_agent\n"
    "from langchain.agents.middleware import (\n"
    "    HumanInTheLoopMiddleware,\n"
    "    ModelCallLimitMiddleware,\n"
    "    SummarizationMiddleware,\n"
    "    ToolRetryMiddleware,\n"
    ")\n",
)

# The reply the replay server plays to the real provider client: both calls in one reply.
PROVIDER_RUN = """\
from agentstate.models import tool_call
script = ScriptedChatModel(script=[reply(tool_call('save_note', title='a', text='1'),
    tool_call('read_notes')), reply(text='done')])
with Server(script) as server:
    model = Client(base_url=server.base_url, api_key='not-needed', model='replay', max_retries=0)
    out = RUN
print(json.dumps([out['notes'], [m.text for m in out['messages'] if m.type == 'tool']]))
"""
CLIENTS = {
    "ChatOpenAI": "from agentstate.models.openai_replay import ReplayServer as Server\n"
    "from langchain_openai import ChatOpenAI as Client\n",
    "ChatAnthropic": "from agentstate.models.anthropic_replay "
    "import AnthropicReplayServer as Server\n"
    "from langchain_anthropic import ChatAnthropic as Client\n",
    "ChatOpenAI_responses": "from functools import partial\n"
    "from agentstate.models.openai_replay import ReplayServer as Server\n"
    "from langchain_openai import ChatOpenAI\n"
    "Client = partial(ChatOpenAI, use_responses_api=True)\n",
}
RUNS = {
    "invoke": "build(model).invoke({'messages': [('user', 'go')]})",
    "astream": "asyncio.run(last(build(model).astream({'messages': [('user', 'go')]}, "
    "stream_mode='values')))",
}
LAST = (
    "import asyncio\n"
    "async def last(chunks):\n    async for out in chunks:\n        pass\n    return out\n"
)
OWN_MODEL = (  # the model named before the call, so the summarization middleware can use it
    "def build(model=None):\n    return create_agent(\n"
    '        model or ScriptedChatModel(script=[reply(text="ok")]),',
    'def build(model=None):\n    model = model or ScriptedChatModel(script=[reply(text="ok")])\n'
    "    return create_agent(\n        model,",
)


@pytest.mark.parametrize("call", list(RUNS))
@pytest.mark.parametrize("client", list(CLIENTS))
def test_the_turn_cache_fix_holds_beside_langchain_middleware_with_a_real_provider_client(
    tmp_path, client, call
):
    """The agent as a reader's lives: LangChain's call limit, retries, human-in-the-loop and
    summarization middleware already listed, the real provider client over a loopback server.
    The reader misses the write before ``--fix`` and sees it after, with the built-ins kept."""
    path = tmp_path / f"agent_{client}_{call}.py"
    _write(
        path,
        SAME_BATCH.replace(
            "        state_schema=NotesState,\n", "        state_schema=NotesState,\n" + BUILT_IN
        )
        .replace(*IMPORT_BUILT_INS)
        .replace(*OWN_MODEL),
    )
    run = CLIENTS[client] + LAST + PROVIDER_RUN.replace("RUN", RUNS[call])
    assert _run(path, run) == [{"a": "1"}, ["Saved.", "none"]]  # the reader saw nothing
    _, diff, _ = _fix(path, unsafe=True)
    assert "+            TurnCacheMiddleware(" in diff
    fixed = path.read_text()
    assert all(line in fixed for line in BUILT_IN.splitlines()[1:-1])  # the built-ins kept
    assert _run(path, run) == [{"a": "1"}, ["Saved.", "a"]]  # the reader saw the write
    _proven_clean(path, "same-batch-read")


# One agent, one loopback server, runs that may overlap: the reply is a function of the run's
# own user message (``go <title>``: save that note and list the notes in one reply), so two runs
# at once each get their own calls. A note titled ``boom`` fails to save.
OVERLAP_RUN = """\
import asyncio
from concurrent.futures import ThreadPoolExecutor
from agentstate.models import PolicyChatModel, tool_call
def policy(messages):
    if messages[-1].type != 'human':
        return reply(text='done')
    title = messages[-1].text.split()[-1]
    return reply(tool_call('save_note', title=title, text='1'), tool_call('read_notes'))
def seen(out):
    return [out.get('notes', {}), [m.text for m in out['messages'] if m.type == 'tool']]
with Server(PolicyChatModel(policy=policy)) as server:
    agent = build(Client(base_url=server.base_url, api_key='x', model='replay', max_retries=0))
    go = lambda title: seen(agent.invoke({'messages': [('user', 'go ' + title)]}))
    failed = go('boom')
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(go, ['a', 'b']))
    async def two():
        runs = [agent.ainvoke({'messages': [('user', 'go ' + t)]}) for t in ('c', 'd')]
        return [seen(out) for out in await asyncio.gather(*runs)]
    both_async = asyncio.run(two())
print(json.dumps([failed, both, both_async]))
"""
FAILING_SAVE = (
    '    """Save one note."""\n',
    '    """Save one note."""\n    if title == "boom":\n        raise OSError("disk full")\n',
)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_the_fixed_agent_holds_for_two_runs_at_once_and_after_a_failed_writer(tmp_path, client):
    """After ``--fix``: a writer that raises does not hang its reader (the retry middleware
    turns the error into the tool's reply; the reader reads nothing and says which writer
    failed), and then two runs of the one agent at once, threads and ``asyncio.gather``, each
    see their own note only."""
    path = tmp_path / f"overlap_{client}.py"
    _write(
        path,
        SAME_BATCH.replace(
            "        state_schema=NotesState,\n", "        state_schema=NotesState,\n" + BUILT_IN
        )
        .replace(*IMPORT_BUILT_INS)
        .replace(*OWN_MODEL)
        .replace(*FAILING_SAVE),
    )
    run = CLIENTS[client] + OVERLAP_RUN
    _fix(path, unsafe=True)
    failed, both, both_async = _run(path, run)
    assert failed[0] == {}  # nothing stored
    assert "disk full" in failed[1][0]  # the writer's error, as its reply
    assert failed[1][1].startswith("Error: read_notes did not read 'notes': a writer of the")
    assert "(OSError: disk full)), so what it would read now" in failed[1][1]  # not a stale read
    assert both == [[{"a": "1"}, ["Saved.", "a"]], [{"b": "1"}, ["Saved.", "b"]]]
    assert both_async == [[{"c": "1"}, ["Saved.", "c"]], [{"d": "1"}, ["Saved.", "d"]]]
    _proven_clean(path, "same-batch-read")


def test_a_turn_cache_of_the_key_already_there_is_not_doubled(tmp_path):
    """A second cache of one key would share its name (``TurnCacheMiddleware[notes]``), which
    ``create_agent`` refuses: the finding says to extend the one there."""
    path = tmp_path / "partial.py"
    _write(
        path,
        SAME_BATCH.replace(
            "        state_schema=NotesState,\n",
            "        state_schema=NotesState,\n"
            '        middleware=[TurnCacheMiddleware(writers=["x"], readers=["y"], '
            'key="notes")],\n',
        ).replace("import merge_fields", "import TurnCacheMiddleware, merge_fields"),
    )
    graph = _load(path).graph  # type: ignore[attr-defined]
    (why,) = plan(graph_facts(graph), diagnose(graph).findings, (tmp_path,))
    assert isinstance(why, NoFix)
    assert why.reason.startswith("a turn cache of `notes` is there already: add the reader")


@pytest.mark.parametrize(
    ("code", "graphs"),
    [
        ("subagent-drops-key", ["agent"]),
        ("list-doubled-by-subagent", ["agent", "podcast"]),
        ("same-batch-read", ["agent"]),
    ],
)
def test_the_pages_fixed_agents_get_no_edit(tmp_path, code, graphs):
    """Never harm: ``--fix`` on a clean agent (each page's "The fix") changes nothing."""
    from tests.test_doctor_docs import DOCS, block

    path = tmp_path / f"fixed_{code.replace('-', '_')}.py"
    text = block((DOCS / f"{code}.md").read_text(), "The fix")
    path.write_text(text)
    module = _load(path)
    for name in graphs:
        graph = getattr(module, name)
        plans = plan(graph_facts(graph), diagnose(graph).findings, (tmp_path,))
        assert plans == []
        run = run_fixes(plans, (tmp_path,), "fix", unsafe=True)
        assert run.edits == [] and run.refused == [] and path.read_text() == text


# --- every code: its marker in every format, its page explains the fix ------------------------


def test_every_fixable_code_s_page_says_what_fix_writes():
    pages = Path(__file__).resolve().parents[1] / "docs" / "doctor"
    fixes = (pages / "fixes.md").read_text()
    for code in FIXABLE:
        page = (pages / f"{code}.md").read_text()
        assert "## With `agentstate doctor --fix`" in page, code
        assert f"[`{code}`]({code}.md) |" in fixes, code  # a row of "What it fixes"


def test_the_command_line_marks_each_new_fix_in_every_format(tmp_path):
    (tmp_path / "g.py").write_text(SAME_BATCH)
    concise = _doctor(tmp_path, "--output-format", "concise").stdout
    first, summary = concise.splitlines()
    assert first.startswith("g.py:31:1: same-batch-read warning g.py:graph: notes: ")
    assert first.endswith(" (fixable: --unsafe-fixes)")
    assert summary.endswith("; 0 fixable with --fix, 1 more with --unsafe-fixes")
    report = _doctor(tmp_path, "--output-format", "json").stdout
    assert '"fix": "unsafe"' in report
    sarif = _doctor(tmp_path, "--output-format", "sarif").stdout
    assert '"fix": "unsafe"' in sarif
    explained = subprocess.run(
        [sys.executable, "-m", "agentstate.cli", "doctor", "--explain",
         "same-batch-read"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "## With `agentstate doctor --fix`" in explained
    fixed = _doctor(tmp_path, "--fix", "--unsafe-fixes")
    assert fixed.returncode == 0 and "no findings" in fixed.stdout, fixed.stdout + fixed.stderr
    assert "TurnCacheMiddleware(" in (tmp_path / "g.py").read_text()


def test_a_middleware_list_the_call_does_not_write_is_left_with_one_line(tmp_path):
    path = tmp_path / "g.py"
    text = SAME_BATCH.replace(
        "        state_schema=NotesState,\n",
        "        state_schema=NotesState,\n        middleware=EXTRA,\n",
    ).replace("def build(", "EXTRA = []\n\n\ndef build(")
    path.write_text(text)
    done = _doctor(tmp_path, "--fix", "--unsafe-fixes")
    assert done.returncode == 0 and path.read_text() == text  # a warning: the run passes
    assert (
        f"agentstate doctor: not fixed: {path}: `create_agent`'s `middleware=` is not a list "
        "written in the call (`EXTRA`): not edited"
    ) in done.stderr.splitlines()


# --- the corpus, proven by its own runs --------------------------------------------------


LIST = ["list-doubled-by-subagent"]


@pytest.mark.parametrize(
    ("shape", "applied"),
    [
        ("research agent: researcher subgraph over operator.add messages", LIST),
        ("deep agent, subagent shares an operator.add list", LIST),
        ("financial advisor: a CRM subagent appends to a shared notes list", LIST),
        ("quickstart research: Send workers hand their query back; router typed narrower", LIST),
        (
            "a course's full agent with its own todo and file tools",
            ["same-batch-read", "unreduced-parallel-write"],
        ),
        # a string topic appended to itself: no reducer keeps one copy, so no edit
        ("podcast: planning subgraph and Send-ed segments, str topic with operator.add", []),
    ],
)
def test_each_corpus_graph_of_these_codes_is_fixed_in_a_copy_and_proven_by_its_run(shape, applied):
    (case,) = [c for c in doctor_fix.fixable_cases() if c.shape == shape]
    record = doctor_fix.prove_case(case)
    assert record["applied"] == record["proven"] == applied, (record["no_fix"], record["run_after"])
