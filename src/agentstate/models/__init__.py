"""Chat models for the series: a scripted model (the offline default) and a factory.

Used by every notebook.
"""

from agentstate.models.factory import ModelSettings, get_chat_model, model_settings
from agentstate.models.policy import PolicyChatModel
from agentstate.models.scripted import (
    OfflineChatModel,
    ScriptedChatModel,
    ScriptExhaustedError,
    reply,
    tool_call,
)

__all__ = [
    "ModelSettings",
    "OfflineChatModel",
    "PolicyChatModel",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "get_chat_model",
    "model_settings",
    "reply",
    "tool_call",
]
