"""The doctor's version: the installed distribution's, for ``--version`` and SARIF's driver.

Read from the distribution's metadata (``agentstate-langgraph``, the name on
the package index), so it is the version pip installed; a checkout run without
installing it falls back to ``agentstate.__version__``. The doctor of
notebooks 01-06.
"""

from __future__ import annotations

import importlib.metadata

from agentstate._extras import DIST


def version() -> str:
    """The installed ``agentstate-langgraph``'s version (``agentstate.__version__`` if none)."""
    try:
        return importlib.metadata.version(DIST)
    except importlib.metadata.PackageNotFoundError:
        import agentstate

        return str(agentstate.__version__)
