"""No import cycle anywhere in ``src/agentstate`` (issue 19; the memory split of notebook 06).

The graph is built from the source with ``ast``, so nothing is imported: an
edge ``a -> b`` is any ``import``/``from ... import`` in module ``a`` that names
module ``b`` of the package, at module level or inside a function (a lazy import
still runs, just later, and still ties the two modules together). Not counted:
the implicit import of a module's parent packages (Python always runs a parent
first, so counting it would flag every ``__init__`` that re-exports its children)
and names resolved at run time by ``importlib`` (the lazy ``agentstate.memory``
root), which the source does not spell as an import.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_names(src: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``src``: dotted name -> file."""
    names = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def import_graph(src: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (module level and in functions)."""
    modules = module_names(src, package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's own package upwards
                    here = name.split(".") if is_package else name.split(".")[:-1]
                    here = here[: len(here) - (node.level - 1)]
                    base = ".".join(here + ([base] if base else []))
                # `from pkg import sub` imports the module pkg.sub; `from mod import name`, mod
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a name in a.b
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One concrete cycle per strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)

    found = []
    for component in components:  # walk inside the component back to its first module
        start = min(component)
        path, seen = [start], {start}
        while True:
            succ = sorted(graph[path[-1]] & component)
            if start in succ:
                found.append([*path, start])
                break
            succ = [s for s in succ if s not in seen] or succ
            path.append(succ[0])
            if succ[0] in seen:  # closed a smaller loop inside the component: report it
                found.append(path[path.index(succ[0]) :])
                break
            seen.add(succ[0])
    return sorted(found)


def test_the_package_has_no_import_cycle():
    graph = import_graph(SRC, "agentstate")
    assert "agentstate.memory.service.server" in graph  # the walk sees the subpackages
    assert graph["agentstate.memory.service.cli"] == {
        "agentstate.memory.service.options",
        "agentstate.memory.service.server",  # imported inside _serve: counted
    }
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_a_cycle_is_found_and_named_including_a_function_level_import(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from ..a import x\n")
    (package / "c.py").write_text("import pkg.a\n")  # into the cycle, not part of it
    found = cycles(import_graph(tmp_path, "pkg"))
    assert found == [["pkg.a", "pkg.sub.b", "pkg.a"]]
    (package / "sub" / "b.py").write_text("def f():\n    return 1\n")
    assert cycles(import_graph(tmp_path, "pkg")) == []


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (function-level included)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for succ in graph[todo.pop()] - seen:
            seen.add(succ)
            todo.append(succ)
    return seen


def test_the_engine_imports_nothing_from_the_experts():
    """Issue 34: the engine is a prefix-cache server; the experts prime it with their prefix."""
    graph = import_graph(SRC, "agentstate")
    engine = sorted(
        m for m in graph if m == "agentstate.engine" or m.startswith("agentstate.engine.")
    )
    assert "agentstate.engine.cli_states" in engine and "agentstate.engine.app" in engine
    leaks = {
        m: sorted(r for r in reachable(graph, m) if r.startswith("agentstate.experts"))
        for m in engine
    }
    assert not {m: r for m, r in leaks.items() if r}, leaks
    users = {m for m in graph if m.startswith("agentstate.experts.") and graph[m] & set(engine)}
    assert "agentstate.experts.restart_benchmark" in users  # the other direction is the design


def test_reachable_follows_imports_through_other_modules(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")
    (package / "b.py").write_text("import pkg.c\n")
    (package / "c.py").write_text("")
    graph = import_graph(tmp_path, "pkg")
    assert reachable(graph, "pkg.a") == {"pkg.b", "pkg.c"} and reachable(graph, "pkg.c") == set()
