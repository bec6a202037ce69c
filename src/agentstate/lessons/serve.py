"""``python -m agentstate.lessons.serve``: ``langgraph dev`` with its saved threads kept private.

``langgraph dev`` pickles every thread (user text, tool arguments, state) into
``.langgraph_api/*.pckl`` in its working directory, and it creates them with
the process's umask: ``0644`` files in a ``0755`` folder by default, readable
by every local user. This wrapper sets the umask to ``077`` (``0700`` folders,
``0600`` files for everything the server writes), tightens a
``.langgraph_api/`` that an earlier run left readable, turns off the CLI's
usage report and the server's version check, and then replaces itself with
``langgraph dev`` and the arguments it was given. ``make serve`` runs it; the
graphs it serves are those of notebooks 02-06 (``langgraph.json``).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

STATE_DIR = ".langgraph_api"  # where langgraph dev's in-memory runtime pickles its threads
PRIVATE_UMASK = 0o077
OFFLINE = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true"}


def make_private(folder: Path) -> list[Path]:
    """Remove group and other access from ``folder`` and everything in it; what changed."""
    changed = []
    for path in [folder, *folder.rglob("*")] if folder.is_dir() else []:
        if path.is_symlink():
            continue  # chmod would follow it to a file that is not the server's
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            path.chmod(mode & 0o700)
            changed.append(path)
    return changed


def langgraph_executable() -> str:
    """``langgraph`` beside this interpreter (the venv's), else the one on ``PATH``."""
    beside = Path(sys.executable).with_name("langgraph")
    if beside.exists():
        return str(beside)
    found = shutil.which("langgraph")
    if found is None:
        raise SystemExit(
            "error: the langgraph CLI is not installed; install the dev set: "
            "pip install -e '.[dev]' (it pins langgraph-cli[inmem])"
        )
    return found


def main(argv: list[str] | None = None) -> None:
    """Make the state folder private, then ``exec langgraph dev ARGS`` (never returns)."""
    args = sys.argv[1:] if argv is None else argv
    command = [langgraph_executable(), "dev", *args]
    os.umask(PRIVATE_UMASK)
    make_private(Path(STATE_DIR))
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
