"""The generic core: the fixes of notebooks 02-04, for any LangGraph agent.

Nothing here knows the RDS domain; the RDS agents are thin users of it.

- :func:`merge_fields`: parallel writes to one dict key no longer raise
  ``InvalidUpdateError`` or lose fields (notebook 02).
- :class:`SecretRedactionMiddleware` and :class:`SecretStore`: plain secrets in
  tool calls never reach state or a checkpoint; each value gets its own
  reference, resolvable only by its store (notebook 02).
- :class:`TurnCacheMiddleware`: a reader in the writers' batch sees their
  writes (notebook 03); :func:`batch_of`, :func:`reader_view` and
  :func:`written_value`, the bookkeeping it shares with the notebook's teaching cache,
  and :class:`TurnCacheBase`, that cache's settings, batches and condition.
- :class:`SharedStateMiddleware`, :func:`share_state`, :func:`undeclared_keys`:
  a subagent's writes are no longer dropped at the ``task`` boundary (notebook 04).
- :func:`append_unique`: lists are not doubled when a subagent returns (notebook 04).
- :func:`merge_or_reset`: per-run dicts written by fan-out nodes, emptied for
  the next turn (notebook 05).

Every middleware implements the sync and the async hooks.
"""

from agentstate.core.redaction import SecretRedactionMiddleware
from agentstate.core.redaction_index import SecretLimitError
from agentstate.core.reducers import append_unique, merge_fields, merge_or_reset
from agentstate.core.secrets import (
    REDACTED,
    SecretStore,
    is_secret_ref,
    redact,
    ref_label,
    secret_ref,
)
from agentstate.core.subagents import SharedStateMiddleware, share_state, undeclared_keys
from agentstate.core.turn_cache import TurnCacheMiddleware, Written, reader_view, written_value
from agentstate.core.turn_cache_base import TurnCacheBase
from agentstate.core.turn_cache_batch import Batch
from agentstate.core.turn_cache_calls import CallBatch, batch_of

__all__ = [
    "REDACTED",
    "Batch",
    "CallBatch",
    "SecretLimitError",
    "SecretRedactionMiddleware",
    "SecretStore",
    "SharedStateMiddleware",
    "TurnCacheBase",
    "TurnCacheMiddleware",
    "Written",
    "append_unique",
    "batch_of",
    "is_secret_ref",
    "merge_fields",
    "merge_or_reset",
    "reader_view",
    "redact",
    "ref_label",
    "secret_ref",
    "share_state",
    "undeclared_keys",
    "written_value",
]
