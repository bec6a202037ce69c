"""A lesson's knob that a reader can read where widgets are not drawn (notebooks 04-06).

JupyterLab draws a saved widget only in a notebook the reader trusts; GitHub, and a
JupyterLab that has not trusted the file, show the output's text instead, which for
``ipywidgets.interact`` is ``interactive(children=(Dropdown(...``. :func:`knob` shows the
same widget, and gives its output a text that says what the knob turns, its positions,
and what it showed at its starting position, so the saved notebook reads well everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def describe(panel: Any) -> str:
    """The text a reader sees instead of the widget: each control, then the first result."""
    lines = ["A knob (run the notebook to turn it):"]
    for control in panel.kwargs_widgets:
        options = getattr(control, "options", None)
        if options is not None:
            positions = " / ".join(str(o) for o in options)
        else:
            positions = f"{control.min} to {control.max}"
        lines.append(f"- {control.description}: {control.value} (positions: {positions})")
    if panel.result is not None:
        lines += ["At this position it shows:", repr(panel.result)]
    return "\n".join(lines)


class _Readable:
    """Displays ``panel`` as itself, with :func:`describe` as its plain-text form."""

    def __init__(self, panel: Any) -> None:
        self.panel = panel

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = self.panel._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = describe(self.panel)
        return bundle


def knob(function: Callable[..., Any], **controls: Any) -> Any:
    """Show ``ipywidgets.interactive(function, **controls)`` with a readable text fallback.

    Like ``ipywidgets.interact``: the controls call ``function`` when turned, and its
    result is shown under them. Returns the ``interactive`` panel.
    """
    import ipywidgets as widgets
    from IPython.display import display

    panel = widgets.interactive(function, {"auto_display": True}, **controls)
    display(_Readable(panel))
    return panel
