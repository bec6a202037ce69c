"""A third-party deep agent whose subagents share the parent's state schema (issue 41 item 3).

deepagents' ``task`` drops a key a subagent hands back unchanged (from 0.7.24), so a list
reduced by ``operator.add`` doubles only when the subagent delegated to writes it. Written
for this corpus after the public shape named below (no code copied).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired

from deepagents import DeepAgentState, create_deep_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import InjectedState
from langgraph.types import Command

from agentstate.models import reply, tool_call
from tests.doctor_corpus._kit import USER, Proof, case, scripted

# --- a financial advisor's assistant: three domain subagents behind `task` -------------------
# Follows wssranjula/Financial-Advisor-Agent financial-advisor-agent/backend/app/agents/
# main_agent.py (the main agent gets every tool, gmail + calendar + hubspot, and three
# subagents built by factories in agents/subagents/: email_researcher with the gmail tools,
# calendar_scheduler with the calendar tools, hubspot_manager with the CRM tools). Here the
# state schema carries `clients`, the clients the advisor picked (an operator.add list the
# chat API fills and the tools read), and, in the second graph, `notes_logged`, which the
# CRM's create_note appends to. The model is scripted (the original's ChatAnthropic).


class AdvisorState(DeepAgentState):
    clients: Annotated[NotRequired[list[str]], operator.add]


class LoggingAdvisorState(AdvisorState):
    notes_logged: Annotated[NotRequired[list[str]], operator.add]


@tool
def search_emails(query: str, state: Annotated[dict[str, Any], InjectedState]) -> str:
    """Search the advisor's mailbox for the picked clients."""
    return f"2 emails about {query} from {', '.join(state.get('clients', []))}"


@tool
def find_available_slots(day: str) -> str:
    """Find free slots in the advisor's calendar."""
    return f"{day}: 10:00, 14:00"


@tool
def get_contact_notes(name: str) -> str:
    """Read a contact's CRM notes."""
    return f"{name}: prefers email"


@tool
def create_note(name: str, text: str, runtime: ToolRuntime) -> Command:
    """Log a note on a contact in the CRM."""
    done = ToolMessage(f"note logged for {name}", tool_call_id=runtime.tool_call_id)
    return Command(update={"notes_logged": [f"{name}: {text}"], "messages": [done]})


GMAIL = [search_emails]
CALENDAR = [find_available_slots]


def email_researcher_agent(model: Any) -> dict[str, Any]:
    return {
        "name": "email_researcher",
        "description": "Searches and summarizes the advisor's email.",
        "system_prompt": "Research the emails.",
        "tools": GMAIL,
        "model": model,
    }


def calendar_scheduler_agent(model: Any) -> dict[str, Any]:
    return {
        "name": "calendar_scheduler",
        "description": "Finds slots and schedules meetings.",
        "system_prompt": "Schedule.",
        "tools": CALENDAR,
        "model": model,
    }


def hubspot_manager_agent(model: Any, tools: list[Any]) -> dict[str, Any]:
    return {
        "name": "hubspot_manager",
        "description": "Manages contacts and notes in the CRM.",
        "system_prompt": "Manage the CRM.",
        "tools": tools,
        "model": model,
    }


def advisor(
    parent: Any = None, helpers: dict[str, Any] | None = None, *, logging_notes: bool = False
) -> Any:
    helpers = helpers or {}
    crm = [get_contact_notes, create_note] if logging_notes else [get_contact_notes]
    all_tools = GMAIL + CALENDAR + crm
    subagents = [
        email_researcher_agent(helpers.get("email") or scripted(reply(text="ok"))),
        calendar_scheduler_agent(helpers.get("calendar") or scripted(reply(text="ok"))),
        hubspot_manager_agent(helpers.get("hubspot") or scripted(reply(text="ok")), crm),
    ]
    return create_deep_agent(
        parent or scripted(reply(text="ok")),
        tools=all_tools,
        state_schema=LoggingAdvisorState if logging_notes else AdvisorState,
        subagents=subagents,
    )


def _task(description: str, subagent: str) -> dict[str, Any]:
    return tool_call("task", description=description, subagent_type=subagent)


def prove_reading_subagents() -> Proof:
    parent = scripted(
        reply(_task("emails from the picked clients", "email_researcher")),
        reply(_task("a slot on Tuesday", "calendar_scheduler")),
        reply(_task("their CRM notes", "hubspot_manager")),
        reply(text="summary"),
    )
    helpers = {
        "email": scripted(reply(tool_call("search_emails", query="portfolio")), reply(text="2")),
        "calendar": scripted(reply(tool_call("find_available_slots", day="Tue")), reply(text="10")),
        "hubspot": scripted(reply(tool_call("get_contact_notes", name="Sara")), reply(text="ok")),
    }
    out = advisor(parent, helpers).invoke({**USER, "clients": ["Sara", "Michael"]})
    doubled = out["clients"] != ["Sara", "Michael"]
    return Proof(
        frozenset({"list-doubled-by-subagent"}) if doubled else frozenset(),
        f"three subagents ran, none writes `clients`: it ended as {out['clients']}",
    )


def prove_note_logging_subagent() -> Proof:
    parent = scripted(reply(_task("log the call with Sara", "hubspot_manager")), reply(text="ok"))
    helpers = {
        "hubspot": scripted(
            reply(tool_call("create_note", name="Sara", text="called")), reply(text="logged")
        )
    }
    start: Any = {**USER, "clients": ["Sara"], "notes_logged": ["Michael: emailed"]}
    out = advisor(parent, helpers, logging_notes=True).invoke(start)
    doubled = out["notes_logged"].count("Michael: emailed") > 1
    return Proof(
        frozenset({"list-doubled-by-subagent"}) if doubled else frozenset(),
        f"hubspot_manager logged one note: `notes_logged` ended as {out['notes_logged']}",
    )


CASES = [
    case(
        "financial advisor: domain subagents that read a shared operator.add list",
        "wssranjula/Financial-Advisor-Agent backend/app/agents/main_agent.py",
        set(),
        advisor,
        prove_reading_subagents,
    ),
    case(
        "financial advisor: a CRM subagent appends to a shared notes list",
        "wssranjula/Financial-Advisor-Agent backend/app/agents/main_agent.py (create_note)",
        {"list-doubled-by-subagent"},
        lambda: advisor(logging_notes=True),
        prove_note_logging_subagent,
    ),
]
