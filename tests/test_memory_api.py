"""Stage 06's public API (issue 9): one import root, documented names, plain words."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import agentstate.memory as memory

PACKAGE = Path(memory.__file__).parent
NOT_OURS = {"process.py"}  # moving to the shared loopback-process helper (engine side)


def test_all_is_sorted_and_every_name_imports_from_the_root():
    assert memory.__all__ == sorted(memory.__all__)
    for name in memory.__all__:
        assert getattr(memory, name) is not None, name
    from agentstate.memory import CaptureRun, MemoryClient, build_capture_graph  # noqa: F401


def test_the_names_notebook_06_uses_are_exported():
    """The page imports the package root (``from agentstate import memory``) and reads every
    name as ``memory.<name>``: each is public, and nothing reaches into a submodule."""
    source = (PACKAGE.parents[2] / "notebooks/_src/06_tool_only_memory_capture.py").read_text()
    tree = ast.parse(source.replace("await ", ""))
    modules = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentstate.memory")
    }
    roots = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module == "agentstate"
        and any(alias.name == "memory" for alias in node.names)
    ]
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "memory"
    }
    assert roots and not modules  # the package root, never a submodule
    assert {"observe", "replay_model", "add_entry_args"} <= used  # the page reads names here
    assert used <= set(memory.__all__), used - set(memory.__all__)


def test_importing_the_package_loads_no_mcp_machinery():
    code = "import sys, agentstate.memory; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # names load on first use: `agentstate --help` stays quick


def test_every_public_definition_has_a_docstring_and_no_name_is_internal_jargon():
    missing, jargon = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if "anchor" in text.lower():
            jargon.append(path.name)
        if path.name in NOT_OURS:
            continue
        tree = ast.parse(text)
        if not ast.get_docstring(tree):
            missing.append(path.name)
        stack = [(n, "") for n in tree.body]
        while stack:
            node, prefix = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if not node.name.startswith("_") and not ast.get_docstring(node):
                    missing.append(f"{path.name}:{prefix}{node.name}")
                if isinstance(node, ast.ClassDef):
                    stack += [(n, f"{prefix}{node.name}.") for n in node.body]
    assert missing == [] and jargon == []
    store = importlib.import_module("agentstate.memory.service.store")
    assert not hasattr(store, "MemoryError_") and issubclass(store.MemoryInputError, ValueError)
