"""The engine process: llama-cpp-python's server, plus a prefix state kept across restarts.

``python -m agentstate.engine`` takes every flag of ``python -m
llama_cpp.server`` and three of its own (``--state_dir``,
``--state_budget_mb``, ``--restore auto|none|PREFIX_SHA256``). It builds
llama-cpp-python's own FastAPI app and adds:

- at start, before the first request and under the engine's own lock: the
  newest saved prefix state valid for this model and these settings is
  restored (:class:`~agentstate.engine.state_cache.PrefixStore`), or the
  engine starts cold; either way one log line says which and why;
- ``POST /agentstate/prefix`` (``{"text": system message 1, "label": ...}``):
  prime the shared prefix (from the cache, a saved state, or a prefill)
  and save it; ``agentstate engine prime`` and ``agentstate experts prime`` call it;
- ``GET /agentstate/state``: whether this engine restored a state, and
  which prefix it holds; ``agentstate engine status`` shows it;
- on a clean stop (SIGTERM, Ctrl-C), the primed prefix is saved if its
  state is missing (removed, or another engine held the lock).

Log lines start with ``agentstate.engine:``. Used by
:class:`~agentstate.engine.server.EngineServer`; taught in notebook 05 (its going-further page).
"""

import argparse
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, cast

from agentstate.engine.prefix_client import LOG_PREFIX, RESTORE_HELP


def log(line: str) -> None:
    """One line in the engine's log (stderr)."""
    print(LOG_PREFIX + line, file=sys.stderr, flush=True)


class PrefixEngine:
    """The prefix this engine primed or restored, and the store it saves it in."""

    def __init__(self, model_path: Path, folder: Path, budget: int, restore: str = "auto"):
        self.model_path, self.folder = model_path, folder
        self.budget, self.restore = budget, restore
        self.store: Any = None
        self.start_line = ""
        self.restored: dict[str, Any] | None = None
        self.prefix: dict[str, Any] | None = None  # sha256, tokens, label

    def start(self, llama: Any) -> None:
        """Restore a saved state before the first request (the caller holds the engine lock)."""
        from agentstate.engine.state_cache import Outcome, PrefixStore

        self.store = PrefixStore(llama, self.model_path, self.folder, self.budget)
        if self.restore == "none":
            outcome = Outcome(False, "cold prefill: restoring is off (--restore none)")
        else:
            outcome = self.store.restore(None if self.restore == "auto" else self.restore)
        if outcome.ok and outcome.state is not None:
            manifest = outcome.state.manifest
            self.restored = {**self._describe(manifest), "seconds": round(outcome.seconds, 4)}
            self.prefix = {"sha256": manifest["prefix_sha256"], "tokens": manifest["tokens"],
                           "label": manifest.get("label", "")}  # fmt: skip
        self.start_line = outcome.line
        log(outcome.line)

    @staticmethod
    def _describe(manifest: dict[str, Any]) -> dict[str, Any]:
        return {
            "key": manifest["key"],
            "prefix_sha256": manifest["prefix_sha256"],
            "label": manifest.get("label", ""),
            "tokens": manifest["n_tokens"],
            "bytes": manifest["state_bytes"],
        }

    def prime(self, llama: Any, text: str, label: str = "", save: bool = True) -> dict[str, Any]:
        """Make the KV cache hold the prefix of ``text`` and save it (engine lock held)."""
        from agentstate.engine.state_cache import (
            held_tokens,
            keep_only,
            prefix_sha256,
            shared_prefix_tokens,
        )

        store = self.store
        sha, tokens = prefix_sha256(text), shared_prefix_tokens(llama, text)
        if len(tokens) > store.n_ctx:
            raise ValueError(f"the prefix has {len(tokens)} tokens, more than n_ctx {store.n_ctx}")
        start = time.perf_counter()
        held = held_tokens(llama, tokens)
        source, detail = "cache", f"the KV cache held all {len(tokens)} tokens"
        if held < len(tokens):
            usable, _ = store.candidates(sha)
            loaded = store.load(usable[0], tokens) if usable else None
            if loaded is not None and loaded.ok:
                source, detail = "restored", loaded.line
            else:
                held = held_tokens(llama, tokens)  # a refused load left the cache empty
                keep_only(llama, held)
                llama.eval(tokens[held:])
                source = "prefill"
                why = f" ({loaded.line})" if loaded is not None else ""
                detail = f"prefilled {len(tokens) - held} of {len(tokens)} tokens{why}"
        seconds = time.perf_counter() - start
        log(f"primed the prefix {sha[:12]} ({len(tokens)} tokens) in {seconds:.2f} s: {detail}")
        self.prefix = {"sha256": sha, "tokens": tokens, "label": label}
        result: dict[str, Any] = {
            "prefix_sha256": sha, "tokens": len(tokens), "source": source,
            "reused_tokens": held if source != "restored" else len(tokens),
            "seconds": round(seconds, 4), "saved": None, "note": "",
        }  # fmt: skip
        if save:
            existing = store.saved(sha, tokens)
            if existing is not None:
                result["saved"] = {"key": existing.key, "path": str(existing.state_path),
                                   "bytes": existing.size, "written": False}  # fmt: skip
            else:
                outcome = store.save(sha, tokens, label)
                log(outcome.line)
                if outcome.ok and outcome.state is not None:
                    result["saved"] = {"key": outcome.state.key, "bytes": outcome.state.size,
                                       "path": str(outcome.state.state_path), "written": True,
                                       "seconds": round(outcome.seconds, 4)}  # fmt: skip
                else:
                    result["note"] = outcome.line
        return result

    def stop(self, llama: Any) -> None:
        """On a clean stop: save the primed prefix if its state is missing (engine lock held)."""
        from agentstate.engine.state_cache import held_tokens

        if self.store is None or self.prefix is None:
            return
        sha, tokens = self.prefix["sha256"], self.prefix["tokens"]
        if self.store.saved(sha, tokens) is not None:
            return
        if held_tokens(llama, tokens) < len(tokens):
            log(f"not saved at stop: the KV cache no longer holds the prefix {sha[:12]}")
            return
        log(self.store.save(sha, tokens, self.prefix["label"]).line)

    def status(self) -> dict[str, Any]:
        """What ``GET /agentstate/state`` answers."""
        prefix = self.prefix
        return {
            "restored": self.restored is not None,
            "restored_state": self.restored,
            "start": self.start_line,
            "prefix": None
            if prefix is None
            else {
                "sha256": prefix["sha256"],
                "tokens": len(prefix["tokens"]),
                "label": prefix["label"],
            },  # fmt: skip
            "state_dir": str(self.folder),
            "n_ctx": None if self.store is None else self.store.n_ctx,
            "valid_for": None if self.store is None else self.store.valid_for,
        }


def install(app: Any, engine: PrefixEngine) -> None:
    """Add the restore/save lifespan and the two routes to llama-cpp-python's app."""
    # Imported here: the package imports without the engine installed. No ``from __future__
    # import annotations`` in this module, so FastAPI sees the Annotated types below.
    import anyio
    from fastapi import APIRouter, Body, Depends, HTTPException
    from llama_cpp.server.app import get_llama_proxy
    from starlette.concurrency import run_in_threadpool

    engine_lock = contextlib.asynccontextmanager(get_llama_proxy)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with engine_lock() as proxy:  # no request runs before the restore ends
            await anyio.to_thread.run_sync(engine.start, proxy())
        yield
        async with engine_lock() as proxy:
            await anyio.to_thread.run_sync(engine.stop, proxy())

    app.router.lifespan_context = lifespan
    router = APIRouter()

    @router.get("/agentstate/state")
    async def state() -> dict[str, Any]:
        return engine.status()

    @router.post("/agentstate/prefix")
    async def prime(
        text: Annotated[str, Body(min_length=1)],
        proxy: Annotated[Any, Depends(get_llama_proxy)],
        label: Annotated[str, Body()] = "",
        save: Annotated[bool, Body()] = True,
    ) -> dict[str, Any]:
        try:
            return await run_in_threadpool(engine.prime, proxy(), text, label, save)
        except ValueError as err:
            raise HTTPException(status_code=400, detail=str(err)) from None

    app.include_router(router)


def parser() -> argparse.ArgumentParser:
    """llama_cpp.server's flags plus ours."""
    from llama_cpp.server.cli import add_args_from_model
    from llama_cpp.server.settings import Settings

    from agentstate.engine.state_files import DEFAULT_BUDGET_MB

    parse = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args_from_model(parse, Settings)
    parse.add_argument("--state_dir", type=Path, required=True, help="where states are saved")
    parse.add_argument("--state_budget_mb", type=int, default=DEFAULT_BUDGET_MB)
    parse.add_argument("--restore", default="auto", help=RESTORE_HELP)
    return parse


def main(argv: list[str] | None = None) -> None:
    """Build the app, then serve it with uvicorn (as ``python -m llama_cpp.server`` does)."""
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.cli import parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    args = parser().parse_args(argv)
    server_settings = cast(ServerSettings, parse_model_from_args(ServerSettings, args))
    model_settings = cast(ModelSettings, parse_model_from_args(ModelSettings, args))
    app = create_app(server_settings=server_settings, model_settings=[model_settings])
    budget = args.state_budget_mb * 1_000_000
    install(app, PrefixEngine(Path(model_settings.model), args.state_dir, budget, args.restore))
    uvicorn.run(app, host=server_settings.host, port=server_settings.port)
