"""agentstate: how state really behaves in LangGraph agents.

The package is the single source of truth for the notebook series in
``notebooks/``: every notebook imports its broken baseline and its fix from
here, and readers import the same pieces into their own agents.

Where each lesson's code lives:

- 01 file-based storage: ``agentstate.rds`` (``FileStorage``,
  ``build_file_storage_agent``).
- 02 the state reducer: ``agentstate.core`` (``merge_fields``,
  ``SecretRedactionMiddleware``) used by ``agentstate.rds``
  (``build_reducer_agent``, ``RequirementsSyncMiddleware``).
- 03 same-turn visibility: ``agentstate.core.TurnCacheMiddleware``;
  ``agentstate.rds.build_turn_cache_agent`` and the broken baselines in
  ``agentstate.rds.baselines``.
- 04 subagents: ``agentstate.core`` (``SharedStateMiddleware``,
  ``undeclared_keys``, ``append_unique``); ``agentstate.rds``
  (``build_shared_schema_agent`` and the broken builders).
- 05 prefix-cached experts: ``agentstate.experts`` on the local engine of
  ``agentstate.engine``.
- 06 tool-only memory capture: ``agentstate.memory``.

Checks: ``agentstate.doctor`` (``diagnose``, ``Watch`` and the ``agentstate
doctor`` command) finds each lesson's hazard in your own agent.

Which releases each hazard lives in: ``agentstate.hazards`` (``agentstate
hazards``).

The library, apart from the tutorial: ``core``, ``doctor``, ``hazards``,
``models`` (the scripted model and the real-model factory), ``tracing`` (a
run's evidence and its pictures, ``draw_superstep`` and ``draw_run``),
``persistence`` (checkpointers on private files, encrypted at rest with
``encrypt=True``), ``private_files`` (files opened only when they are the
package's own) and ``servers`` (local server processes). The tutorial's stage
is ``lessons`` (scenarios and scripted replies, tables, tool latency, the
served graphs): the notebooks and their tests import it, the library never
does (tests/test_layout.py, docs/layout.md).
The core (``core``, ``doctor``, ``hazards``, the scripted model) needs only
LangGraph and LangChain; every other part names the extra it needs when it is
missing (``_extras``, docs/package.md).
"""

__version__ = "0.1.0"
