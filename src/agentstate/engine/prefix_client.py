"""Ask a running engine about its saved prefix state, or to prime and save one.

Two HTTP calls to the routes :mod:`agentstate.engine.app` adds to
llama-cpp-python's server: ``GET /agentstate/state`` (did it restore a
state at start? which prefix does it hold?) and ``POST /agentstate/prefix``
(prime a prefix, the text of system message 1, and save its state). Used by
``agentstate engine prime|status``, ``agentstate experts prime``, the
experts' restart case and notebook 05 (its going-further page).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from agentstate.servers.loopback import LoopbackServerError

LOG_PREFIX = "agentstate.engine: "  # how the engine's own log lines start
RESTORE_HELP = "auto: the newest valid state; none: start cold; or a prefix sha256"
PRIME_TIMEOUT = 900.0  # a cold 6k-token prefill on a loaded 2-core machine takes minutes


def root_url(base_url: str) -> str:
    """``http://127.0.0.1:PORT`` from the OpenAI base URL ``.../v1``."""
    return base_url.rstrip("/").removesuffix("/v1")


def _call(request: urllib.request.Request, timeout: float) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")
        try:
            detail = json.loads(detail).get("detail", detail)
        except (ValueError, AttributeError):
            pass
        if err.code == 404:
            detail = "this server has no prefix-state routes (not started by agentstate engine)"
        raise LoopbackServerError(f"{request.full_url}: HTTP {err.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise LoopbackServerError(f"{request.full_url} did not answer: {err}") from None


def engine_state(base_url: str, timeout: float = 5.0) -> dict[str, Any]:
    """What ``GET /agentstate/state`` says: ``restored``, ``start`` (the log line), ``prefix``."""
    return _call(urllib.request.Request(root_url(base_url) + "/agentstate/state"), timeout)


def prime(
    base_url: str, text: str, label: str = "", *, save: bool = True,
    timeout: float = PRIME_TIMEOUT,
) -> dict[str, Any]:  # fmt: skip
    """Prime system message ``text`` on the engine and save its state; what it did."""
    body = json.dumps({"text": text, "label": label, "save": save}).encode()
    request = urllib.request.Request(
        root_url(base_url) + "/agentstate/prefix", data=body, method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    return _call(request, timeout)


def primed_lines(done: dict[str, Any], label: str) -> list[str]:
    """What ``prime`` did, in the lines ``agentstate engine|experts prime`` print."""
    how = {"cache": "already in the engine's cache", "restored": "restored from its saved state",
           "prefill": "prefilled"}[done["source"]]  # fmt: skip
    lines = [
        f"{label or 'prefix'}: {done['tokens']} prefix tokens {how} in {done['seconds']:.2f} s"
    ]
    saved = done["saved"]
    if saved:
        verb = "saved" if saved["written"] else "already saved"
        lines.append(f"{verb}: {saved['path']} ({saved['bytes'] / 1e6:.1f} MB, key {saved['key']})")
    elif done["note"]:
        lines.append(done["note"])
    return lines
