"""The tutorial's stage, apart from the library: what the lessons and their tests share.

Readers' own agents import ``agentstate.core``, ``agentstate.doctor``,
``agentstate.models``, ``agentstate.tracing``, ``agentstate.persistence`` and
the systems (``rds``, ``experts``, ``engine``, ``memory``); the lessons (notebooks
01-06) import these too: ``fixtures`` (the scenarios and scripted models),
``display`` (tables, progress, the doctor's reports side by side), ``purity``
(what a reader in its writers' super-step sees under a reducer, and how often
LangGraph calls one), ``reducer_knob`` (lesson 02's knob), ``subagents``
(lesson 04's parent script, reader tool and readouts of a turn),
``simulation`` (tool latency), ``toy`` (lesson 01's toy graph), ``filestate``
(lesson 01's file reads and writes), ``datafiles`` (the shipped data files),
``served`` (the graphs ``langgraph.json`` serves) and ``serve`` (``langgraph
dev`` with private threads, for ``make serve``). Nothing in ``agentstate.core``
or ``agentstate.doctor`` imports from here (tests/test_import_cycles.py).
"""

__all__: list[str] = []
