"""Count tokens with the engine's own tokenizer, offline, when the engine is installed.

``Llama(vocab_only=True)`` loads only the vocabulary (about 0.2 s), so
``agentstate experts manual-stats`` and the benchmark can report how many
prompt tokens the manual costs on SmolLM2. Without the engine: ``None``.
Notebook 05.
"""

from __future__ import annotations

import atexit
import contextlib
import io
from functools import lru_cache
from typing import Any

from agentstate.engine.model import engine_installed, locate_model, quiet_fd2


@lru_cache(maxsize=1)
def _vocab() -> Any:
    from llama_cpp import Llama

    # llama-cpp-python's log callback prints llama.cpp's warnings (its WARN level maps to
    # ERROR, so verbose=False keeps them) with Python's print to sys.stderr, which a notebook
    # shows as a stderr box ("n_ctx_seq (512) > n_ctx_train (0)": a vocabulary-only load has
    # no training context). Both streams are held for the load only.
    with quiet_fd2(), contextlib.redirect_stderr(io.StringIO()):
        vocab = Llama(str(locate_model()), vocab_only=True, verbose=False)
    atexit.register(vocab.close)  # freed while llama_cpp still can (not in a late __del__)
    return vocab


def count_tokens(text: str) -> int | None:
    """Tokens of ``text`` for SmolLM2 (no BOS, no special tokens), or None if not installed."""
    if not engine_installed():
        return None
    return len(_vocab().tokenize(text.encode("utf-8"), add_bos=False, special=False))
