"""``Watch(graph)``: what one run of an unchanged graph showed, as doctor findings.

Pass it at run time, ``graph.invoke(inputs, {"callbacks": [watch]})`` (or
``ainvoke``, ``stream``, ``astream``), then read ``watch.report()``. It is a
plain LangChain callback handler: LangGraph starts every task of a super-step
as a chain run whose metadata names the step, the node and the task's
namespace, and ends it with the task's return value (the tools' ``Command``
updates), before it applies the writes. So the watch sees, with the call ids:

- ``unreduced-parallel-write`` (notebook 02): two tasks of one step updating a
  key that has no reducer, even when ``InvalidUpdateError`` then ends the run;
- ``undeclared-key`` (notebook 02) and ``subagent-drops-key`` (notebook 04): a
  write to a key the graph (or the subagent) does not declare, which
  LangGraph drops;
- ``same-batch-read`` (notebook 03): a tool that reads a key (as
  :func:`~agentstate.doctor.diagnose` found) running in the step of the tools
  that write it, with no turn cache covering the pair;
- ``prefix-not-invariant`` (notebook 05): two model calls whose prompts
  diverge before a large shared part, with the offset and the differing text.

No wrapper is needed: callbacks see every task's input and output and every
model prompt. Evidence is kept per run (the root run each callback belongs to),
so one watch over many runs reports each run's hazards and never mixes two
runs' tasks; a subgraph node hands back its private keys too, which the parent
ignores by design, so they are not dropped writes. The handler runs inline
(``run_inline``), so under ``ainvoke`` it costs no thread hop; parallel tool
threads are serialised by a lock.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langgraph.types import Command

from agentstate.core.turn_cache import TurnCacheMiddleware
from agentstate.doctor.facts.graph_facts import GraphFacts, graph_facts
from agentstate.doctor.facts.key_kinds import reducer_fix
from agentstate.doctor.facts.prefix import divergence, prompt_text, where
from agentstate.doctor.report.findings import Finding, Report, finding

MIN_SHARED = 2000
"""Characters two prompts must share after their divergence for it to count as a lost prefix."""
RECENT = 8
"""Each model call is compared with the first call and the calls just before it (this many)."""
IGNORED_READS = frozenset({"messages", "files"})


@dataclass
class _Task:
    """One task of one super-step of one run: its node, its tool calls and what it returned."""

    root: UUID
    namespace: str
    step: int
    node: str
    agent: str | None
    calls: list[tuple[str, str]] = field(default_factory=list)
    writes: set[str] = field(default_factory=set)

    @property
    def batch(self) -> tuple[UUID, str, int]:
        return self.root, self.namespace.rpartition("|")[0], self.step

    def label(self) -> str:
        if self.calls:
            return ", ".join(f"`{name}` (call {call_id})" for name, call_id in self.calls)
        return f"node `{self.node}`"


@dataclass
class _Prompt:
    number: int
    text: str
    starts: list[tuple[int, str]]


def _writes(output: object) -> set[str]:
    """The state keys a task's return value updates."""
    if isinstance(output, Command):
        update = output.update
        if output.graph is not None:  # Command.PARENT: not this graph's write
            return set()
        if isinstance(update, dict):
            return {k for k in update if isinstance(k, str)}
        if isinstance(update, list | tuple):
            return {k for k, _ in update if isinstance(k, str)}
        return set()
    if isinstance(output, dict):
        return {k for k in output if isinstance(k, str) and not k.startswith("__")}
    if isinstance(output, list | tuple):
        keys: set[str] = set()
        for item in output:
            keys |= _writes(item)
        return keys
    return set()


def _calls(inputs: object) -> list[tuple[str, str]]:
    """(tool name, call id) of the tool calls a ``tools`` task was sent."""
    items = inputs if isinstance(inputs, list) else [inputs]
    out: list[tuple[str, str]] = []
    for item in items:
        call = item.get("tool_call", item) if isinstance(item, dict) else None
        if isinstance(call, dict) and "name" in call and "id" in call:
            out.append((str(call["name"]), str(call["id"])))
    return out


class Watch(BaseCallbackHandler):
    """A callback handler that turns one or more runs of ``graph`` into a :class:`Report`."""

    run_inline = True
    raise_error = False

    def __init__(self, graph: object, *, min_shared: int = MIN_SHARED) -> None:
        super().__init__()
        self.facts = graph_facts(graph)
        self.min_shared = min_shared
        self._lock = threading.Lock()
        self._tasks: dict[UUID, _Task] = {}
        self._namespaces: set[tuple[UUID, str]] = set()
        self._prompts: list[_Prompt] = []
        self._errors: list[tuple[UUID, str]] = []
        self._roots: dict[UUID, UUID] = {}
        self._runs: dict[UUID, int] = {}

    def reset(self) -> None:
        """Forget every run seen so far."""
        with self._lock:
            self._tasks.clear()
            self._namespaces.clear()
            self._prompts.clear()
            self._errors.clear()
            self._roots.clear()
            self._runs.clear()

    def _root(self, run_id: UUID, parent_run_id: UUID | None) -> UUID:
        """The run that ``run_id`` belongs to (its outermost ancestor seen), remembered."""
        if parent_run_id is None:
            root = run_id
            self._runs.setdefault(root, len(self._runs) + 1)
        else:
            root = self._roots.get(parent_run_id, parent_run_id)
        self._roots[run_id] = root
        return root

    # --- callbacks ---

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Record a task of a super-step (the first run of each task namespace in a run)."""
        meta = metadata or {}
        namespace, node, step = (
            meta.get("langgraph_checkpoint_ns"),
            meta.get("langgraph_node"),
            meta.get("langgraph_step"),
        )
        with self._lock:
            root = self._root(run_id, parent_run_id)
            if not isinstance(namespace, str) or not isinstance(step, int) or node is None:
                return
            if (root, namespace) in self._namespaces:
                return
            self._namespaces.add((root, namespace))
            agent = meta.get("lc_agent_name") if "|" in namespace else None
            self._tasks[run_id] = _Task(root, namespace, step, str(node), agent, _calls(inputs))

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """Link a tool's run to its run (a subagent's graph runs inside a tool)."""
        with self._lock:
            self._root(run_id, parent_run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Record what a task returned: the keys it updates."""
        with self._lock:
            task = self._tasks.get(run_id)
            if task is not None:
                task.writes |= _writes(outputs)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Keep the error that ended a run (``InvalidUpdateError`` names the key)."""
        if kwargs.get("parent_run_id") is None:
            text = str(error).splitlines()[0] if str(error) else ""
            with self._lock:
                self._errors.append((run_id, f"{type(error).__name__}: {text}"))

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        """Keep each prompt's text, to compare prefixes."""
        with self._lock:
            self._root(run_id, kwargs.get("parent_run_id"))
        for batch in messages:
            text, starts = prompt_text(batch)
            with self._lock:
                self._prompts.append(_Prompt(len(self._prompts) + 1, text, starts))

    # --- the report ---

    def _scope(self, task: _Task) -> GraphFacts | None:
        """The graph a task belongs to: the watched one, a graph a node runs, or a subagent."""
        scope: GraphFacts | None = self.facts
        for segment in task.namespace.split("|")[:-1]:
            if scope is None:
                return None
            node = segment.split(":", 1)[0]
            if node in scope.nested:
                scope = scope.nested[node]
            elif task.agent in scope.subagents:
                return scope.subagents[task.agent or ""]
            else:
                return None
        return scope

    def _run(self, task: _Task) -> str:
        """``the run``, or ``run 2`` once several runs were watched."""
        return f"run {self._runs.get(task.root, 0)}" if len(self._runs) > 1 else "the run"

    def _label(self, task: _Task, step: int) -> str:
        """``step 2`` for one run, ``run 2, step 2`` once several runs were watched."""
        if len(self._runs) > 1:
            return f"run {self._runs.get(task.root, 0)}, step {step}"
        return f"step {step}"

    def report(self) -> Report:
        """Every finding the runs seen so far give evidence for (each run on its own)."""
        with self._lock:
            tasks = list(self._tasks.values())
            prompts = list(self._prompts)
            errors = list(self._errors)
        found: list[Finding] = []
        batches: dict[tuple[UUID, str, int], list[_Task]] = {}
        for task in tasks:
            batches.setdefault(task.batch, []).append(task)
        order = sorted(
            batches.items(), key=lambda b: (self._runs.get(b[0][0], 0), b[0][2], b[0][1])
        )
        for (root, _, step), batch in order:
            scope = self._scope(batch[0])
            if scope is None:
                continue
            ended = [text for run, text in errors if run == root]
            found += self._parallel(scope, step, batch, ended)
            found += self._undeclared(scope, step, batch)
            found += self._blind(scope, step, batch)
        found += self._prefix(prompts)
        return Report(f"{self.facts.name} (watched)", _merged(found))

    def _parallel(
        self, scope: GraphFacts, step: int, batch: list[_Task], errors: list[str]
    ) -> list[Finding]:
        out = []
        by_key: dict[str, list[_Task]] = {}
        for task in batch:
            for key in scope.channels_written(task.writes):
                channel = scope.channels.get(key)
                if channel is not None and channel.kind == "plain":
                    by_key.setdefault(key, []).append(task)
        for key, writers in sorted(by_key.items()):
            if len(writers) < 2:
                continue
            ended = [e for e in errors if f"'{key}'" in e]
            file, line = self._where(scope, writers[0])
            out.append(
                finding(
                    "unreduced-parallel-write",
                    f"{scope.prefix()}{key}",
                    f"`{key}` has no reducer and {len(writers)} tasks of one step wrote it: "
                    f"InvalidUpdateError. {reducer_fix(scope.key_kind(key))}",
                    evidence=[
                        f"{self._label(writers[0], step)}: "
                        + "; ".join(t.label() for t in writers),
                        *(f"{self._run(writers[0])} ended with {e}" for e in ended[:1]),
                    ],
                    file=file,
                    line=line,
                )
            )
        return out

    @staticmethod
    def _where(scope: GraphFacts, task: _Task) -> tuple[str | None, int | None]:
        if task.calls:
            return scope.where_tool(task.calls[0][0])
        return scope.where_node(task.node)

    def _undeclared(self, scope: GraphFacts, step: int, batch: list[_Task]) -> list[Finding]:
        out = []
        for task in batch:
            node = scope.nodes.get(task.node)
            if node is not None and node.subgraph:
                continue  # a subgraph's private keys: the parent ignores them by design
            for key in sorted(k for k in task.writes if not scope.declares(k)):
                code = "subagent-drops-key" if scope.kind == "subagent" else "undeclared-key"
                file, line = self._where(scope, task)
                out.append(
                    finding(
                        code,
                        f"{scope.prefix()}{key}",
                        f"a write to `{key}`, which "
                        f"{'the subagent' if scope.kind == 'subagent' else 'the graph'} does "
                        "not declare, was dropped silently. Declare the key.",
                        evidence=[f"{self._label(task, step)}: {task.label()} wrote `{key}`"],
                        file=file,
                        line=line,
                    )
                )
        return out

    def _blind(self, scope: GraphFacts, step: int, batch: list[_Task]) -> list[Finding]:
        out = []
        caches = [m for m in scope.middleware if isinstance(m, TurnCacheMiddleware)]
        for reader in batch:
            for name, call_id in reader.calls:
                tool = scope.tools.get(name)
                reads = tool.code.reads - IGNORED_READS if tool is not None else set()
                for key in sorted(reads):
                    writers = [
                        (w_name, w_id)
                        for other in batch
                        if other is not reader and key in other.writes
                        for w_name, w_id in other.calls
                        if not _library_pair(scope, name, w_name)
                        and not any(
                            c.key == key and w_name in c.writers and name in c.readers
                            for c in caches
                        )
                    ]
                    if not writers:
                        continue
                    shown = ", ".join(f"`{w}` (call {i})" for w, i in writers)
                    out.append(
                        finding(
                            "same-batch-read",
                            f"{scope.prefix()}{key}",
                            f"a reader of `{key}` ran in the batch of its writers and saw the "
                            "state from before them. Add `TurnCacheMiddleware` for the pair.",
                            evidence=[
                                f"{self._label(reader, step)}: `{name}` (call {call_id}) ran "
                                f"beside {shown}, which wrote `{key}`"
                            ],
                            file=scope.where_tool(name)[0],
                            line=scope.where_tool(name)[1],
                        )
                    )
        return out

    def _prefix(self, prompts: Sequence[_Prompt]) -> list[Finding]:
        out = []
        for i, later in enumerate(prompts):
            for j in sorted({0, *range(max(0, i - RECENT), i)} - {i}):
                earlier = prompts[j]
                gap = divergence(earlier.text, later.text)
                if gap is None or gap.shared < self.min_shared or gap.shared <= gap.prefix:
                    continue
                out.append(
                    finding(
                        "prefix-not-invariant",
                        "model prompts",
                        "two model calls differ before a large shared part, so a prefix "
                        "cache reuses nothing of it. Put everything that changes (time, "
                        "ids, persona, history) after the invariant part.",
                        evidence=[
                            f"calls {earlier.number} and {later.number} diverge at offset "
                            f"{gap.prefix} ({where(gap.prefix, later.starts)}): "
                            f"{gap.text_a[-80:]!r} vs {gap.text_b[-80:]!r}; the next "
                            f"{gap.shared:,} characters are the same in both"
                        ],
                    )
                )
                break
        return out


def _library_pair(scope: GraphFacts, reader: str, writer: str) -> bool:
    """True when both tools are the libraries' own (their own guards apply)."""
    a, b = scope.tools.get(reader), scope.tools.get(writer)
    return a is not None and b is not None and a.library and b.library


def _merged(found: list[Finding]) -> list[Finding]:
    """One finding per (code, subject), with the evidence of every occurrence."""
    merged: dict[tuple[str, str], Finding] = {}
    for f in found:
        key = (f.code, f.subject)
        if key in merged:
            old = merged[key]
            evidence = tuple(dict.fromkeys([*old.evidence, *f.evidence]))
            merged[key] = dataclasses.replace(old, evidence=evidence)
        else:
            merged[key] = f
    return list(merged.values())
