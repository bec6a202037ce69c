"""Shared values for the RDS tests, from the lesson fixtures (one source for both)."""

from agentstate.fixtures import POSTGRES_FIELDS as FIVE
from agentstate.fixtures import VALID_REQUIREMENTS as VALID
from agentstate.fixtures import one_reply_model as one_batch_model
from agentstate.fixtures import store_calls
from agentstate.fixtures import user_turn as user

__all__ = ["FIVE", "VALID", "one_batch_model", "store_calls", "user"]
