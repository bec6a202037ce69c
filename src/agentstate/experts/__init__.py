"""Lesson 05: prefix-cached experts over a large operations manual.

A router picks 1-3 experts; each expert call sends the manual as a
token-identical first system message, so a prefix-caching engine prefills it
once; a synthesis combines the answers. Threads persist through LangGraph
checkpointers and never store the manual. Taught in notebook 05.
"""

from agentstate._extras import needs

with needs("experts", "agentstate.experts"):
    from agentstate.experts.benchmark import evict
    from agentstate.experts.charts import (
        plot_prompt_layouts,
        plot_ttft,
        question_seconds,
        ttft_points,
    )
    from agentstate.experts.checkpoints import (
        file_contains,
        memory_checkpointer,
        sqlite_checkpointer,
    )
    from agentstate.experts.graph import ExpertsConfig, build_experts_graph, user_turn
    from agentstate.experts.llm import chat_model, engine_model
    from agentstate.experts.manual import Manual, load_manual
    from agentstate.experts.personas import EXPERTS
    from agentstate.experts.prompts import (
        Prefix,
        build_messages,
        common_prefix_length,
        system_prefix,
    )
    from agentstate.experts.results import (
        case_rows,
        load_results,
        provenance_checks,
        summary_rows,
        sweep_rows,
    )
    from agentstate.experts.router import (
        RouterReplyError,
        parse_router_reply,
        route_by_llm,
        route_by_rules,
    )
    from agentstate.experts.state import ExpertsState, merge_or_reset

__all__ = [
    "EXPERTS",
    "ExpertsConfig",
    "ExpertsState",
    "Manual",
    "Prefix",
    "RouterReplyError",
    "build_experts_graph",
    "build_messages",
    "case_rows",
    "chat_model",
    "common_prefix_length",
    "engine_model",
    "evict",
    "file_contains",
    "load_manual",
    "load_results",
    "memory_checkpointer",
    "merge_or_reset",
    "parse_router_reply",
    "plot_prompt_layouts",
    "plot_ttft",
    "provenance_checks",
    "question_seconds",
    "route_by_llm",
    "route_by_rules",
    "sqlite_checkpointer",
    "summary_rows",
    "sweep_rows",
    "system_prefix",
    "ttft_points",
    "user_turn",
]
