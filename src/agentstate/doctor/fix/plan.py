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
  (notebook 02);
- ``subagent-drops-key``: the parent's schema handed to its declarative
  subagents, ``create_deep_agent(..., state_schema=S)``, or the key declared
  on the schema class a compiled subagent runs with (notebook 04);
- ``list-doubled-by-subagent``: the appending reducer swapped for one that
  keeps each item once, ``append_unique`` (a list) or ``add_messages``
  (notebook 04, going further 04);
- ``same-batch-read``: ``TurnCacheMiddleware`` added to the agent's
  ``middleware=[...]`` (notebook 03), always unsafe: a dependency on agentstate.

The other codes, and the shapes above no edit is clearly right for, get a
``NoFix``: one line saying why, pointing at the code's page.

A fix is *safe* when it only makes the writes the code already makes land: a
reducer where every writer writes a literal list or dict of new items
(``{"notes": [text]}``); *unsafe* when it also changes what another write
does: a writer that hands over a whole value (``{"todos": todos}``) or reads
the key and writes it back would then add to the old value instead of
replacing it, a subagent would receive every key of the schema it is handed,
an item written twice on purpose would be kept once, or the code would come
to depend on agentstate. Applied by :mod:`agentstate.doctor.fix.apply`; shown in
lessons 01-04's doctor cells by :mod:`agentstate.doctor.fix.preview`.
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

from agentstate.doctor.checks.same_batch_read import blind_pairs
from agentstate.doctor.facts import sources
from agentstate.doctor.facts.bindings import binder
from agentstate.doctor.facts.code_source import tool_functions
from agentstate.doctor.facts.graph_facts import EXCLUDED_BY_TASK, GraphFacts
from agentstate.doctor.facts.key_kinds import schema_hints
from agentstate.doctor.facts.locate import function_of
from agentstate.doctor.facts.subgraphs import writes
from agentstate.doctor.fix.call_edits import (
    add_keyword,
    add_to_list_keyword,
    call_index,
    line_width,
)
from agentstate.doctor.fix.imports import Name
from agentstate.doctor.fix.source_edits import (
    OPERATOR,
    EditError,
    SchemaKind,
    add_reducer,
    declare_key,
    swap_reducer,
)
from agentstate.doctor.report.findings import Finding, FixKind
from agentstate.doctor.report.suppression import is_project_file

ADD_MESSAGES = Name("langgraph.graph.message", "add_messages")
APPEND_UNIQUE = Name("agentstate.core", "append_unique")
TURN_CACHE = Name("agentstate.core", "TurnCacheMiddleware")
DEEP = frozenset({"create_deep_agent"})
AGENTS = frozenset({"create_agent", "create_deep_agent"})

FIXABLE = (
    "unreduced-parallel-write",
    "undeclared-key",
    "subagent-drops-key",
    "list-doubled-by-subagent",
    "same-batch-read",
)
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


def _place(cls: type) -> tuple[str, int] | None:
    """``(file, line)`` of ``class Name`` (a notebook cell's while the doctor reads cells)."""
    return _located(cls, sources.reading())


@functools.lru_cache(maxsize=512)
def _located(cls: type, cells: bool) -> tuple[str, int] | None:
    place = sources.class_place(cls)
    if place is None:
        return None
    file, line = place
    return (file if sources.is_cell(file) else str(Path(file).resolve())), line


def _own_declaration(cls: type, key: str) -> tuple[str, ast.AnnAssign] | None:
    """``cls``'s file and the ``key: ...`` line of its own body (None: inherited or unread)."""
    place = _place(cls)
    text = _source(place[0]) if place else None
    try:
        tree = ast.parse(text) if text is not None else None
    except SyntaxError:
        return None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.target.id == key
                ):
                    return text or "", stmt
    return None


def _declares_itself(cls: type, key: str) -> bool:
    """True when ``key`` is written in ``cls``'s own body (not only inherited)."""
    return _own_declaration(cls, key) is not None


@functools.lru_cache(maxsize=8192)
def _in_project(file: str, roots: tuple[Path, ...]) -> bool:
    """:func:`is_project_file`, once per module file: a plan asks it of every module for every
    finding, and resolving a path is the slow part."""
    return is_project_file(file, roots)


def _project_classes(roots: tuple[Path, ...]) -> Iterator[type]:
    """State-like classes (TypedDict, pydantic, dataclass) defined in the project's modules."""
    prefixes = tuple({str(r) for r in roots} | {str(Path(r).resolve()) for r in roots})
    cells = sources.reading()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if cells and file is None:  # a kernel's __main__: its classes live in its cells
            placed = [(v, _place(v)) for v in _schemas(module)]
            yield from (v for v, p in placed if p is not None and _in_project(p[0], roots))
            continue
        if not isinstance(file, str) or not file.startswith(prefixes):
            continue  # most modules are the libraries': not even resolved
        if _in_project(file, roots):
            yield from _schemas(module)


def _schemas(module: object) -> Iterator[type]:
    """The state-like classes ``module`` defines itself."""
    for value in list(vars(module).values()):
        if (
            isinstance(value, type)
            and getattr(value, "__module__", None) == getattr(module, "__name__", None)
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


def _page(code: str) -> str:
    return f"docs/doctor/{code}.md"


def _source(file: str) -> str | None:
    return sources.read(file)


def _top(scope: GraphFacts) -> GraphFacts:
    while scope.parent is not None:
        scope = scope.parent
    return scope


def _call_place(
    scope: GraphFacts, called: frozenset[str], roots: tuple[Path, ...]
) -> tuple[str, int, int] | str:
    """``(file, which call, line width)`` of the reader's call of ``called`` that builds the
    graph ``scope`` belongs to, or why it cannot be told."""
    top = _top(scope)
    file, line = binder(top.own_files(), top.origin or (top.graph,), called)
    if file is None or line is None:
        file, line = _call_naming(scope, called, top.own_files(), roots)
    if file is None or line is None:
        shown = " or ".join(f"`{c}(...)`" for c in sorted(called))
        return f"the doctor cannot tell which {shown} call builds the agent"
    text = _source(file)
    if text is None:
        return f"{file} cannot be read"
    try:
        return str(Path(file).resolve()), call_index(text, called, line), line_width(file)
    except EditError as exc:
        return str(exc)


def _call_naming(
    scope: GraphFacts, called: frozenset[str], files: Iterable[str], roots: tuple[Path, ...]
) -> tuple[str | None, int | None]:
    """The one call of ``called`` in ``files`` that names the graph's own state class
    (``state_schema=S``) or one of its tools (``tools=[t]``); ``(None, None)`` if not one."""
    names = {c.__name__ for c in state_classes(scope, roots)} | set(scope.tools)
    builder_schema = getattr(getattr(scope.graph, "builder", None), "state_schema", None)
    names |= {getattr(builder_schema, "__name__", "")} - {""}
    found: list[tuple[str, int]] = []
    for file in sorted(set(files)):
        text = _source(file)
        try:
            tree = ast.parse(text or "")
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in called:
                continue
            used = {n.id for arg in (*node.args, *(k.value for k in node.keywords))
                    for n in ast.walk(arg) if isinstance(n, ast.Name)}  # fmt: skip
            if used & names:
                found.append((file, node.lineno))
    return found[0] if len(found) == 1 else (None, None)


def _import_of(cls: type, file: str) -> Name | None | str:
    """What the file that gets ``cls``'s name needs: nothing (defined there), an import, or why
    it cannot name it."""
    place = _place(cls)
    if place is None:
        return f"`{cls.__name__}`'s source cannot be read"
    if place[0] == file or (sources.is_cell(place[0]) and sources.is_cell(file)):
        return None  # the same file, or two cells of one notebook (one namespace)
    module = sys.modules.get(cls.__module__)
    found = getattr(module, "__file__", None)
    if cls.__module__ == "__main__" or not found or str(Path(found).resolve()) != place[0]:
        return f"`{cls.__name__}` is defined in a module the agent's file cannot import by name"
    return Name(cls.__module__, cls.__name__)


def _spec_of(scope: GraphFacts) -> dict[str, object] | None:
    """The subagent's spec as deepagents keeps it (``SubAgentMiddleware``), if found."""
    parent = scope.parent
    for middleware in parent.middleware if parent is not None else ():
        for spec in getattr(middleware, "_subagents", None) or ():
            if isinstance(spec, dict) and spec.get("name") == scope.name:
                return spec
    return None


def _given_schema(parent: GraphFacts) -> object:
    """The ``state_schema`` the parent's ``create_deep_agent`` passes to its subagents."""
    for middleware in parent.middleware:
        if hasattr(middleware, "_subagents"):
            return getattr(middleware, "_state_schema", None)
    return None


def _dropped(parent: GraphFacts) -> set[str]:
    """Keys a subagent's own tools write and its schema lacks (each a subagent-drops-key)."""
    return {
        key
        for sub in parent.subagents.values()
        for tool in sub.tools.values()
        if not tool.library
        for key in tool.code.writes
        if not sub.declares(key)
    }


def _share_schema_fix(finding: Finding, scope: GraphFacts, roots: tuple[Path, ...]) -> Fix | NoFix:
    """``create_deep_agent(..., state_schema=S)``: the parent's schema handed to its declarative
    subagents (notebook 04, the page's fix)."""
    key, code, page = _key(finding, scope), finding.code, _page(finding.code)
    parent = scope.parent
    spec = _spec_of(scope)
    if parent is None or spec is None:
        return NoFix(code, finding.subject, f"the subagent's spec cannot be found; see {page}")
    if "runnable" in spec or "graph_id" in spec:
        return _declare_on_subagent(finding, scope, parent, roots) or NoFix(
            code,
            finding.subject,
            f"subagent `{scope.name}` is a graph compiled by your code: build it with the "
            f"parent's schema (`create_agent(..., state_schema=S)` or `middleware="
            f"[SharedStateMiddleware(S)]`); see {page}",
        )
    given = _given_schema(parent)
    if given is not None:
        return NoFix(
            code,
            finding.subject,
            f"`create_deep_agent` passes `state_schema={getattr(given, '__name__', given)}` "
            f"already, without `{key}`: declare `{key}` on it; see {page}",
        )
    schemas = [
        c
        for c in state_classes(parent, roots)
        if key in schema_hints(c) and schema_kind(c) == "typeddict"
    ]
    if not schemas:
        return NoFix(
            code,
            finding.subject,
            f"the parent does not declare `{key}` in a schema of your files either: declare it "
            f"there, then pass it as `create_deep_agent(..., state_schema=S)`; see {page}",
        )
    schema = schemas[0]
    place = _call_place(parent, DEEP, roots)
    if isinstance(place, str):
        return NoFix(code, finding.subject, f"{place}; see {page}")
    file, at, width = place
    needed = _import_of(schema, file)
    if isinstance(needed, str):
        return NoFix(code, finding.subject, f"{needed}; see {page}")
    added = set(schema_hints(schema)) - set(scope.channels) - EXCLUDED_BY_TASK
    doubled = sorted(k for k in added if k in parent.channels and parent.channels[k].concatenates)
    # safe: the subagents gain only the keys their writes were lost to, none of them appended
    safe = added <= _dropped(parent) and not doubled
    return Fix(
        code,
        finding.subject,
        "safe" if safe else "unsafe",
        f"`create_deep_agent(...)` hands `{schema.__name__}` to its subagents "
        f"(`state_schema={schema.__name__}`)",
        file,
        functools.partial(
            _add_keyword,
            at=at,
            keyword="state_schema",
            value=schema.__name__,
            needed=(needed,) if needed is not None else (),
            width=width,
        ),
    )


def _annotation_text(cls: type, key: str) -> str | None:
    """How ``cls``'s own body writes ``key``'s annotation (``Annotated[..., merge_fields]``)."""
    found = _own_declaration(cls, key)
    return ast.get_source_segment(found[0], found[1].annotation) if found else None


def _declare_on_subagent(
    finding: Finding, scope: GraphFacts, parent: GraphFacts, roots: tuple[Path, ...]
) -> Fix | None:
    """A subagent compiled by the reader's code, with a schema class of the reader's: the key
    declared on it as the parent declares it (its reducer too), when both classes share a file
    (the annotation's names are then in scope). None when that shape is not there."""
    key = _key(finding, scope)
    own = [c for c in state_classes(scope, roots) if schema_kind(c) == "typeddict"]
    home = declaring_class(parent, key, roots)
    if not own or home is None:
        return None
    target, at, there = own[0], _place(own[0]), _place(home)
    annotation = _annotation_text(home, key)
    if at is None or there is None or at[0] != there[0] or annotation is None:
        return None
    doubles = key in parent.channels and parent.channels[key].concatenates
    return Fix(
        finding.code,
        finding.subject,
        "unsafe" if doubles else "safe",  # an appended list would come back doubled
        f"`{target.__name__}` declares `{key}: {annotation}` as the parent does",
        at[0],
        functools.partial(
            _declare,
            class_name=target.__name__,
            line=at[1],
            key=key,
            type_text=annotation,
            kind="class",  # the parent's annotation as it is written (NotRequired included)
        ),
    )


def _add_keyword(
    source: str, *, at: int, keyword: str, value: str, needed: tuple[Name, ...], width: int
) -> str:
    return add_keyword(source, DEEP, at, keyword, value, needed, width)


def _doubled_key(finding: Finding, scope: GraphFacts) -> tuple[str, GraphFacts]:
    """The key a finding names and the graph whose reducer appends it (the parent of a
    subagent; the graph itself for a subgraph node or a ``Send`` worker: ``node > key``)."""
    rest = _key(finding, scope)
    if " > " in rest:
        return rest.rsplit(" > ", 1)[1], scope
    return rest, scope.parent if scope.kind == "subagent" and scope.parent else scope


_UNHASHABLE = (dict, list, set)


def _hashable_items(cls: type, key: str) -> bool:
    """False when the list's items are declared as something ``append_unique`` cannot hash
    (dicts, lists, a TypedDict, a pydantic model)."""
    import typing

    from agentstate.doctor.facts.key_kinds import _strip

    hint = _strip(schema_hints(cls).get(key))
    args = typing.get_args(hint)
    if not args:
        return True
    item = _strip(args[0])
    origin = typing.get_origin(item) or item
    if origin in _UNHASHABLE or (isinstance(item, type) and typing_extensions.is_typeddict(item)):
        return False
    return not isinstance(getattr(item, "model_fields", None), dict)


def _unique_fix(finding: Finding, scope: GraphFacts, roots: tuple[Path, ...]) -> Fix | NoFix:
    """The appending reducer swapped for one that keeps each item once: ``append_unique`` for a
    list, ``add_messages`` (by id) for messages (notebook 04, going further 04)."""
    key, owner = _doubled_key(finding, scope)
    code, page = finding.code, _page(finding.code)
    kind = owner.key_kind(key)
    if kind not in ("list", "messages"):
        return NoFix(
            code,
            finding.subject,
            f"`{key}` is a {'string' if kind == 'str' else kind} appended to itself: no "
            f"reducer keeps one copy, so the doctor writes none (give the subgraph an output "
            f"schema without `{key}`; see {page})",
        )
    cls = declaring_class(owner, key, roots)
    if cls is None:
        return NoFix(
            code,
            finding.subject,
            f"`{key}` is declared by a library's schema, not in your files; see {page}",
        )
    place = _place(cls)
    assert place is not None
    if kind == "messages":
        reducer, shown, safe = ADD_MESSAGES, "add_messages", True
    else:
        if not _hashable_items(cls, key):
            return NoFix(
                code,
                finding.subject,
                f"`{key}` holds dicts or lists, which `append_unique` cannot compare: merge "
                f"them by id; see {page}",
            )
        # unsafe: it adds a dependency on agentstate, and drops an item written twice on purpose
        reducer, shown, safe = APPEND_UNIQUE, "append_unique", False
    return Fix(
        code,
        finding.subject,
        "safe" if safe else "unsafe",
        f"`{cls.__name__}.{key}` gets the reducer `{shown}` (each item kept once)",
        place[0],
        functools.partial(_swap, class_name=cls.__name__, line=place[1], key=key, reducer=reducer),
    )


def _swap(source: str, *, class_name: str, line: int, key: str, reducer: Name) -> str:
    return swap_reducer(source, class_name, line, key, reducer)


def _turn_cache_fix(finding: Finding, scope: GraphFacts, roots: tuple[Path, ...]) -> Fix | NoFix:
    """``TurnCacheMiddleware(writers=..., readers=..., key=...)`` added to the agent's
    ``middleware=[...]`` (notebook 03). Unsafe: it makes the agent depend on agentstate."""
    key, code, page = _key(finding, scope), finding.code, _page(finding.code)
    if scope.parent is not None:
        return NoFix(
            code,
            finding.subject,
            f"the reader is in subagent `{scope.name}`: add the turn cache to its middleware; "
            f"see {page}",
        )
    from agentstate.core.turn_cache import TurnCacheMiddleware

    if any(getattr(m, "key", None) == key for m in scope.middleware_of(TurnCacheMiddleware)):
        return NoFix(  # a second cache of the key would share its name: create_agent refuses
            code,
            finding.subject,
            f"a turn cache of `{key}` is there already: add the reader and its writers to it; "
            f"see {page}",
        )
    pairs = {r: w for (r, k), w in blind_pairs(scope).items() if k == key}
    if not pairs:
        return NoFix(code, finding.subject, f"no reader and writer of `{key}` found; see {page}")
    readers = sorted(pairs)
    writers = sorted({w for ws in pairs.values() for w in ws})
    place = _call_place(scope, AGENTS, roots)
    if isinstance(place, str):
        return NoFix(code, finding.subject, f"{place}; see {page}")
    file, at, width = place

    def listed(names: list[str]) -> str:
        return "[" + ", ".join(f'"{n}"' for n in names) + "]"

    reducer = _cache_reducer(scope, key)
    if reducer is None:
        return NoFix(
            code,
            finding.subject,
            f"`{key}`'s reducer cannot be named in the agent's file: pass it to the turn cache "
            f"by hand (`reducer=`); see {page}",
        )
    item = (
        f'TurnCacheMiddleware(writers={listed(writers)}, readers={listed(readers)}, key="{key}"'
        f"{reducer[0]})"
    )
    return Fix(
        code,
        finding.subject,
        "unsafe",
        f"the agent's middleware gets `{item}`",
        file,
        functools.partial(_add_middleware, at=at, item=item, width=width, needed=reducer[1]),
    )


def _cache_reducer(scope: GraphFacts, key: str) -> tuple[str, tuple[Name, ...]] | None:
    """The turn cache's ``reducer=`` argument mirroring the key's (the cache applies the
    batch's writes through it), with the import it needs; None when it cannot be written."""
    from agentstate.core.reducers import merge_fields

    channel = scope.channels.get(key)
    reducer = channel.reducer if channel is not None else None
    if reducer is None:  # a plain key: the step's last write is what LangGraph keeps
        return ", reducer=lambda _, new: new", ()
    if reducer is merge_fields:
        return "", ()
    for module, attr in (("operator", "add"), ("operator", "or_")):
        if reducer is getattr(sys.modules[module], attr, None):
            return f", reducer={module}.{attr}", (Name(module),)
    if reducer is getattr(sys.modules.get("langgraph.graph.message"), "add_messages", None):
        return ", reducer=add_messages", (ADD_MESSAGES,)
    return None


def _add_middleware(
    source: str, *, at: int, item: str, width: int, needed: tuple[Name, ...]
) -> str:
    return add_to_list_keyword(source, AGENTS, at, "middleware", item, (TURN_CACHE, *needed), width)


PLANNERS: dict[str, Callable[[Finding, GraphFacts, tuple[Path, ...]], Fix | NoFix]] = {
    "unreduced-parallel-write": _reducer_fix,
    "undeclared-key": _declare_fix,
    "subagent-drops-key": _share_schema_fix,
    "list-doubled-by-subagent": _unique_fix,
    "same-batch-read": _turn_cache_fix,
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
