"""Save and restore the engine's shared prefix with llama.cpp's state API.

After a prime call the engine's KV cache holds the tokens every call that
starts with the given system message shares (for the experts of notebook
05: instructions + manual; the engine is handed the text and knows nothing
of experts); :class:`PrefixStore` cuts the cache back to
exactly those tokens and writes them with ``llama_state_seq_save_file``
(the KV cells of sequence 0 and their token ids, no logits: 14 MB for a
620-token prefix of SmolLM2), beside a manifest of what it is valid for
(:mod:`agentstate.engine.state_files`). A restarted engine reads it back
with ``llama_state_seq_load_file`` and tells llama-cpp-python which tokens
its cache holds, so the first request reuses them instead of a cold
prefill. We use the pinned llama-cpp-python rather than building
llama.cpp's own server (``--slot-save-path``): the engine stays the one the
lessons measure, and no second compile is needed.

llama.cpp refuses a state made with another KV type or flash-attention
setting, but it accepts one made by another model file of the same shape
(the shipped Q4_1 against our Q4_0) and then answers wrongly, and the
padded cache accepts more tokens than a smaller ``n_ctx`` can serve. So
the manifest is checked first (model sha256, versions, KV types, flash
attention, rope and LoRA settings, context, the prefix's tokens, the file's
own sha256), and any refusal leaves the cache empty: a cold prefill, never
a wrong answer. Used by :mod:`agentstate.engine.app`; taught in notebook
05 (its going-further page).
"""

from __future__ import annotations

import ctypes
import hashlib
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from agentstate.engine.model import engine_version, file_sha256
from agentstate.engine.state_files import (
    FORMAT,
    SavedState,
    StateLocked,
    enforce_budget,
    file_problem,
    locked,
    now,
    regular,
    saved_states,
    state_key,
    tokens_sha256,
    touch,
    write_state,
)

SEQ = 0  # llama-cpp-python's single sequence


@lru_cache(maxsize=1)
def llama_cpp_build() -> str:
    """The vendored llama.cpp: ggml's version and the commit it was built from."""
    import llama_cpp

    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.ggml_version.restype = lib.ggml_commit.restype = ctypes.c_char_p
    return f"ggml {lib.ggml_version().decode()} ({lib.ggml_commit().decode()})"


def engine_versions() -> dict[str, str]:
    """The two versions a state depends on (a newer llama.cpp may change the KV layout)."""
    return {"llama_cpp_python": engine_version() or "unknown", "llama_cpp": llama_cpp_build()}


def _file_digest(path: str | None) -> str | None:
    return file_sha256(Path(path)) if path else None


def validity(llama: Any, model_path: Path) -> dict[str, Any]:
    """What a state saved by this engine is valid for (``n_ctx`` is compared apart)."""
    params = llama.context_params
    import llama_cpp

    return {
        "model_sha256": file_sha256(model_path),
        **engine_versions(),
        "type_k": int(params.type_k),
        "type_v": int(params.type_v),
        "flash_attn": int(params.flash_attn_type) == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        "rope_scaling_type": int(params.rope_scaling_type),
        "rope_freq_base": float(params.rope_freq_base),
        "rope_freq_scale": float(params.rope_freq_scale),
        "yarn": [
            float(params.yarn_ext_factor),
            float(params.yarn_attn_factor),
            float(params.yarn_beta_fast),
            float(params.yarn_beta_slow),
            int(params.yarn_orig_ctx),
        ],  # fmt: skip
        "swa_full": bool(params.swa_full),
        "embeddings": bool(params.embeddings),
        "lora_sha256": _file_digest(llama.lora_path),
        "lora_base_sha256": _file_digest(llama.lora_base),
        "lora_scale": float(llama.lora_scale) if llama.lora_path else None,
    }


class _Prompt(Exception):
    def __init__(self, tokens: list[int]):
        self.tokens = tokens


class _CapturePrompt:
    """The Llama as a chat handler sees it, except that completing returns the prompt tokens."""

    def __init__(self, llama: Any):
        self._llama = llama

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, prompt: Any, **_: Any) -> Any:
        if not isinstance(prompt, list):
            raise TypeError("this chat format passes text, not tokens, to the model")
        raise _Prompt([int(t) for t in prompt])


def chat_tokens(llama: Any, messages: list[dict[str, str]]) -> list[int]:
    """The prompt tokens the server's own chat handler makes of ``messages``."""
    from llama_cpp import llama_chat_format

    handler = (
        llama.chat_handler
        or llama._chat_handlers.get(llama.chat_format)
        or llama_chat_format.get_chat_completion_handler(llama.chat_format)
    )
    try:
        handler(llama=cast(Any, _CapturePrompt(llama)), messages=cast(Any, messages))
    except _Prompt as prompt:
        return prompt.tokens
    raise RuntimeError("the chat handler did not ask for a completion")


def shared_prefix_tokens(llama: Any, text: str) -> list[int]:
    """The tokens every call that starts with system message ``text`` shares.

    Two prompts that continue differently (a second system message, as an
    expert's persona does; a user message, as the prime call does) are rendered by
    the server's chat template; their common tokens are the prefix.
    """
    first = chat_tokens(llama, [{"role": "system", "content": text},
                                {"role": "system", "content": "a"}])  # fmt: skip
    second = chat_tokens(llama, [{"role": "system", "content": text},
                                 {"role": "user", "content": "b"}])  # fmt: skip
    n = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        n += 1
    return first[:n]


def prefix_sha256(text: str) -> str:
    """The prefix's sha256: that of system message 1's UTF-8 bytes (as its callers record it)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def held_tokens(llama: Any, tokens: list[int]) -> int:
    """How many leading ``tokens`` the engine's KV cache holds right now."""
    n = 0
    for a, b in zip(llama._input_ids.tolist(), tokens, strict=False):
        if a != b:
            break
        n += 1
    return n


def keep_only(llama: Any, n: int) -> None:
    """Cut the KV cache back to its first ``n`` tokens (the next request re-reads one token)."""
    llama._ctx.kv_cache_seq_rm(-1, n, -1)
    llama.n_tokens = n
    llama._requires_eval = True


def forget_all(llama: Any) -> None:
    """An empty KV cache: what a refused or partial load must leave behind."""
    llama._ctx.kv_cache_clear()
    llama.reset()


@dataclass
class Outcome:
    """What one save or restore did, and the one line the engine logs for it."""

    ok: bool
    line: str
    state: SavedState | None = None
    seconds: float = 0.0


class PrefixStore:
    """The saved states one engine (one model and one set of KV settings) may use."""

    def __init__(self, llama: Any, model_path: Path, folder: Path, budget: int):
        self.llama = llama
        self.model_path = Path(model_path)
        self.folder = Path(folder)
        self.budget = budget
        self.n_ctx = len(llama.input_ids)  # what the engine serves (llama.cpp pads its cache)
        self.valid_for = validity(llama, self.model_path)

    # --- checks ---

    def mismatch(self, state: SavedState, *, check_sha: bool = True) -> str | None:
        """Why this engine must not load ``state`` (manifest and file), or None.

        ``check_sha``: hash the state file again (done under the lock, just
        before llama.cpp reads it); else only its kind and size are checked.
        """
        manifest = state.manifest
        if manifest.get("format") != FORMAT:
            return f"the state {state.key} has another format ({manifest.get('format')})"
        theirs = manifest["valid_for"]
        differs = [k for k in self.valid_for if theirs.get(k) != self.valid_for[k]]
        if "model_sha256" in differs:
            return (f"the state {state.key} was made with another model file (sha256 "
                    f"{str(theirs.get('model_sha256'))[:12]}..., this engine's "
                    f"{self.valid_for['model_sha256'][:12]}...)")  # fmt: skip
        if differs:
            shown = ", ".join(f"{k} {theirs.get(k)!r} != {self.valid_for[k]!r}" for k in differs)
            return f"the state {state.key} was made with other settings ({shown})"
        tokens = manifest["tokens"]
        if len(tokens) > self.n_ctx:
            return f"the state {state.key} holds {len(tokens)} tokens, more than n_ctx {self.n_ctx}"
        if tokens_sha256(tokens) != manifest.get("tokens_sha256"):
            return f"the manifest of {state.key} is damaged (its token ids do not hash to its own)"
        return file_problem(state, check_sha=check_sha)

    def candidates(self, prefix: str | None = None) -> tuple[list[SavedState], list[str]]:
        """States this engine may load (most recent first), and why the others may not."""
        usable: list[SavedState] = []
        refused: list[str] = []
        for state in saved_states(self.folder):
            if prefix and state.manifest.get("prefix_sha256") != prefix:
                continue
            reason = self.mismatch(state, check_sha=False)  # hashed when loaded
            if reason:
                refused.append(reason)
            else:
                usable.append(state)
        return usable, refused

    # --- restore ---

    def load(self, state: SavedState, tokens: list[int] | None = None) -> Outcome:
        """Load ``state`` into the (emptied) KV cache; ``tokens``: the prefix it must hold."""
        import llama_cpp

        expected = state.manifest["tokens"]
        if tokens is not None and expected != tokens:
            return Outcome(False, f"the state {state.key} holds other tokens than this prefix's")
        start = time.perf_counter()
        forget_all(self.llama)
        with locked(self.folder, state.key, exclusive=False):
            reason = self.mismatch(state)  # under the lock: the files cannot change now
            if reason:
                return Outcome(False, reason)
            out = (llama_cpp.llama_token * len(expected))()
            count = ctypes.c_size_t(0)
            read = llama_cpp.llama_state_seq_load_file(
                self.llama.ctx, str(state.state_path).encode(), SEQ, out, len(expected),
                ctypes.byref(count),
            )  # fmt: skip
        loaded = list(out[: count.value])
        if not read or loaded != expected:
            forget_all(self.llama)
            why = "refused by llama.cpp" if not read else "holds other tokens than its manifest"
            return Outcome(False, f"the state file {state.state_path} was {why}")
        self.llama.input_ids[: len(loaded)] = loaded
        self.llama.n_tokens = len(loaded)
        self.llama._requires_eval = True
        seconds = time.perf_counter() - start
        self.touch(state)
        return Outcome(True, f"restored the prefix state {state.key} ({len(loaded)} tokens, "
                             f"{state.size / 1e6:.1f} MB) from {state.state_path} in "
                             f"{seconds:.3f} s", state, seconds)  # fmt: skip

    def restore(self, prefix: str | None = None) -> Outcome:
        """At start: the newest usable state (of ``prefix``, if given); else why it stays cold."""
        usable, refused = self.candidates(prefix)
        for state in usable:
            outcome = self.load(state)
            if outcome.ok:
                return outcome
            refused.insert(0, outcome.line)
        if not refused:
            what = f"for prefix {prefix[:12]}... " if prefix else ""
            return Outcome(False, f"cold prefill: no saved prefix state {what}in {self.folder}")
        more = f" (and {len(refused) - 1} more not valid here)" if len(refused) > 1 else ""
        return Outcome(False, f"cold prefill: {refused[0]}{more}")

    def touch(self, state: SavedState) -> None:
        """Record the use (the budget removes the least recently used first)."""
        touch(state)

    # --- save ---

    def key(self, prefix: str) -> str:
        """The file name stem of this engine's state for ``prefix``."""
        return state_key(self.valid_for, prefix)

    def saved(self, prefix: str, tokens: list[int]) -> SavedState | None:
        """The state already saved for this prefix, if its manifest holds (size, not sha)."""
        for state in saved_states(self.folder):
            if state.key == self.key(prefix) and state.manifest["tokens"] == tokens:
                seen = regular(state.state_path)
                if seen is not None and seen.st_size == state.size:
                    return state
        return None

    def save(self, prefix: str, tokens: list[int], label: str = "") -> Outcome:
        """Write the cache's first ``len(tokens)`` tokens (it must hold them) atomically."""
        import llama_cpp

        n = len(tokens)
        if held_tokens(self.llama, tokens) < n:
            return Outcome(False, "not saved: the KV cache does not hold this prefix")
        keep_only(self.llama, n)
        key = self.key(prefix)
        path = self.folder / f"{key}.state"

        def fill(tmp: Path) -> int:
            return int(llama_cpp.llama_state_seq_save_file(
                self.llama.ctx, str(tmp).encode(), SEQ, (llama_cpp.llama_token * n)(*tokens), n,
            ))  # fmt: skip

        start = time.perf_counter()
        try:
            state = write_state(
                self.folder, key, fill, lambda tmp: self.manifest(key, prefix, tokens, tmp, label)
            )
        except StateLocked as busy:
            return Outcome(False, f"not saved: {busy} (it is writing this prefix)")
        except OSError as err:
            return Outcome(False, f"not saved: {err}")
        seconds = time.perf_counter() - start
        try:
            removed = enforce_budget(self.folder, self.budget, keep=key,
                                     versions=engine_versions())  # fmt: skip
            gone = f"; removed {', '.join(removed)}" if removed else ""
        except OSError as err:  # the state is written: a failed eviction does not undo that
            gone = f"; the budget was not enforced this time ({err})"
        return Outcome(True, f"saved the prefix state {key} ({n} tokens, {state.size / 1e6:.1f} "
                             f"MB) to {path} in {seconds:.3f} s{gone}", state, seconds)  # fmt: skip

    def manifest(self, key: str, prefix: str, tokens: list[int], file: Path, label: str) -> dict:
        """What the state is, and what it is valid for."""
        stamp = now()
        return {
            "format": FORMAT,
            "key": key,
            "label": label,
            "prefix_sha256": prefix,
            "n_tokens": len(tokens),
            "tokens_sha256": tokens_sha256(tokens),
            "tokens": tokens,
            "state_bytes": file.stat().st_size,
            "state_sha256": file_sha256(file, cached=False),
            "n_ctx": self.n_ctx,
            "model_path": str(self.model_path),
            "model_file": self.model_path.name,
            "valid_for": self.valid_for,
            "saved_at": stamp,
            "used_at": stamp,
        }
