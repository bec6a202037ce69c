"""Writing the fixes, never harming a file: ``agentstate doctor --fix`` and ``--diff``.

The rules, each with a test: no edit outside the project's roots (never an
installed library's file), none in a file that changed since the doctor read
it, none that leaves a file that does not compile (the result is parsed before
it is written), and a file whose edit fails is left exactly as it was, with one
line saying why. Writes are atomic (a temporary file renamed over the old one,
its mode kept). The edits themselves are idempotent
(:mod:`agentstate.doctor.fix.source_edits`), so a second ``--fix`` changes
nothing. The fixes are the ones notebooks 02 and 04 write by hand; lessons 01-04 show
the diff through :func:`agentstate.doctor.preview_fix`.
"""

from __future__ import annotations

import difflib
import linecache
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentstate.doctor.fix.plan import Fix
from agentstate.doctor.fix.source_edits import EditError
from agentstate.doctor.report.suppression import is_project_file


@dataclass
class FileEdit:
    """A file's text before and after its fixes."""

    file: str
    before: str
    after: str
    fixes: list[Fix] = field(default_factory=list)


@dataclass(frozen=True)
class Refused:
    """A file left as it was, and why (one line)."""

    file: str
    reason: str
    fixes: tuple[Fix, ...] = ()


def _read(file: str) -> str | None:
    try:
        with open(file, encoding="utf-8", newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _as_read(file: str) -> str | None:
    """The text the doctor read (``inspect`` keeps it in ``linecache``), if it read the file."""
    lines = linecache.cache.get(file)
    if not lines or not isinstance(lines, tuple) or len(lines) < 3:
        return None
    return "".join(lines[2])


def prepare(
    fixes: Iterable[Fix],
    roots: tuple[Path, ...],
    read: dict[str, str] | None = None,
    source: Callable[[str], str | None] = _read,
) -> tuple[list[FileEdit], list[Refused]]:
    """Each file's fixed text, and the files that are left as they are (with why).

    ``read`` maps a file to the text the doctor saw when it loaded it; without it the
    text ``inspect`` cached is used. A file whose text on disk differs is not edited.
    ``source`` reads a file's text now (a notebook cell's too, for
    :func:`agentstate.doctor.preview_fix`).
    """
    by_file: dict[str, list[Fix]] = {}
    for fix in fixes:
        by_file.setdefault(fix.file, []).append(fix)
    edits: list[FileEdit] = []
    refused: list[Refused] = []
    for file, planned in sorted(by_file.items()):
        group = tuple(planned)
        if not is_project_file(file, roots):
            refused.append(Refused(file, "outside the project: not edited", group))
            continue
        text = source(file)
        if text is None:
            refused.append(Refused(file, "cannot be read as UTF-8: not edited", group))
            continue
        seen = (read or {}).get(file) or _as_read(file)
        if seen is not None and seen.replace("\r\n", "\n") != text.replace("\r\n", "\n"):
            refused.append(Refused(file, "changed since the doctor read it: not edited", group))
            continue
        after = text
        try:
            for fix in planned:
                after = fix.edit(after)
            compile(after, file, "exec", dont_inherit=True)
        except EditError as exc:
            refused.append(Refused(file, f"{exc}: not edited", group))
            continue
        except SyntaxError as exc:
            refused.append(
                Refused(file, f"the fix would not compile ({exc.msg}): not edited", group)
            )
            continue
        if after != text:
            edits.append(FileEdit(file, text, after, list(planned)))
    return edits, refused


def unified_diff(
    edits: Iterable[FileEdit],
    base: Path | None = None,
    label: Callable[[FileEdit], str | None] = lambda _: None,
) -> str:
    """One unified diff of every edit, paths relative to ``base`` where they lie under it
    (``label`` names an edit otherwise: a notebook cell by what it defines)."""
    out: list[str] = []
    for edit in edits:
        name = label(edit) or edit.file
        if base is not None and name == edit.file:
            try:
                name = str(Path(edit.file).resolve().relative_to(base.resolve()))
            except ValueError:
                pass
        out.extend(
            difflib.unified_diff(
                edit.before.splitlines(keepends=True),
                edit.after.splitlines(keepends=True),
                fromfile=f"a/{name}",
                tofile=f"b/{name}",
            )
        )
    return "".join(out)


def write(edits: Iterable[FileEdit]) -> list[Refused]:
    """Write each edit atomically; a file changed meanwhile is left (and returned, with why)."""
    refused: list[Refused] = []
    for edit in edits:
        if _read(edit.file) != edit.before:
            refused.append(
                Refused(edit.file, "changed while the doctor ran: not edited", tuple(edit.fixes))
            )
            continue
        path = Path(edit.file)
        mode = path.stat().st_mode & 0o7777
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                handle.write(edit.after)
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        linecache.checkcache(edit.file)
    return refused
