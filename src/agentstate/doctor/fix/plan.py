"""Which edit fixes a finding: the fix each code's page documents, placed in the reader's file.

A finding names a code and a key; the plan finds the state schema class that
declares the key (or that the writer's graph runs with, for a key it lacks),
in the reader's own files (never an installed library's), and says what to
write there:

- ``unreduced-parallel-write``: a reducer fitting the key's type: a list is
  concatenated (``operator.add``), a dict merged (``operator.or_``), messages by
  id (``add_messages``); a string or a number has no reducer that keeps both
  values, so no edit (notebook 02);
- ``undeclared-key``: the key declared on the graph's state, typed by what is
  written where the code says it (a list, a dict, a string...), else ``Any``
  (notebook 02).

The other codes have no edit the doctor can be sure of: their findings keep
the page's fix in words. A fix is *safe* when it only makes the writes the
code already makes land: a reducer where every writer writes a literal list or
dict of new items (``{"notes": [text]}``); *unsafe* when it also changes what
another write does: a writer that hands over a whole value (``{"todos":
todos}``) or reads the key and writes it back would then add to the old value
instead of replacing it. Applied by :mod:`agentstate.doctor.fix.apply`.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import typing_extensions

from agentstate.doctor.facts.code_source import tool_functions
from agentstate.doctor.facts.graph_facts import GraphFacts
from agentstate.doctor.facts.key_kinds import schema_hints
from agentstate.doctor.facts.locate import function_of
from agentstate.doctor.facts.subgraphs import writes
from agentstate.doctor.fix.imports import Name
from agentstate.doctor.fix.source_edits import OPERATOR, SchemaKind, add_reducer, declare_key
from agentstate.doctor.report.findings import Finding, FixKind
from agentstate.doctor.report.suppression import is_project_file

ADD_MESSAGES = Name("langgraph.graph.message", "add_messages")

FIXABLE = ("unreduced-parallel-write", "undeclared-key")
"""The codes with an automatic edit; the others' pages show the fix in words."""


@dataclass(frozen=True)
class Fix:
    """One edit of one file that removes one finding."""

    code: str
    subject: str
    applicability: FixKind
    title: str
    """What the edit does, in one line: "`notes` gets the reducer `operator.add`"."""
    file: str
    edit: Callable[[str], str] = dataclasses.field(compare=False, repr=False)
    """The file's source in, the fixed source out (the same source when nothing is left to do)."""


@dataclass(frozen=True)
class NoFix:
    """Why a finding gets no edit (one line, shown beside the finding)."""

    code: str
    subject: str
    reason: str


def _key(finding: Finding, scope: GraphFacts) -> str:
    return finding.subject[len(scope.prefix()) :]


def _scope_of(finding: Finding, scopes: list[GraphFacts]) -> GraphFacts | None:
    """The deepest scope whose prefix the finding's subject starts with."""
    best: GraphFacts | None = None
    for scope in scopes:
        prefix = scope.prefix()
        if finding.subject.startswith(prefix) and (
            best is None or len(prefix) > len(best.prefix())
        ):
            best = scope
    return best


def schema_kind(cls: type) -> SchemaKind:
    """How ``cls`` declares its keys."""
    if typing_extensions.is_typeddict(cls):  # LangChain's AgentState is typing_extensions'
        return "typeddict"
    if isinstance(getattr(cls, "model_fields", None), dict):
        return "pydantic"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    return "class"


def _bases(cls: type) -> Iterator[type]:
    """``cls`` and the classes it inherits keys from (a TypedDict's through ``__orig_bases__``)."""
    seen: set[int] = set()
    frontier: list[type] = [cls]
    while frontier:
        current = frontier.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for base in (*getattr(current, "__orig_bases__", ()), *current.__bases__):
            if isinstance(base, type) and base not in (object, dict):
                frontier.append(base)


@functools.lru_cache(maxsize=512)
def _place(cls: type) -> tuple[str, int] | None:
    try:
        file = inspect.getsourcefile(cls)
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return None
    return (str(Path(file).resolve()), line) if file else None


def _declares_itself(cls: type, key: str) -> bool:
    """True when ``key`` is written in ``cls``'s own body (not only inherited)."""
    place = _place(cls)
    if place is None:
        return False
    try:
        tree = ast.parse(Path(place[0]).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.target.id == key
                ):
                    return True
    return False


def _project_classes(roots: tuple[Path, ...]) -> Iterator[type]:
    """State-like classes (TypedDict, pydantic, dataclass) defined in the project's modules."""
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file or not is_project_file(file, roots):
            continue
        for value in list(vars(module).values()):
            if (
                isinstance(value, type)
                and getattr(value, "__module__", None) == module.__name__
                and schema_kind(value) != "class"
            ):
                yield value


def state_classes(scope: GraphFacts, roots: tuple[Path, ...]) -> list[type]:
    """The reader's classes the scope's state is made of, the graph's own schema first.

    ``StateGraph(S)`` keeps ``S``; ``create_agent(state_schema=S)`` merges ``S`` with
    its middleware's schemas into a class of its own, so ``S`` is found among the
    project's classes whose keys all are channels of the graph.
    """
    builder = getattr(scope.graph, "builder", None)
    direct = [getattr(builder, "state_schema", None)]
    direct += [getattr(m, "state_schema", None) for m in scope.middleware]
    found: list[type] = []
    for cls in direct:
        if isinstance(cls, type) and _place(cls) and is_project_file(_place(cls)[0], roots):  # type: ignore[index]
            found.append(cls)
    channels = set(scope.channels)
    matches = [
        cls
        for cls in _project_classes(roots)
        if cls not in found and (keys := set(schema_hints(cls))) and keys <= channels
    ]
    matches.sort(key=lambda c: -len(schema_hints(c)))
    return found + matches


def declaring_class(scope: GraphFacts, key: str, roots: tuple[Path, ...]) -> type | None:
    """The reader's class whose own body declares ``key`` (where its reducer goes)."""
    for cls in state_classes(scope, roots):
        if key not in schema_hints(cls):
            continue
        for base in _bases(cls):
            place = _place(base)
            if place and is_project_file(place[0], roots) and _declares_itself(base, key):
                return base
    return None


def _writer_functions(scope: GraphFacts, key: str) -> Iterator[tuple[str, object]]:
    for tool in scope.tools.values():
        if key in tool.code.writes and not tool.library:
            for fn in tool_functions(tool.tool):
                yield tool.name, fn
    builder = getattr(scope.graph, "builder", None)
    for node in scope.nodes.values():
        if node.code is not None and key in node.code.writes and builder is not None:
            spec = builder.nodes.get(node.name)
            runnable = getattr(spec, "runnable", None)
            for attr in ("func", "afunc"):
                found: object = getattr(runnable, attr, None)
                if found is not None:
                    yield node.name, found


def _readers(scope: GraphFacts, key: str) -> list[str]:
    """The writers of ``key`` that also read it (a read-modify-write of the whole value)."""
    out = [t.name for t in scope.tools.values() if key in t.code.writes and key in t.code.reads]
    out += [
        n.name
        for n in scope.nodes.values()
        if n.code is not None and key in n.code.writes and key in n.code.reads
    ]
    return sorted(out)


_LITERALS: dict[type, str] = {
    ast.List: "list",
    ast.ListComp: "list",
    ast.Dict: "dict",
    ast.DictComp: "dict",
    ast.JoinedStr: "str",
    ast.Set: "set",
}


def _type_of(value: ast.expr) -> str | None:
    if isinstance(value, ast.Constant):
        if isinstance(value.value, bool):
            return "bool"
        for kind in (str, int, float):
            if isinstance(value.value, kind):
                return kind.__name__
        return None
    return _LITERALS.get(type(value))


def _written(scope: GraphFacts, key: str) -> list[ast.expr | None]:
    """The expressions the writers put under ``key`` (``{"key": <expr>}``), ``None`` for a
    writer whose source cannot be read."""
    out: list[ast.expr | None] = []
    for _, fn in _writer_functions(scope, key):
        plain = function_of(fn)
        if plain is None:
            out.append(None)
            continue
        try:
            tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(plain)))
        except (OSError, TypeError, SyntaxError):
            out.append(None)
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == key:
                        out.append(v)
    return out


def written_type(scope: GraphFacts, key: str) -> str:
    """The type of what the writers put under ``key`` (``{"key": [...]}`` is a list), if every
    write the code shows agrees; else ``Any``."""
    seen = {None if v is None else _type_of(v) for v in _written(scope, key)}
    if len(seen) == 1:
        (only,) = seen
        if only is not None:
            return only
    return "Any"


def _new_items_only(scope: GraphFacts, key: str) -> bool:
    """True when every write of ``key`` is a literal list or dict of new items
    (``{"notes": [text]}``), never a whole value handed over (``{"todos": todos}``), which a
    reducer would add to the old value instead of replacing it."""
    values = _written(scope, key)
    displays = (ast.List, ast.ListComp, ast.Dict, ast.DictComp)
    return bool(values) and all(isinstance(v, displays) for v in values)


def _handed_back(scope: GraphFacts, key: str) -> list[str]:
    """The subgraph nodes that hand ``key`` back whole (a compiled graph used as a node)."""
    return sorted(
        n.name for n in scope.nodes.values() if n.subgraph and key in writes(scope, n.name)
    )


def _reducer_for(scope: GraphFacts, key: str) -> tuple[Name, str] | str:
    """The reducer to add, or why there is none."""
    kind = scope.key_kind(key)
    handed = _handed_back(scope, key)
    if handed and kind in ("list", "messages"):
        return (
            f"{', '.join(f'`{n}`' for n in handed)} hand `{key}` back whole (a subgraph returns "
            "the value it was given): with a concatenating reducer it would be added again. "
            "Give the subgraph an output schema without the key"
        )
    if kind == "list":
        readers = _readers(scope, key)
        if readers:
            return (
                f"{', '.join(f'`{r}`' for r in readers)} read `{key}` and write it back whole: "
                "with `operator.add` the old items would be added again. Write only the new "
                "items, then add the reducer (docs/doctor/unreduced-parallel-write.md)"
            )
        return OPERATOR, "add"
    if kind == "dict":
        return OPERATOR, "or_"
    if kind == "messages":
        return ADD_MESSAGES, ""
    if kind in ("str", "number"):
        return (
            f"`{key}` is a {'string' if kind == 'str' else 'number'}: no reducer keeps both "
            "values, so the doctor writes none (keep one writer per step, or make it a list)"
        )
    if kind == "root":
        return "`StateGraph(dict)` has one value for the whole state: declare a TypedDict state"
    return f"the doctor cannot read `{key}`'s type, so it cannot choose a reducer"


def _reducer_fix(finding: Finding, scope: GraphFacts, roots: tuple[Path, ...]) -> Fix | NoFix:
    key = _key(finding, scope)
    choice = _reducer_for(scope, key)
    if isinstance(choice, str):
        return NoFix(finding.code, finding.subject, choice)
    cls = declaring_class(scope, key, roots)
    if cls is None:
        why = (
            f"`{key}` is declared by a library's schema, not in the project's files: declare "
            "it with a reducer in a state schema of your own"
        )
        return NoFix(finding.code, finding.subject, why)
    reducer, member = choice
    place = _place(cls)
    assert place is not None
    shown = f"{reducer.module}.{member}" if reducer.attr is None else reducer.attr
    unsafe = bool(_readers(scope, key) or _handed_back(scope, key)) or not _new_items_only(
        scope, key
    )
    return Fix(
        finding.code,
        finding.subject,
        "unsafe" if unsafe else "safe",
        f"`{cls.__name__}.{key}` gets the reducer `{shown}`",
        place[0],
        functools.partial(
            _add_reducer,
            class_name=cls.__name__,
            line=place[1],
            key=key,
            reducer=reducer,
            member=member,
        ),
    )


def _add_reducer(
    source: str, *, class_name: str, line: int, key: str, reducer: Name, member: str
) -> str:
    return add_reducer(source, class_name, line, key, reducer, member)


def _declare_fix(finding: Finding, scope: GraphFacts, roots: tuple[Path, ...]) -> Fix | NoFix:
    key = _key(finding, scope)
    classes = [c for c in state_classes(scope, roots) if schema_kind(c) != "class" and _place(c)]
    if not classes:
        return NoFix(
            finding.code,
            finding.subject,
            "the graph's state is a library's class: declare a schema of your own with "
            f"`{key}` and pass it (`state_schema=`)",
        )
    cls = classes[0]
    place = _place(cls)
    assert place is not None
    type_text = written_type(scope, key)
    return Fix(
        finding.code,
        finding.subject,
        "safe",
        f"`{cls.__name__}` declares `{key}: {type_text}`",
        place[0],
        functools.partial(
            _declare,
            class_name=cls.__name__,
            line=place[1],
            key=key,
            type_text=type_text,
            kind=schema_kind(cls),
        ),
    )


def _declare(
    source: str, *, class_name: str, line: int, key: str, type_text: str, kind: SchemaKind
) -> str:
    return declare_key(source, class_name, line, key, type_text, kind)


PLANNERS: dict[str, Callable[[Finding, GraphFacts, tuple[Path, ...]], Fix | NoFix]] = {
    "unreduced-parallel-write": _reducer_fix,
    "undeclared-key": _declare_fix,
}


def plan(
    facts: GraphFacts, findings: Iterable[Finding], roots: tuple[Path, ...]
) -> list[Fix | NoFix]:
    """A fix (or why none) for each finding of a code that has one; errors and warnings only."""
    scopes = list(facts.scopes())
    out: list[Fix | NoFix] = []
    for finding in findings:
        planner = PLANNERS.get(finding.code)
        if planner is None or finding.severity == "info":
            continue
        scope = _scope_of(finding, scopes)
        if scope is None:
            continue
        out.append(planner(finding, scope, roots))
    return out
