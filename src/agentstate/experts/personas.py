"""The three experts: who they are and how they answer (system message 2).

Personas change per expert, so they go AFTER the invariant manual prefix;
putting one before the manual gives every expert a different prefix and a cold
cache. Taught in notebook 05.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Persona:
    name: str
    title: str
    focus: str
    chapters: tuple[int, ...]
    """Manual chapters this expert knows best (the offline stub cites one of them)."""

    def system_text(self) -> str:
        """The persona as the second system message (after the invariant manual prefix)."""
        return (
            f"You are the {self.title} of the operations desk. Focus: {self.focus}. "
            "Answer in at most four sentences, cite manual rule numbers such as 4.7, "
            "and say so when the manual does not cover the question."
        )


EXPERTS: dict[str, Persona] = {
    p.name: p
    for p in (
        Persona("technical_specialist", "technical specialist",
                "systems, batch jobs, payments processing, incidents, changes and recovery",
                (4, 8, 9, 19, 15, 10)),
        Persona("compliance_auditor", "compliance auditor",
                "regulatory duties, financial crime, sanctions, data protection, deadlines",
                (3, 5, 6, 11, 18, 2)),
        Persona("support_concierge", "support concierge",
                "what to tell customers, complaints, redress, cards and vulnerable customers",
                (13, 12, 7, 14, 21, 22)),
    )
}  # fmt: skip
EXPERT_ORDER: tuple[str, ...] = tuple(EXPERTS)
DEFAULT_EXPERT = "support_concierge"
MAX_EXPERTS = 3
