"""The experts graph: start -> router -> 1-3 experts -> synthesis, in three execution modes.

- ``sequential`` (default): one expert at a time; the first call fills the
  engine's prefix cache and the next ones reuse it.
- ``parallel``: a ``Send`` fan-out in one super-step; writes merge through
  reducers, so no two experts can clobber each other.
- ``primed``: one 1-token call with the bare prefix warms the cache, then the
  fan-out.

``stub`` mode answers offline and deterministically; ``llm`` mode streams from
an OpenAI-compatible endpoint and records TTFT and latency per call. The
manual lives in the compiled graph's closure (the :class:`ExpertsConfig`),
never in state, so no checkpoint ever holds it. Taught in notebook 05.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send

from agentstate.experts.calls import _chunk_text, stub_answer, timed_stream
from agentstate.experts.manual import Manual, load_manual
from agentstate.experts.personas import EXPERTS
from agentstate.experts.prompts import (
    POLICIES,
    Prefix,
    PrefixPolicy,
    build_messages,
    prime_messages,
    synthesis_messages,
    system_prefix,
    utc_clock,
)
from agentstate.experts.router import route_by_llm, route_by_rules
from agentstate.experts.state import (
    PER_RUN_KEYS,
    ExpertCall,
    ExpertsState,
    ExpertsThread,
    ExpertTask,
)

Mode = Literal["stub", "llm"]
RouterMode = Literal["rules", "llm"]
Execution = Literal["sequential", "parallel", "primed"]
Synthesis = Literal["auto", "combine", "llm"]


def _check(value: str, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; choose one of {', '.join(allowed)}")


@dataclass(frozen=True)
class ExpertsConfig:
    """Everything the graph closes over; validated on creation."""

    manual: Manual = field(default_factory=load_manual)
    mode: Mode = "stub"
    router: RouterMode = "rules"
    execution: Execution = "sequential"
    prefix_policy: PrefixPolicy = "invariant"
    synthesis: Synthesis = "auto"
    expert_model: BaseChatModel | None = None
    router_model: BaseChatModel | None = None
    history_messages: int = 6
    clock: Callable[[], str] = utc_clock

    def __post_init__(self) -> None:
        _check(self.mode, get_args(Mode), "mode")
        _check(self.router, get_args(RouterMode), "router")
        _check(self.execution, get_args(Execution), "execution")
        _check(self.prefix_policy, POLICIES, "prefix policy")
        _check(self.synthesis, get_args(Synthesis), "synthesis")
        if self.mode == "llm" and self.expert_model is None:
            raise ValueError("mode='llm' needs expert_model (an OpenAI-compatible chat model)")
        if self.router == "llm" and self.router_model is None:
            raise ValueError("router='llm' needs router_model")
        if self.synthesis == "llm" and self.expert_model is None:
            raise ValueError("synthesis='llm' needs expert_model")
        if self.history_messages < 0:
            raise ValueError("history_messages must be >= 0")

    @property
    def synthesis_by_llm(self) -> bool:
        return self.synthesis == "llm" or (self.synthesis == "auto" and self.mode == "llm")


def _accepted(state: ExpertsThread) -> int:
    """How many of the thread's messages passed ``start`` (a thread saved before it counted:
    every message up to its last answer)."""
    if "accepted" in state:
        return state["accepted"]
    messages = state.get("messages", [])
    answers = [i for i, m in enumerate(messages) if m.type == "ai"]
    return answers[-1] + 1 if answers else 0


def _query_and_history(messages: Sequence[BaseMessage], keep: int) -> tuple[str, list[BaseMessage]]:
    for message in messages:
        if message.type not in ("human", "ai"):
            raise ValueError(
                f"experts threads hold only user and assistant messages, got a {message.type!r} "
                "message; the manual and personas are added by the experts themselves"
            )
    if not messages or messages[-1].type != "human":
        raise ValueError("the last message must be the user's query")
    query = _chunk_text(messages[-1].content).strip()
    if not query:
        raise ValueError("the user's query is empty")
    history = messages[:-1][-keep:] if keep else []
    return query, [type(m)(content=_chunk_text(m.content)) for m in history]


def build_experts_graph(config: ExpertsConfig | None = None, *, checkpointer: Any = None):
    """Compile the graph for ``config`` (default: stub, rules, sequential, full manual)."""
    cfg = config or ExpertsConfig()

    def model(chosen: BaseChatModel | None, role: str) -> BaseChatModel:
        if chosen is None:  # ExpertsConfig refuses a config that would get here
            raise ValueError(f"this configuration calls no {role} model")
        return chosen

    def prefix() -> Prefix:
        return system_prefix(cfg.manual, cfg.prefix_policy, cfg.clock)

    def start(state: ExpertsThread) -> Command[Any]:
        messages = state.get("messages", [])
        try:
            _query_and_history(messages, cfg.history_messages)
        except ValueError as exc:  # refused: take this run's messages out again, then say why
            given = messages[_accepted(state) :]
            removed = [RemoveMessage(id=m.id) for m in given if m.id is not None]
            return Command(update={"messages": removed}, goto=Send("refuse", str(exc)))
        fixed = None if cfg.prefix_policy == "timestamp_first" else prefix().sha256
        return Command(update={"manual_sha256": cfg.manual.sha256, "prefix_sha256": fixed,
                               "response": "", "accepted": len(messages),
                               **dict.fromkeys(PER_RUN_KEYS)}, goto="router")  # fmt: skip

    def refuse(state: Any) -> dict[str, Any]:  # ``Send`` gives it the refusal's words
        raise ValueError(state)

    def router(state: ExpertsState) -> dict[str, Any]:
        query, _ = _query_and_history(state["messages"], 0)
        if cfg.router == "llm":
            route = route_by_llm(query, model(cfg.router_model, "router"))
        else:
            route = route_by_rules(query)
        tasks = [ExpertTask(expert=name, query=query) for name in route["experts"]]
        return {"route": route, "pending_tasks": tasks}

    def payload(task: ExpertTask, state: ExpertsState) -> Send:
        _, history = _query_and_history(state["messages"], cfg.history_messages)
        return Send("expert", ExpertCall(expert=task["expert"], query=task["query"],
                                         history=history))  # fmt: skip

    def next_one(state: ExpertsState) -> list[Send] | str:
        done = state.get("expert_outputs") or {}
        left = [t for t in state["pending_tasks"] if t["expert"] not in done]
        return [payload(left[0], state)] if left else "synthesize"

    def fan_out(state: ExpertsState) -> list[Send]:
        return [payload(t, state) for t in state["pending_tasks"]]

    def expert(state: ExpertCall) -> dict[str, Any]:
        name = state["expert"]
        sent = prefix()
        messages = build_messages(sent, name, state["query"], state["history"])
        update: dict[str, Any] = {"prefix_by_call": {name: sent.sha256}}
        if cfg.mode == "stub":
            return {
                **update,
                "expert_outputs": {name: stub_answer(name, state["query"], cfg.manual)},
            }
        reply = timed_stream(model(cfg.expert_model, "expert"), messages)
        timings = {"ttft_ms": {name: reply.ttft_ms}, "latency_ms": {name: reply.latency_ms}}
        return {**update, "expert_outputs": {name: reply.text}, **timings}

    def prime(state: ExpertsState) -> dict[str, Any]:
        sent = prefix()
        update: dict[str, Any] = {"prefix_by_call": {"prime": sent.sha256}}
        if cfg.mode == "stub":
            return update
        primer = model(cfg.expert_model, "expert")
        reply = timed_stream(primer, prime_messages(sent), extra_body={"max_tokens": 1})
        return {**update, "ttft_ms": {"prime": reply.ttft_ms},
                "latency_ms": {"prime": reply.latency_ms}}  # fmt: skip

    def synthesize(state: ExpertsThread) -> dict[str, Any]:
        query, _ = _query_and_history(state["messages"], 0)
        outputs = state.get("expert_outputs") or {}
        notes = {t["expert"]: outputs[t["expert"]] for t in state["pending_tasks"]}
        update: dict[str, Any] = {}
        if cfg.synthesis_by_llm:
            sent = prefix()
            writer = model(cfg.expert_model, "synthesis")
            reply = timed_stream(writer, synthesis_messages(sent, query, notes))
            text = reply.text
            update = {"prefix_by_call": {"synthesis": sent.sha256},
                      "ttft_ms": {"synthesis": reply.ttft_ms},
                      "latency_ms": {"synthesis": reply.latency_ms}}  # fmt: skip
        else:
            text = "\n".join(f"[{EXPERTS[n].title}] {t}" for n, t in notes.items())
        answer = {"response": text, "messages": [AIMessage(content=text)]}
        return {**update, **answer, "accepted": len(state["messages"]) + 1}

    graph = StateGraph(ExpertsThread, input_schema=ExpertsState, output_schema=ExpertsState)
    graph.add_node("start", start, destinations=("router", "refuse"))
    graph.add_node("refuse", refuse)
    graph.add_node("router", router)
    graph.add_node("expert", expert)
    graph.add_node("synthesize", synthesize)
    graph.add_edge(START, "start")
    if cfg.execution == "sequential":
        graph.add_conditional_edges("router", next_one, ["expert", "synthesize"])
        graph.add_conditional_edges("expert", next_one, ["expert", "synthesize"])
    else:
        if cfg.execution == "primed":
            graph.add_node("prime", prime)
            graph.add_edge("router", "prime")
            graph.add_conditional_edges("prime", fan_out, ["expert"])
        else:
            graph.add_conditional_edges("router", fan_out, ["expert"])
        graph.add_edge("expert", "synthesize")
    graph.add_edge("synthesize", END)
    compiled = graph.compile(checkpointer=checkpointer)
    compiled.name = "prefix_cached_experts"
    return compiled


def user_turn(text: str) -> dict[str, list[HumanMessage]]:
    """The graph's input for one query."""
    return {"messages": [HumanMessage(text)]}
