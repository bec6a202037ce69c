"""The graphs ``agentstate doctor`` is given, loaded as ``langgraph dev`` loads them.

A target is ``module:attr``, ``path/to/file.py:attr``, or a ``langgraph.json``
listing them. As ``langgraph dev`` does, the json's ``env`` is set first
(:mod:`.environment`), and the project's directory (the json's own) and the
json's local ``dependencies`` go on ``sys.path`` (a package's ``src/`` too,
where ``pip install -e .`` would put it); the value may be a
compiled graph, a ``StateGraph`` (compiled here), or a factory taking nothing,
a ``config``, a ``ServerRuntime`` or both, sync or async, returning a graph or
a context manager that yields one. Every failure is a :class:`TargetError`
whose message is one line naming its cause; a file is ``stat``-ed before it is
opened, so a FIFO or a device is refused, never read (:mod:`.files`). Nothing heavy is
imported before a target is. Used by :mod:`agentstate.doctor.report.cli` (the hazards
of notebooks 01-06).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import stat
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from agentstate.doctor.report import environment
from agentstate.doctor.report.environment import Variables
from agentstate.doctor.report.files import (
    TargetError,
    describe,
    mode,
    read_small_text,
    regular_file,
)

if TYPE_CHECKING:
    from agentstate.doctor.facts.graph_facts import Graph

__all__ = [
    "Loaded",
    "Target",
    "TargetError",
    "config_targets",
    "definition_line",
    "describe",
    "load",
    "project_paths",
    "read_config",
    "regular_file",
    "targets",
]

JS_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx")


@dataclass(frozen=True)
class Target:
    """One graph to load: its name, its ``module:attr`` spec, where its paths are relative to."""

    name: str
    spec: str
    base: Path
    paths: tuple[Path, ...] = ()
    """Directories put on ``sys.path`` before it is imported (appended, as ``langgraph dev``)."""
    label: str = ""
    """How an error and a report name it, whole: the spec itself, or ``langgraph.json > name``."""
    env: Variables = ()
    """The variables its ``langgraph.json``'s ``"env"`` sets before it is imported."""
    notes: tuple[str, ...] = ()
    """What could not be read on the way (a ``.env`` that does not exist)."""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.spec)

    @property
    def home(self) -> Path:
        """Where its project's configuration is looked for: its file's directory, else ``base``."""
        where = self.spec.rpartition(":")[0]
        return (self.base / where).parent if _is_path(where) else self.base


@dataclass(frozen=True)
class Loaded:
    """A loaded graph, and where its name is defined (for findings that have no place)."""

    target: Target
    graph: Graph
    file: str | None = None
    line: int | None = None


# --- langgraph.json ---


def read_config(spec: str) -> dict[str, object]:
    """The JSON object in ``spec``: a regular, small, UTF-8 file, refused in one line otherwise."""
    shown = spec
    text = read_small_text(Path(spec), shown)
    try:
        config = json.loads(text)
    except RecursionError:
        raise TargetError(f"{shown} is nested too deeply to be a langgraph.json") from None
    except ValueError as exc:
        raise TargetError(f"{shown} is not JSON: {describe(exc)}") from None
    if not isinstance(config, dict):
        raise TargetError(f"{shown} is not a JSON object")
    return config


def project_paths(root: Path, dependencies: object, shown: str) -> tuple[Path, ...]:
    """``root`` and the local ``dependencies`` (``"."``, ``"./src"``) as ``sys.path`` entries.

    ``langgraph dev`` appends the directory it runs in and each local dependency
    directory; a dependency that is a package (``pyproject.toml`` or
    ``setup.py``) with a ``src/`` layout adds its ``src`` (what ``pip install -e``
    would), and one that is itself a package (``__init__.py``) adds its parent
    (what ``langgraph build`` installs). Other entries are packages to install.
    """
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise TargetError(f"{shown}: 'dependencies' is not a list of strings")
    paths = [root]
    for dependency in dependencies:
        if not dependency.startswith("."):
            continue
        named = f"{shown}: dependency {dependency!r}"
        folder = root / dependency
        if not stat.S_ISDIR(mode(folder, named)):
            raise TargetError(f"{named} is not a directory")
        folder = folder.resolve()
        paths.append(folder)
        if (folder / "pyproject.toml").is_file() or (folder / "setup.py").is_file():
            if (folder / "src").is_dir():
                paths.append(folder / "src")
        elif (folder / "__init__.py").is_file():
            paths.append(folder.parent)
    return tuple(dict.fromkeys(paths))


def config_targets(spec: str) -> list[Target]:
    """One :class:`Target` per graph a ``langgraph.json`` lists, with its project's paths."""
    shown = spec
    config = read_config(spec)
    graphs = config.get("graphs")
    if not isinstance(graphs, dict) or not graphs:
        raise TargetError(f"{shown} lists no graphs (a 'graphs' object)")
    root = Path(spec).resolve().parent
    paths = project_paths(root, config.get("dependencies", []), shown)
    env, notes = environment.env_of(config.get("env"), root, shown)
    found = []
    for name, value in graphs.items():
        label = f"{shown} > {name}"
        path = value.get("path") if isinstance(value, dict) else value
        if not isinstance(path, str):
            raise TargetError(f"{label}: not 'path:attr' (a string, or an object with a 'path')")
        found.append(Target(name, path, root, paths, label, env, notes))
    return found


def targets(spec: str, base: Path | None = None) -> list[Target]:
    """The targets a command-line argument names: itself, or every graph of a langgraph.json.

    ``base`` is where a ``module:attr`` is imported from (default: the current
    directory; a configuration's ``graphs``: its folder).
    """
    if spec.endswith(".json"):
        return config_targets(spec)
    cwd = Path.cwd() if base is None else base
    where, _, attr = spec.rpartition(":")
    beside = (cwd / where).parent if _is_path(where) else cwd  # as `python path/to/file.py`
    label = spec
    if _is_path(where) and Path(where).is_absolute():  # a configuration's, made absolute
        label = f"{os.path.relpath(where, Path.cwd())}:{attr}"
    return [Target(spec, spec, cwd, tuple(dict.fromkeys((cwd, beside))), label)]


# --- modules and attributes ---


def split(spec: str, label: str) -> tuple[str, str]:
    """``(module or path, attr)`` of ``module:attr`` or ``path/to/file.py:attr``."""
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr or not attr.isidentifier():
        raise TargetError(f"{label}: {spec!r} is not module:attr or path/to/file.py:attr")
    return where, attr


def _is_path(where: str) -> bool:
    return where.endswith((".py", *JS_SUFFIXES)) or "/" in where or "\\" in where


def import_target(where: str, base: Path, label: str) -> ModuleType:
    """The module ``where`` names (a dotted name, or a ``.py`` file relative to ``base``)."""
    if not _is_path(where):
        try:
            return importlib.import_module(where)
        except (Exception, SystemExit) as exc:
            raise TargetError(f"{label}: importing {where} failed: {describe(exc)}") from None
    shown = where
    if where.endswith(JS_SUFFIXES):
        raise TargetError(f"{label}: {shown} is a JavaScript graph; the doctor reads Python")
    path = regular_file(base / where, f"{label}: {shown}").resolve()
    if path.suffix != ".py":
        raise TargetError(f"{label}: {shown} is not a Python file (.py)")
    name = "_agentstate_doctor_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"{label}: cannot import {shown}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise TargetError(f"{label}: importing {shown} failed: {describe(exc)}") from None
    except BaseException:  # the time limit (or Ctrl-C): a half-run module is not kept
        sys.modules.pop(name, None)
        raise
    return module


def attribute(module: ModuleType, where: str, attr: str, label: str) -> object:
    """``module.attr``: from the module's namespace, else through its ``__getattr__``."""
    namespace: dict[str, object] = vars(module)
    if attr in namespace:
        return namespace[attr]
    try:
        return getattr(module, attr)
    except AttributeError:
        raise TargetError(f"{label}: {where} has no attribute {attr!r}") from None
    except (Exception, SystemExit) as exc:
        raise TargetError(
            f"{label}: getting {attr!r} from {where} raised {describe(exc)}"
        ) from None


def definition_line(file: str | None, attr: str) -> int | None:
    """The line of the last top-level statement that binds ``attr`` in ``file`` (a .py)."""
    if not file or not file.endswith(".py"):
        return None
    try:
        tree = ast.parse(regular_file(Path(file), file).read_bytes())
    except (TargetError, OSError, SyntaxError, ValueError):
        return None
    line = None
    statements = list(tree.body)
    while statements:
        node = statements.pop(0)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            names = [node.target.id] if isinstance(node.target, ast.Name) else []
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [(a.asname or a.name).split(".")[0] for a in node.names]
        else:
            names = []
            for block in ("body", "orelse", "finalbody", "handlers"):
                statements.extend(
                    child for child in getattr(node, block, []) if isinstance(child, ast.stmt)
                )
            for handler in getattr(node, "handlers", []):
                statements.extend(handler.body)
        if attr in names and (line is None or node.lineno > line):
            line = node.lineno
    return line


# --- graphs and factories ---


def _compiled(value: object, label: str) -> Graph | None:
    """The compiled graph ``value`` is (a ``StateGraph`` compiled here), or None."""
    from langgraph.graph import StateGraph

    from agentstate.doctor.facts.graph_facts import NotAGraphError, as_compiled

    try:
        if isinstance(value, StateGraph):
            try:
                value = value.compile()
            except Exception as exc:
                raise TargetError(
                    f"{label}: compiling its StateGraph raised {describe(exc)}"
                ) from None
        return as_compiled(value)
    except NotAGraphError:
        return None
    except TargetError:
        raise
    except (Exception, SystemExit) as exc:  # an object whose attribute access raises
        raise TargetError(f"{label}: looking at it raised {describe(exc)}") from None


def _is_runtime(annotation: object) -> bool:
    """True for ``ServerRuntime`` (as ``langgraph dev`` tells a runtime argument from a config)."""
    if isinstance(annotation, str):
        return "ServerRuntime" in annotation
    try:
        from langgraph_sdk.runtime import ServerRuntime, _ExecutionRuntime, _ReadRuntime
    except ImportError:  # pragma: no cover - langgraph_sdk comes with langgraph
        return False
    if annotation is ServerRuntime:
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, _ExecutionRuntime | _ReadRuntime)
    origin = typing.get_origin(annotation)
    if origin is ServerRuntime:
        return True
    args = typing.get_args(annotation)
    return origin is not None and bool(args) and _is_runtime(args[0])


def _server_runtime(label: str) -> object:
    """The runtime ``langgraph dev`` gives a factory when it reads a graph (``assistants.read``)."""
    try:
        from langgraph.store.memory import InMemoryStore
        from langgraph_sdk.runtime import _ReadRuntime

        return _ReadRuntime(access_context="assistants.read", user=None, store=InMemoryStore())
    except Exception as exc:
        raise TargetError(f"{label}: cannot make a ServerRuntime: {describe(exc)}") from None


def factory_arguments(factory: object, name: str, label: str) -> dict[str, object]:
    """The keyword arguments ``langgraph dev`` gives ``factory``: none, config, runtime, or both."""
    try:
        params = list(inspect.signature(factory).parameters.values())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return {}  # no signature to read (a builtin): called bare
    if not params:
        return {}
    if len(params) > 2:
        raise TargetError(
            f"{label}: factory {name} takes {len(params)} arguments; a langgraph.json factory "
            "takes none, a config, a ServerRuntime, or a config and a ServerRuntime"
        )
    try:
        hints = typing.get_type_hints(factory)
    except Exception:
        hints = {}
    runtime = [p for p in params if _is_runtime(hints.get(p.name, p.annotation))]
    if len(params) == 2 and len(runtime) != 1:
        raise TargetError(
            f"{label}: factory {name} takes two arguments; one must be annotated ServerRuntime"
        )
    from langchain_core.runnables import ensure_config

    arguments = {
        p.name: _server_runtime(label) if p in runtime else ensure_config({"configurable": {}})
        for p in params
    }
    try:
        inspect.signature(factory).bind(**arguments)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TargetError(
            f"{label}: factory {name} cannot take {', '.join(arguments)} by keyword: "
            f"{describe(exc)}"
        ) from None
    return arguments


def _why_config(factory: object, name: str, arguments: dict[str, object]) -> str:
    """What explains a factory's failure when it was handed the config for a parameter that
    wants something else (``def make_concierge(model)``): ``""`` when it was not."""
    given = [
        n
        for n, v in arguments.items()
        if isinstance(v, dict) and n != "config" and not _wants_config(factory, n)
    ]
    if not given:
        return ""
    return (
        f" ({name}'s parameter {given[0]!r} was given the run's config, a RunnableConfig "
        "dict, as langgraph dev gives it to a one-parameter factory: list a function that "
        f"takes no argument, or only 'config', and calls {name}({given[0]}=...) itself)"
    )


def _wants_config(factory: object, parameter: str) -> bool:
    """True when ``parameter`` of ``factory`` is annotated ``RunnableConfig`` (or a dict)."""
    try:
        annotation = inspect.signature(factory).parameters[parameter].annotation  # type: ignore[arg-type]
    except (TypeError, ValueError, KeyError):
        return False
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return "RunnableConfig" in str(text) or annotation is dict


def _is_async_context(value: object) -> bool:
    return hasattr(value, "__aenter__") and hasattr(value, "__aexit__")


async def _settle(made: object) -> object:
    if inspect.isawaitable(made):
        made = await made
    if _is_async_context(made):
        async with made as value:  # type: ignore[attr-defined]
            return value
    return made


def _run(made: object) -> object:
    """:func:`_settle` on a new event loop (in a thread when one already runs here)."""
    import asyncio  # here: `agentstate doctor --help` does not wait for asyncio's import
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_settle(made))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _settle(made)).result()


def call_factory(factory: Any, label: str) -> object:
    """What ``factory`` builds: awaited if async, entered (and left) if a context manager."""
    try:
        name = str(getattr(factory, "__name__", None) or type(factory).__name__)
    except Exception:
        name = "(unnamed)"
    arguments = factory_arguments(factory, name, label)
    try:
        made = factory(**arguments)
    except (Exception, SystemExit) as exc:
        raise TargetError(
            f"{label}: factory {name} raised {describe(exc)}{_why_config(factory, name, arguments)}"
        ) from None
    try:
        if inspect.isawaitable(made) or _is_async_context(made):
            return _run(made)
        if hasattr(made, "__enter__") and hasattr(made, "__exit__"):
            with made as value:
                return value
    except (Exception, SystemExit) as exc:
        raise TargetError(f"{label}: factory {name} raised {describe(exc)}") from None
    return made


def graph_of(value: object, label: str) -> Graph:
    """The compiled graph ``value`` is or builds; one line naming what it is otherwise."""
    graph = _compiled(value, label)
    if graph is not None:
        return graph
    if not callable(value):
        raise TargetError(
            f"{label}: expected a compiled LangGraph graph (create_agent, create_deep_agent or "
            f"StateGraph(...).compile()) or a function that builds one, got {type(value).__name__}"
        )
    made = call_factory(value, label)
    graph = _compiled(made, label)
    if graph is None:
        raise TargetError(
            f"{label}: expected its factory to build a compiled LangGraph graph, "
            f"got {type(made).__name__}"
        )
    return graph


def load(target: Target) -> Loaded:
    """The graph ``target`` names, loaded with its ``env`` set (and unset again after, so
    another project's graphs never see it) and its project's directories on ``sys.path``."""
    for path in target.paths:
        if str(path) not in sys.path:
            sys.path.append(str(path))
    where, attr = split(target.spec, target.label)
    with environment.applied(target.env):
        module = import_target(where, target.base, target.label)
        value = attribute(module, where, attr, target.label)
        graph = graph_of(value, target.label)
    file = vars(module).get("__file__")
    file = file if isinstance(file, str) else None
    return Loaded(target, graph, file, definition_line(file, attr))
