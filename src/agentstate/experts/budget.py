"""Does the largest call of a turn fit the engine's context? Checked before anything is sent.

The whole manual is about 24k tokens and the local engine holds 8k: sent
anyway, llama.cpp's server answers with an empty stream and the user sees
"No generation chunks were returned". So ``agentstate experts run`` counts
the prompt with the engine's own tokenizer (a bytes/4 estimate without it)
and refuses in one line, naming the largest ``--sections`` that fits.
Taught in notebook 05.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentstate.experts.manual import Manual
from agentstate.experts.personas import EXPERTS
from agentstate.experts.prompts import SYNTHESIS_RULES, system_prefix

PER_MESSAGE = 8
"""Chat-template tokens around each message (ChatML uses 5; a margin on top)."""


class ContextTooSmallError(ValueError):
    """The prompt plus the reply would not fit the engine's context window."""


def _tokens(text: str) -> tuple[int, bool]:
    from agentstate.engine import count_tokens

    counted = count_tokens(text)
    return (counted, True) if counted is not None else (len(text.encode()) // 4 + 1, False)


@dataclass(frozen=True)
class Budget:
    """Tokens the largest call of one turn needs (prompt + reply), and whether they were counted."""

    prefix: int
    rest: int
    reply: int
    exact: bool

    @property
    def total(self) -> int:
        return self.prefix + self.rest + self.reply


def turn_budget(manual: Manual, query: str, max_tokens: int) -> Budget:
    """The largest call: an expert (prefix, persona, query) or the synthesis (plus 3 notes)."""
    prefix, exact = _tokens(system_prefix(manual).text)
    persona = max(_tokens(p.system_text())[0] for p in EXPERTS.values())
    synthesis = _tokens(SYNTHESIS_RULES)[0] + 3 * (max_tokens + 16)
    rest = max(persona, synthesis) + _tokens(query)[0] + 3 * PER_MESSAGE
    return Budget(prefix=prefix, rest=rest, reply=max_tokens, exact=exact)


def check_fits(manual: Manual, query: str, max_tokens: int, context: int) -> Budget:
    """The budget, or :class:`ContextTooSmallError` naming the largest part that fits."""
    budget = turn_budget(manual, query, max_tokens)
    if budget.total <= context:
        return budget
    fitting = 0
    for k in range(1, len(manual.chapter_titles()) + 1):
        if turn_budget(manual.leading(k), query, max_tokens).total > context:
            break
        fitting = k
    advice = (
        f"pass --sections {fitting} (the most chapters that fit) or fewer"
        if fitting
        else "even one chapter is too long here"
    )
    about = "" if budget.exact else "about "
    raise ContextTooSmallError(
        f"the prompt needs {about}{budget.total} tokens (manual prefix {budget.prefix}, "
        f"reply {budget.reply}), which does not fit the engine's context of {context} tokens; "
        f"{advice}, or use a server with a larger context"
    )
