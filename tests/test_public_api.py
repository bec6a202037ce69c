"""The public API a maintainer and a user rely on: sorted __all__, docstrings, plain names."""

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import agentstate

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ["core", "rds", "models", "experts", "engine", "memory", "doctor", "hazards"]


def modules():
    for info in pkgutil.walk_packages(agentstate.__path__, "agentstate."):
        yield importlib.import_module(info.name)


def test_every_subpackage_has_an_all_whose_names_import():
    """(ruff's RUF022 keeps each ``__all__`` sorted.)"""
    problems = []
    for name in SUBPACKAGES:
        package = importlib.import_module(f"agentstate.{name}")
        exported = getattr(package, "__all__", None)
        if not exported:
            problems.append(f"agentstate.{name}: no __all__")
            continue
        problems += [f"agentstate.{name}.{n}: missing" for n in exported if not hasattr(package, n)]
    assert problems == []


def test_every_public_definition_has_a_docstring():
    missing = []
    for module in modules():
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj):
                if not inspect.getdoc(obj):
                    missing.append(f"{module.__name__}.{name}")
                if inspect.isclass(obj):
                    for attr, member in vars(obj).items():
                        if attr.startswith("_") or not inspect.isfunction(member):
                            continue
                        inherited = any(
                            getattr(getattr(base, attr, None), "__doc__", None)
                            for base in obj.__mro__[1:]
                        )
                        if not member.__doc__ and not inherited:
                            missing.append(f"{module.__name__}.{name}.{attr}")
    assert missing == []


def test_plain_names_no_trailing_underscores_and_no_word_anchor():
    odd = [
        f"{m.__name__}.{n}"
        for m in modules()
        for n in vars(m)
        if not n.startswith("_") and n.endswith("_") and n != "__all__"
    ]
    assert odd == []
    anchors = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "src").rglob("*.py")
        if re.search(r"\banchor\b", p.read_text(), re.I)
    ]
    assert anchors == []
