"""Small, deterministic notebook displays: tables, Mermaid diagrams, doctor reports.

Notebook outputs are compared by nbval, so a table renders the same text and
HTML every time (no index column, no object ids), and a graph is shown as
Mermaid text that JupyterLab draws locally (never a remote rendering service).
:func:`compare_findings` puts the doctor's reports on a broken and a fixed
agent side by side, one row per hazard (notebooks 01-03). :func:`progress`
is a tqdm bar that leaves a line of text, never a bar frozen at 0%, in a saved
notebook (notebooks 03 and 05). Used by every notebook.
"""

from __future__ import annotations

import html
import importlib.util
import time
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any


class Table:
    """Rows of dicts shown as an aligned text table (``repr``) and a left-aligned HTML table.

    A row may also be a ``Table``: its rows are stacked in (notebook 04 stacks the one-row
    tables its ``declared_by`` returns).
    """

    def __init__(self, rows: Iterable[Mapping[str, Any] | Table], columns: list[str] | None = None):
        self.rows = [dict(r) for item in rows for r in _rows_of(item)]
        self.columns = columns or list(dict.fromkeys(k for r in self.rows for k in r))

    def __len__(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list[Any]:
        """The values of one column, top to bottom (what a notebook asserts on)."""
        return [r.get(name) for r in self.rows]

    def _cells(self) -> list[list[str]]:
        return [[_fmt(r.get(c, "")) for c in self.columns] for r in self.rows]

    def __repr__(self) -> str:
        cells = self._cells()
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(self.columns)]

        def line(values: list[str]) -> str:
            return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

        out = [line(self.columns), line(["-" * w for w in widths])]
        return "\n".join(out + [line(row) for row in cells])

    def _repr_html_(self) -> str:
        # Inline style: JupyterLab's stylesheet right-aligns table cells.
        left = 'style="text-align: left"'
        head = "".join(f"<th {left}>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td {left}>{html.escape(v)}</td>" for v in row) + "</tr>"
            for row in self._cells()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _rows_of(item: Mapping[str, Any] | Table) -> Iterable[Mapping[str, Any]]:
    return item.rows if isinstance(item, Table) else [item]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list | tuple | set):
        return ", ".join(_fmt(v) for v in value)
    return str(value)


class Mermaid:
    """A Mermaid diagram: JupyterLab renders the Markdown locally; ``repr`` is the source."""

    def __init__(self, source: str):
        self.source = source.strip()

    def __repr__(self) -> str:
        return self.source

    def _repr_markdown_(self) -> str:
        return f"```mermaid\n{self.source}\n```"


def graph_mermaid(graph: Any) -> Mermaid:
    """The compiled graph's structure as Mermaid (drawn locally, not by a web service)."""
    return Mermaid(graph.get_graph().draw_mermaid())


class Source:
    """The source of a package object, shown as a Python code block.

    Notebooks show how a fix is written by displaying the package's own code
    (the single source of truth), never a pasted copy: a change in the
    package shows up in the notebook, and nbval notices.
    """

    def __init__(self, obj: Any, *, start: str | None = None, stop: str | None = None):
        import inspect
        import textwrap

        text = inspect.getsource(obj)
        if start is not None:
            if start not in text:
                raise ValueError(f"{start!r} is not in the source of {obj!r}")
            line_start = text.rfind("\n", 0, text.index(start)) + 1  # cut at a line's start
            text = text[line_start:]
        if stop is not None:
            if stop not in text:
                raise ValueError(f"{stop!r} is not in the selected source of {obj!r}")
            text = text[: text.rfind("\n", 0, text.index(stop)) + 1]
        self.name = getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))
        self.module = getattr(obj, "__module__", "")
        self.text = textwrap.dedent(text).rstrip() + "\n"

    def __contains__(self, snippet: str) -> bool:
        return snippet in self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return f"`{self.module}.{self.name}`\n\n```python\n{self.text}```"


def show_source(obj: Any, *, start: str | None = None, stop: str | None = None) -> Source:
    """Display ``obj``'s source, optionally from the line holding ``start`` to the line
    before the one holding ``stop``; the selection is dedented as a whole."""
    return Source(obj, start=start, stop=stop)


_SAID = {"info": "note"}  # an info finding is what the doctor could not decide: a note


def compare_findings(
    reports: Mapping[str, Any], subagents: Iterable[str] = (), whole: str = "the agent"
) -> Table:
    """The doctor's reports on several agents side by side: one row per hazard, a column each.

    ``reports`` maps a column name ("broken agent") to what
    :func:`agentstate.doctor.diagnose` returned. The doctor reports a hazard it
    finds inside a subagent with the subagent's name before the subject
    (``general-purpose:store_requirement``); such a finding shares the row of
    the same hazard in the agent itself, and the cell says where it was found.
    A prefix is read as a subagent's name when it is in ``subagents`` or when
    the rest of the subject is a subject of the same code. Rows follow the
    doctor's order of codes; a cell reads ``none`` where the agent is clear, and
    ``note`` for an ``info`` finding (something the doctor could not decide).
    ``whole`` names what was diagnosed (lesson 05's desk is "the graph", not an agent).
    """
    from agentstate.doctor import CODES

    named = set(subagents)
    found: dict[tuple[str, str], dict[str, dict[str, list[str]]]] = {}
    for column, report in reports.items():
        subjects = {(f.code, f.subject) for f in report}
        for f in report:
            head, sep, rest = f.subject.partition(":")
            through = sep and (head in named or (f.code, rest) in subjects)
            subject, place = (rest, f"its {head} subagent") if through else (f.subject, whole)
            places = found.setdefault((f.code, subject), {}).setdefault(column, {})
            places.setdefault(f.severity, []).append(place)
    order = list(CODES)
    rows = []
    for code, subject in sorted(found, key=lambda cs: (order.index(cs[0]), cs[1])):
        row = {"hazard": code, "what it means": CODES[code].title, "on": subject.replace(":", " ")}
        for column in reports:
            by_severity = found[(code, subject)].get(column, {})
            row[column] = (
                "; ".join(
                    f"{_SAID.get(severity, severity)} in "
                    f"{' and in '.join(sorted(places, key=lambda p: (p != whole, p)))}"
                    for severity, places in by_severity.items()
                )
                or "none"
            )
        rows.append(row)
    return Table(rows, columns=["hazard", "what it means", "on", *reports])


_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _in_a_kernel() -> bool:
    """Whether this runs in a Jupyter kernel that can draw a widget."""
    if importlib.util.find_spec("ipywidgets") is None:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class Progress:
    """A tqdm progress bar that, once done, leaves a line of text where the bar was.

    A notebook saved after a run keeps each output as it was last drawn. A
    tqdm widget is drawn while it runs and then closed, so a saved notebook
    shows its first text form, "0%| 0/200", as if the cell never ran. This bar
    is displayed as the widget alone (no text form), and when the loop ends
    its display is emptied and the line ``done`` is printed (default: "desc:
    n of total unit in s seconds"; pass a string without the time for an
    output nbval can compare). nbval ignores display updates and widget
    views, so it sees the same printed line as the saved notebook. Outside a
    kernel it is tqdm's text bar on stderr, and nothing is printed. Iterate
    over it, or use it as a context manager and call :meth:`update`.
    """

    def __init__(
        self,
        iterable: Iterable[Any] | None = None,
        *,
        total: int | None = None,
        desc: str = "",
        unit: str = "it",
        done: str | None = None,
    ) -> None:
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]  # checked just above
        self.iterable, self.total, self.desc, self.unit, self.done = (
            iterable,
            total,
            desc,
            unit,
            done,
        )
        self.n, self._t0 = 0, 0.0
        self._bar: Any = None
        self._handle: Any = None

    def __enter__(self) -> Progress:
        self._t0 = time.perf_counter()
        if _in_a_kernel():
            from IPython.display import display
            from tqdm.notebook import tqdm as notebook_tqdm

            self._bar = notebook_tqdm(
                total=self.total, desc=self.desc, unit=self.unit, display=False, leave=False
            )
            view = self._bar.container._repr_mimebundle_()[_WIDGET_VIEW]
            self._handle = display({_WIDGET_VIEW: view}, raw=True, display_id=True)
        else:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, leave=False)
        return self

    def update(self, n: int = 1) -> None:
        """Advance the bar by ``n``."""
        self.n += n
        if self._bar is not None:
            self._bar.update(n)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._handle is not None:
            self._handle.update({}, raw=True)
            if kind is None:
                print(self.summary())

    def summary(self) -> str:
        """The line that replaces the bar: what was done, or ``done`` if given."""
        if self.done is not None:
            return self.done
        of = f" of {self.total}" if self.total is not None else ""
        seconds = time.perf_counter() - self._t0
        lead = f"{self.desc}: " if self.desc else ""
        return f"{lead}{self.n}{of} {self.unit} in {seconds:.1f} s"

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("progress(iterable) to iterate; progress(total=n) with update()")
        with self:
            for item in self.iterable:
                yield item
                self.update()


def progress(
    iterable: Iterable[Any] | None = None,
    *,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    done: str | None = None,
) -> Progress:
    """A :class:`Progress` bar: ``for x in progress(items, desc="turns"): ...``."""
    return Progress(iterable, total=total, desc=desc, unit=unit, done=done)
