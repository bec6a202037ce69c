"""Two graphs from a collection of agent architectures: plan-execute-verify, and a debate.

Written for this corpus after FareedKhan-dev/all-agentic-architectures (no code
copied): each architecture is a class whose nodes are its bound methods over a
``TypedDict(total=False)`` state with ``operator.add`` histories, its models built
once in ``__init__`` (``with_structured_output`` for the judges), its routers
bound methods reading ``state.get(...)`` with the object's defaults.
"""

from __future__ import annotations

import operator
from collections import Counter
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentstate.models import reply, tool_call
from tests.doctor_corpus._kit import Proof, case, scripted

# --- plan, execute, verify -------------------------------------------------------------------
# Follows src/agentic_architectures/architectures/pev.py: _plan writes the steps; _execute
# pops the next step (or retries the pending one with the verifier's critique); _verify
# judges the result and either appends it to `past_steps` or sets `pending_critique`;
# _route_after_verify loops to execute while a step is pending or the plan has steps left.


class PEVState(TypedDict, total=False):
    input: str
    plan: list[str]
    past_steps: Annotated[list[dict[str, Any]], operator.add]
    pending_step: str
    pending_result: str
    pending_critique: str
    attempts: int
    response: str


class Plan(BaseModel):
    steps: list[str]


class StepVerification(BaseModel):
    passed: bool
    issues: str = ""


class PEV:
    def __init__(self, llm: Any, max_retries_per_step: int = 2) -> None:
        self.llm = llm
        self.max_retries_per_step = max_retries_per_step
        self._planner = llm.with_structured_output(Plan)
        self._verifier = llm.with_structured_output(StepVerification)

    def _plan(self, state: PEVState) -> dict[str, Any]:
        plan = self._planner.invoke(f"Task: {state['input']}")
        return {"plan": plan.steps, "attempts": 0}

    def _execute(self, state: PEVState) -> dict[str, Any]:
        attempts = state.get("attempts", 0)
        if attempts > 0 and state.get("pending_step"):
            step = state["pending_step"]
            prompt = f"Retry {step}; critique: {state.get('pending_critique', '')}"
            plan_unchanged = state.get("plan", [])
        else:
            step = state["plan"][0]
            prompt = f"Execute {step} for {state['input']}"
            plan_unchanged = state["plan"][1:]
        result = self.llm.invoke(prompt)
        return {
            "pending_step": step,
            "pending_result": str(result.content),
            "plan": plan_unchanged,
            "attempts": attempts + 1,
        }

    def _verify(self, state: PEVState) -> dict[str, Any]:
        verdict = self._verifier.invoke(state.get("pending_result", ""))
        attempts = state.get("attempts", 1)
        if verdict.passed or attempts > self.max_retries_per_step:
            return {
                "past_steps": [{"step": state["pending_step"], "result": state["pending_result"]}],
                "pending_step": "",
                "pending_critique": "",
                "attempts": 0,
            }
        return {"pending_critique": verdict.issues or "(no critique provided)"}

    def _finalize(self, state: PEVState) -> dict[str, Any]:
        history = state.get("past_steps", [])
        return {"response": str(self.llm.invoke(f"{state['input']}: {history}").content)}

    def _route_after_verify(self, state: PEVState) -> str:
        if state.get("pending_step") and state.get("pending_critique"):
            return "execute"
        if state.get("plan"):
            return "execute"
        return "finalize"

    def build(self) -> Any:
        g = StateGraph(PEVState)
        g.add_node("plan", self._plan)
        g.add_node("execute", self._execute)
        g.add_node("verify", self._verify)
        g.add_node("finalize", self._finalize)
        g.add_edge(START, "plan")
        g.add_edge("plan", "execute")
        g.add_edge("execute", "verify")
        g.add_conditional_edges(
            "verify", self._route_after_verify, {"execute": "execute", "finalize": "finalize"}
        )
        g.add_edge("finalize", END)
        return g.compile()


def pev_graph(llm: Any = None) -> Any:
    return PEV(llm or scripted(reply(text="ok"))).build()


def prove_pev() -> Proof:
    llm = scripted(
        reply(tool_call("Plan", steps=["look up", "compute"])),
        reply(text="found 3"),
        reply(tool_call("StepVerification", passed=False, issues="no source")),
        reply(text="found 3 (source: atlas)"),
        reply(tool_call("StepVerification", passed=True)),
        reply(text="3 * 2 = 6"),
        reply(tool_call("StepVerification", passed=True)),
        reply(text="6"),
    )
    out = pev_graph(llm).invoke({"input": "double the count"})
    steps = [(s["step"], s["result"]) for s in out["past_steps"]]
    intact = steps == [("look up", "found 3 (source: atlas)"), ("compute", "3 * 2 = 6")]
    return Proof(
        frozenset() if intact and out["response"] == "6" else frozenset({"unseen-key-read"}),
        "a retried step and the next one each kept once, in order; the answer written",
    )


# --- a multi-agent debate: rounds of answers, then a vote --------------------------------------
# Follows src/agentic_architectures/architectures/debate.py: _round asks each persona in turn
# (one structured-output model) and appends the round to `rounds` (operator.add);
# _should_continue compares state.get("round") with state.get("n_rounds", self.n_rounds);
# _vote tallies the last round.


class DebateState(TypedDict, total=False):
    task: str
    n_agents: int
    n_rounds: int
    round: int
    rounds: Annotated[list[list[dict[str, str]]], operator.add]
    final_answer: str
    final_tally: dict[str, int]


class AgentAnswer(BaseModel):
    answer: str
    critique: str = ""


class Debate:
    PERSONAS = ("rigorous", "skeptical", "pragmatic")

    def __init__(self, llm: Any, n_agents: int = 3, n_rounds: int = 2) -> None:
        self.n_agents, self.n_rounds = n_agents, n_rounds
        self._agent = llm.with_structured_output(AgentAnswer)

    def _round(self, state: DebateState) -> dict[str, Any]:
        round_num = state.get("round", 0) + 1
        prior = state.get("rounds", [])
        responses: list[dict[str, str]] = []
        for i in range(state.get("n_agents", self.n_agents)):
            answer = self._agent.invoke(
                f"{self.PERSONAS[i]}: {state['task']} (round {round_num}, prior {prior[-1:]})"
            )
            responses.append({"agent_id": str(i), **answer.model_dump()})
        return {"round": round_num, "rounds": [responses]}

    def _vote(self, state: DebateState) -> dict[str, Any]:
        rounds = state.get("rounds", [])
        if not rounds:
            return {"final_answer": "", "final_tally": {}}
        tally = Counter(r["answer"].strip().lower() for r in rounds[-1])
        return {"final_answer": tally.most_common(1)[0][0], "final_tally": dict(tally)}

    def _should_continue(self, state: DebateState) -> str:
        if state.get("round", 0) >= state.get("n_rounds", self.n_rounds):
            return "vote"
        return "round"

    def build(self) -> Any:
        g = StateGraph(DebateState)
        g.add_node("round", self._round)
        g.add_node("vote", self._vote)
        g.add_edge(START, "round")
        g.add_conditional_edges("round", self._should_continue, {"round": "round", "vote": "vote"})
        g.add_edge("vote", END)
        return g.compile()


def debate_graph(llm: Any = None) -> Any:
    return Debate(llm or scripted(reply(text="ok"))).build()


def prove_debate() -> Proof:
    answers = ["4", "5", "4", "4", "4", "4"]
    llm = scripted(*[reply(tool_call("AgentAnswer", answer=a)) for a in answers])
    out = debate_graph(llm).invoke({"task": "2 + 2", "n_rounds": 2})
    intact = len(out["rounds"]) == 2 and out["final_tally"] == {"4": 3}
    return Proof(
        frozenset() if intact else frozenset({"unreduced-parallel-write"}),
        f"two rounds of three answers kept; the vote {out['final_tally']}",
    )


CASES = [
    case(
        "plan-execute-verify: bound-method nodes, a retry loop on a verifier's critique",
        "FareedKhan-dev/all-agentic-architectures architectures/pev.py",
        set(),
        pev_graph,
        prove_pev,
    ),
    case(
        "debate: rounds appended with operator.add, a router on the round count",
        "FareedKhan-dev/all-agentic-architectures architectures/debate.py",
        set(),
        debate_graph,
        prove_debate,
    ),
]
