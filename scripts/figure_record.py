"""Record, inside each saved figure, the width it is drawn at and the smallest type it uses.

JupyterLab shows a figure wider than its output area shrunk, so a figure drawn
1,450 px wide appears at about 65% and its 8 pt labels at 7 px. The series
draws figures about 950 px wide with type of 12 px or more (issue 42), and
``tests/test_figures.py`` checks every figure saved in every notebook. The
width is in the PNG itself; the type sizes are not, so the build records them
while the figure is drawn: ``scripts/build_notebooks.py`` runs this file in the
kernel before the first cell (``install``). It wraps IPython's
``print_figure``, which the inline backend calls for every figure a cell
shows, records the size of every piece of text matplotlib actually draws
(``Text.draw`` of a visible, non-empty text: titles, tick labels, boxes,
legends; the labels of an axis turned off are not drawn and not counted), and
writes them into a ``tEXt`` chunk of the PNG (key ``FONT_KEY``): the smallest
size in points, the figure's dpi, and that size in pixels at 100%
(``points * dpi / 72``). Nothing the reader sees changes; re-running a cell in
JupyterLab writes a PNG without the chunk, which the build writes again.
"""

from __future__ import annotations

import json
import struct
import zlib
from binascii import b2a_base64
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

FONT_KEY = "agentstate:text-sizes"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@contextmanager
def drawn_text_sizes() -> Iterator[list[float]]:
    """Collect the size in points of every text matplotlib draws inside the block."""
    from matplotlib.text import Text

    sizes: list[float] = []
    original = Text.draw

    def draw(self: Text, renderer: Any) -> Any:
        if self.get_visible() and self.get_text().strip():
            sizes.append(float(self.get_fontsize()))
        return original(self, renderer)

    Text.draw = draw  # type: ignore[method-assign]
    try:
        yield sizes
    finally:
        Text.draw = original  # type: ignore[method-assign]


def with_text_chunk(png: bytes, key: str, text: str) -> bytes:
    """``png`` with one ``tEXt`` chunk added after its header chunk (IHDR)."""
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    header_end = len(PNG_SIGNATURE) + 8 + struct.unpack(">I", png[8:12])[0] + 4
    body = b"tEXt" + key.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body))
    return png[:header_end] + chunk + png[header_end:]


def recording(print_figure: Callable[..., Any]) -> Callable[..., Any]:
    """``print_figure`` that writes the drawn text sizes into every PNG it returns."""

    def record(
        fig: Any, fmt: str = "png", bbox_inches: Any = "tight", base64: bool = False, **kw: Any
    ) -> Any:
        if fmt != "png":
            return print_figure(fig, fmt, bbox_inches, base64, **kw)
        with drawn_text_sizes() as sizes:
            data = print_figure(fig, fmt, bbox_inches, False, **kw)
        if data is None:  # an empty figure: IPython shows nothing
            return None
        smallest = min(sizes, default=0.0)
        record = {"min_pt": smallest, "dpi": fig.dpi, "min_px": round(smallest * fig.dpi / 72, 2)}
        data = with_text_chunk(data, FONT_KEY, json.dumps(record, sort_keys=True))
        return b2a_base64(data, newline=False).decode("ascii") if base64 else data

    return record


def install() -> None:
    """Wrap IPython's ``print_figure`` before the inline backend registers it (kernel start)."""
    from IPython.core import pylabtools

    pylabtools.print_figure = recording(pylabtools.print_figure)


if __name__ == "agentstate_figure_record":  # run by the build, in the kernel (see install)
    install()
