"""The operations manual, loaded verbatim: bytes, decoded text, sha256, sections.

Prefix caching only works if every expert call sends the very same bytes, so
the manual is never trimmed, normalised or re-encoded: the text is the strict
UTF-8 decoding of the file's bytes, and the sha256 of those bytes names it.
A CPU engine prefills slowly, so the engine profile may use a leading part
(the preamble plus the first N ``## `` chapters): still an exact byte prefix of
the file, named by its own hash. Taught in notebook 05.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from agentstate.lessons.datafiles import data_path

MANUAL_FILE = "manual/operations_manual.md"
_SECTION = re.compile(rb"^## ", re.MULTILINE)


@dataclass(frozen=True)
class Manual:
    """Immutable manual bytes; ``repr`` never prints the text (it is ~100 KB)."""

    name: str
    data: bytes = field(repr=False)
    sections: int | None = None
    """How many ``##`` chapters the part holds (None: the whole file)."""

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def size(self) -> int:
        return len(self.data)

    def chapter_titles(self) -> list[str]:
        """The ``## `` headings, in order (what a leading part would cut at)."""
        return [line[3:] for line in self.text.splitlines() if line.startswith("## ")]

    def leading(self, sections: int) -> Manual:
        """The preamble plus the first ``sections`` chapters, as an exact byte prefix."""
        starts = [m.start() for m in _SECTION.finditer(self.data)]
        if not isinstance(sections, int) or isinstance(sections, bool):
            raise TypeError(f"sections must be an int, got {type(sections).__name__}")
        if not 1 <= sections <= len(starts):
            raise ValueError(
                f"sections must be between 1 and {len(starts)} (chapters in {self.name}), "
                f"got {sections}"
            )
        end = starts[sections] if sections < len(starts) else len(self.data)
        return Manual(name=f"{self.name}[:{sections} sections]", data=self.data[:end],
                      sections=sections)  # fmt: skip

    def stats(self) -> dict[str, object]:
        """Size, hash and chapter count of the manual (tokens when the engine is installed)."""
        return {"name": self.name, "bytes": self.size, "chars": len(self.text),
                "chapters": len(self.chapter_titles()), "sha256": self.sha256}  # fmt: skip


@lru_cache(maxsize=8)
def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def load_manual(path: str | Path | None = None, *, sections: int | None = None) -> Manual:
    """Load the manual (default ``data/manual/operations_manual.md``), optionally a leading part.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a
    file that is not valid UTF-8 or is empty, naming the file.
    """
    resolved = Path(path) if path is not None else data_path(MANUAL_FILE)
    if not resolved.is_file():
        raise FileNotFoundError(f"manual not found: {resolved}")
    data = _read(str(resolved.resolve()))
    if not data.strip():
        raise ValueError(f"manual {resolved} is empty")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"manual {resolved} is not valid UTF-8: {err}") from None
    manual = Manual(name=resolved.name, data=data)
    return manual if sections is None else manual.leading(sections)
