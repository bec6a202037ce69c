"""Build the committed notebooks from their py:percent sources and execute them.

``notebooks/_src/NN_name.py`` is what authors edit; this script turns each one
into ``notebooks/NN_name.ipynb`` with jupytext, runs it top to bottom in a
fresh kernel with nbclient (so execution counts run 1..n), and writes it with
deterministic cell ids. Each saved figure records the sizes of the type it draws
(``scripts/figure_record.py``, run in the kernel first). The scripted model is
forced (the real-model variables are removed from the kernel's environment)
unless ``--keep-model-env`` is given.

What a reader's JupyterLab would write is kept, so opening a notebook changes
nothing: the kernelspec and the ``language_info`` the kernel reports. The
widget state nbclient saves is kept too (with model ids renumbered in order,
so a rebuild does not churn them), so every knob renders as a widget before
the notebook is run in a trusted JupyterLab. Where widgets are not drawn (an
untrusted notebook in plain ``jupyter lab``, GitHub), JupyterLab shows a
widget output's text form, which ipywidgets writes as ``interactive(children=
...``: the build replaces it with a readable note (``knob_text``), the knob's
settings and what it shows at them, read from the saved widget state. Sources
whose name starts with ``_`` (the template) are not built.

    python scripts/build_notebooks.py            # every notebook
    python scripts/build_notebooks.py 01 02      # by number prefix
    python scripts/build_notebooks.py --check    # sources and notebooks agree (no execution)

Exercise solutions live beside them: ``notebooks/_src/solutions/NN_name.py``
builds ``notebooks/solutions/NN_name.ipynb``, and the depth a main lesson leaves
out lives in ``notebooks/_src/going_further/NN_name.py`` ->
``notebooks/going_further/NN_name.ipynb`` (both selected by the same prefixes).
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import jupytext
import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SOURCES = NOTEBOOKS / "_src"
SOLUTION_SOURCES = SOURCES / "solutions"
SOLUTIONS = NOTEBOOKS / "solutions"
FURTHER_SOURCES = SOURCES / "going_further"
FURTHER = NOTEBOOKS / "going_further"
# Where each folder of sources is built (the lessons themselves go to NOTEBOOKS).
TARGETS = {SOLUTION_SOURCES: SOLUTIONS, FURTHER_SOURCES: FURTHER}
MODEL_VARS = ("AGENTSTATE_LLM_BASE_URL", "AGENTSTATE_LLM_MODEL", "AGENTSTATE_LLM_API_KEY")
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
KEPT_METADATA = ("kernelspec", "language_info", "widgets")
# Run in the kernel before the first cell: every saved figure records the type sizes it draws
# (scripts/figure_record.py; tests/test_figures.py reads them).
FIGURE_RECORD = ROOT / "scripts" / "figure_record.py"
RECORD_FIGURES = (
    f"--IPKernelApp.exec_lines=__import__('runpy').run_path({str(FIGURE_RECORD)!r}, "
    "run_name='agentstate_figure_record');"
)
# How a knob's text form starts once the build has made it readable (the browser check looks
# for it, and for ipywidgets' own ``interactive(children=``, to tell a widget shown as text).
KNOB_NOTE = "A knob, drawn when the notebook is trusted or this cell runs."


def sources(selection: list[str]) -> list[Path]:
    found = [p for folder in (SOURCES, *TARGETS) for p in sorted(folder.glob("[0-9][0-9]_*.py"))]
    if selection:
        found = [p for p in found if any(p.name.startswith(s) for s in selection)]
    if not found:
        raise SystemExit(f"no notebook sources match {selection or 'anything'} in {SOURCES}")
    return found


def from_source(path: Path) -> nbformat.NotebookNode:
    nb = jupytext.read(path, fmt="py:percent")
    nb.metadata = {"kernelspec": KERNELSPEC}
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i:03d}"
        cell.metadata = {k: v for k, v in cell.metadata.items() if k == "tags"}
    return nb


def clean(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """Keep what JupyterLab would write (kernelspec, language_info) and the widget state."""
    nb.metadata = {k: nb.metadata[k] for k in KEPT_METADATA if k in nb.metadata}
    nb.metadata["kernelspec"] = KERNELSPEC
    for cell in nb.cells:
        cell.metadata = {k: v for k, v in cell.metadata.items() if k == "tags"}
    return readable_knobs(renumber_widgets(nb, name))


def _setting(model: dict) -> str | None:
    """A control of a knob as "description = value (range)", or None for what is not one."""
    state = model.get("state", {})
    description = state.get("description") or state.get("_view_name", "control")
    if "_options_labels" in state:
        labels = state["_options_labels"]
        index = state.get("index")
        chosen = labels[index] if isinstance(index, int) and index < len(labels) else None
        return f"{description} = {chosen} (one of: {', '.join(labels)})"
    if "value" not in state:
        return None
    bounds = f" ({state['min']} to {state['max']})" if "min" in state and "max" in state else ""
    return f"{description} = {state['value']}{bounds}"


def _shown(outputs: list) -> str:
    """The text an Output widget holds: streams, then each display's text/plain."""
    parts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            parts.append("".join(out.get("text", "")))
        elif "text/plain" in out.get("data", {}):
            parts.append("".join(out["data"]["text/plain"]))
    return "\n".join(p.rstrip("\n") for p in parts)


def knob_text(model_id: str, state: dict) -> str | None:
    """A readable text form of the ``interact`` knob ``model_id``, or None if it is not one.

    Its settings and the output it shows at them, both from the saved widget state.
    """
    knob = state.get(model_id, {})
    if "widget-interact" not in knob.get("state", {}).get("_dom_classes", []):
        return None
    settings, shown = [], ""
    for ref in knob["state"].get("children", []):
        child = state.get(str(ref).removeprefix("IPY_MODEL_"), {})
        if child.get("model_name") == "OutputModel":
            shown = _shown(child.get("state", {}).get("outputs", []))
        elif (setting := _setting(child)) is not None:
            settings.append(setting)
    lines = [KNOB_NOTE, f"Its settings: {'; '.join(settings)}."]
    if shown:
        lines += ["At these settings it shows:", shown]
    return "\n".join(lines)


def readable_knobs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Give each saved ``interact`` knob a readable text form (see the module docstring)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view and (text := knob_text(view["model_id"], state)) is not None:
                out.data["text/plain"] = text
    return nb


def renumber_widgets(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """Replace the kernel's random widget model ids by ids derived from the order they appear.

    Ids appear in the saved state (as keys and as ``IPY_MODEL_<id>`` references) and in
    the outputs' widget views; all are rewritten together, so the references still hold.
    """
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    views = [
        out.data[WIDGET_VIEW]
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if WIDGET_VIEW in out.get("data", {})
    ]
    order = [v["model_id"] for v in views] + list(state)
    new_ids: dict[str, str] = {}
    for old in order:
        if old not in new_ids:
            seed = f"{name}:{len(new_ids)}".encode()
            new_ids[old] = hashlib.sha256(seed).hexdigest()[:32]
    if not new_ids:
        return nb
    pattern = re.compile("|".join(re.escape(old) for old in new_ids))
    if state:
        text = pattern.sub(lambda m: new_ids[m.group(0)], json.dumps(nb.metadata["widgets"]))
        nb.metadata["widgets"] = nbformat.from_dict(json.loads(text))
    for view in views:
        view["model_id"] = new_ids.get(view["model_id"], view["model_id"])
    return nb


def _ipc_kernels() -> type[KernelManager]:
    """Kernels on Unix sockets in a private folder, as conftest.py gives nbval's: two builds
    side by side (or a build beside the tests) cannot take each other's TCP ports, which once
    left a build waiting forever on a reply that went to another kernel."""
    folder = tempfile.mkdtemp(prefix="nbb-")  # short: a Unix socket path holds 107 bytes
    atexit.register(shutil.rmtree, folder, True)

    class IPCKernelManager(KernelManager):
        def __init__(self, **kwargs: object) -> None:
            super().__init__(transport="ipc", ip=os.path.join(folder, "k"), **kwargs)

    return IPCKernelManager


def execute(
    nb: nbformat.NotebookNode, keep_model_env: bool, timeout: int, name: str, cwd: Path
) -> None:
    """Run every cell in a fresh kernel in ``cwd`` (as nbval does), with a progress bar."""
    dropped = [] if keep_model_env else [v for v in MODEL_VARS if v in os.environ]
    env_backup = {v: os.environ.pop(v) for v in dropped}
    os.environ["PYTHONHASHSEED"] = "0"
    code_cells = sum(c.cell_type == "code" for c in nb.cells)
    try:
        with tqdm(total=code_cells, desc=name, unit="cell", file=sys.stderr) as bar:
            NotebookClient(
                nb,
                timeout=timeout,
                kernel_name="python3",
                kernel_manager_class=_ipc_kernels(),
                extra_arguments=[RECORD_FIGURES],
                resources={"metadata": {"path": cwd}},
                on_cell_executed=lambda **_: bar.update(),
            ).execute()
    finally:
        os.environ.update(env_backup)


def target_of(src: Path) -> Path:
    """Where the notebook built from ``src`` is written (lessons, solutions, going further)."""
    folder = TARGETS.get(src.parent, NOTEBOOKS)
    return folder / f"{src.stem}.ipynb"


def check(paths: list[Path]) -> int:
    bad = 0
    for src in paths:
        target = target_of(src)
        if not target.exists():
            print(f"{target.name}: missing; run make notebooks")
            bad += 1
            continue
        want = [(c.cell_type, c.source) for c in from_source(src).cells]
        have = [(c.cell_type, c.source) for c in nbformat.read(target, as_version=4).cells]
        if want != have:
            print(f"{target.name}: cells differ from {src.relative_to(ROOT)}; run make notebooks")
            bad += 1
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="number prefixes, e.g. 01 02")
    parser.add_argument("--check", action="store_true", help="compare only, execute nothing")
    parser.add_argument("--keep-model-env", action="store_true", help="let a real model be used")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = parser.parse_args(argv)
    paths = sources(args.only)
    if args.check:
        return 1 if check(paths) else 0
    for src in paths:
        target = target_of(src)
        target.parent.mkdir(exist_ok=True)
        nb = from_source(src)
        execute(nb, args.keep_model_env, args.timeout, str(target.relative_to(ROOT)), target.parent)
        nbformat.write(clean(nb, src.stem), target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
