"""The offline models of notebook 06: a well-behaved capture policy and the reported faults.

A policy is a function ``messages -> AIMessage``, played by
``ScriptedChatModel``. ``CapturePolicy()`` emits what a well-behaved model
emits for the current turn. ``CapturePolicy(AS_REPORTED, one_call_per_step=
True)`` behaves as users report of the prebuilt ReAct
agent: it answers the user in its own words (and later persists that text),
writes some messages twice, tags some assistant turns as the user's,
bootstraps twice, skips the periodic flush, and takes a user who types
"SESSION_END" for the control signal. Every fault fires at fixed ``msg_idx``
positions, so the symptoms are the same on every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage

from agentstate.memory.capture import calls
from agentstate.memory.capture.conversations import CONTROLS
from agentstate.memory.capture.prompt import ids_from
from agentstate.models import get_chat_model

AGENT_ANSWER = "Happy to help! Here are a few ideas to get you started."


@dataclass(frozen=True)
class Faults:
    """Which misbehaviours fire, and where (``msg_idx % every == at``)."""

    double_bootstrap: bool = False
    duplicate_every: int = 0  # a second add_entry for msg_idx % n == 3
    role_swap_every: int = 0  # assistant messages with msg_idx % n == 0 tagged "user"
    answer_every: int = 0  # after user messages with msg_idx % n == 1 the agent answers
    skip_periodic_flush: bool = False
    control_words_in_text: bool = False

    def hits(self, every: int, msg_idx: int, at: int) -> bool:
        """Does a fault configured as ``every`` fire at ``msg_idx`` (offset ``at``)?"""
        return bool(every) and msg_idx % every == at % every


AS_REPORTED = Faults(
    double_bootstrap=True,
    duplicate_every=5,
    role_swap_every=4,
    answer_every=4,
    skip_periodic_flush=True,
    control_words_in_text=True,
)


def _is_turn(message: BaseMessage) -> bool:
    if isinstance(message, ChatMessage | HumanMessage):
        return True
    return isinstance(message, SystemMessage) and message.content in CONTROLS


class CapturePolicy:
    """``messages -> AIMessage``: the calls for the current turn not yet made."""

    def __init__(self, faults: Faults = Faults(), one_call_per_step: bool = False) -> None:
        self.faults = faults
        self.one_call_per_step = one_call_per_step

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        vault_id, memory_id = ids_from(messages)
        turn_at = max(i for i, m in enumerate(messages) if _is_turn(m))
        turn, history = messages[turn_at], messages[:turn_at]
        made = [
            c for m in messages[turn_at + 1 :] if isinstance(m, AIMessage) for c in m.tool_calls
        ]
        plan = self.plan(turn, history, vault_id, memory_id)
        remaining = plan[len(made) :]
        if remaining:
            return AIMessage(
                content="", tool_calls=remaining[:1] if self.one_call_per_step else remaining
            )
        return AIMessage(content=self.final_text(turn))

    def _role_and_idx(self, turn: BaseMessage, history: list[BaseMessage]) -> tuple[str, int]:
        role = turn.role if isinstance(turn, ChatMessage) else "user"
        idx = turn.additional_kwargs.get("msg_idx")
        if idx is None:
            idx = 1 + sum(isinstance(m, ChatMessage | HumanMessage) for m in history)
        return role, idx

    def plan(
        self, turn: BaseMessage, history: list[BaseMessage], vault_id: str, memory_id: str
    ) -> list[dict[str, Any]]:
        """Every call this policy makes for ``turn``, faults included, in order."""
        f = self.faults
        text = turn.content if isinstance(turn.content, str) else str(turn.content)
        control = isinstance(turn, SystemMessage) or (f.control_words_in_text and text in CONTROLS)
        context = calls.digest(history + [turn], memory_id)
        if control:
            if text == "SESSION_START":
                boot = calls.bootstrap(vault_id, memory_id)
                return boot * 2 if f.double_bootstrap else boot
            return calls.flush(vault_id, memory_id, context)
        role, idx = self._role_and_idx(turn, history)
        plan = []
        previous = next((m for m in reversed(history) if isinstance(m, AIMessage)), None)
        if previous is not None and previous.content and not previous.tool_calls:
            # the agent's own answer is in its context now; it takes it for the assistant's turn
            plan.append(
                calls.add_entry(vault_id, memory_id, "assistant", idx - 1, str(previous.content))
            )
        tagged = "user" if role == "assistant" and f.hits(f.role_swap_every, idx, 0) else role
        entry = calls.add_entry(vault_id, memory_id, tagged, idx, text)
        plan.append(entry)
        if f.hits(f.duplicate_every, idx, 3):
            plan.append(entry)
        if calls.periodic_flush_due(idx) and not f.skip_periodic_flush:
            plan += calls.flush(vault_id, memory_id, context)
        return plan

    def final_text(self, turn: BaseMessage) -> str:
        """What the model says once its calls are made ("" unless it answers the user)."""
        f = self.faults
        if isinstance(turn, ChatMessage) and turn.role == "user":
            idx = turn.additional_kwargs.get("msg_idx") or 0
            if f.hits(f.answer_every, idx, 1):
                return AGENT_ANSWER
        return ""


def policy_model(policy: CapturePolicy, name: str, max_calls: int = 100_000):
    """A chat model playing ``policy`` offline, or the real endpoint if the env opts in."""
    return get_chat_model([policy] * max_calls, name=name)
