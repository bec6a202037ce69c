"""Test helper for notebook 02's secret references: equal to any reference with one label.

A :class:`~agentstate.core.SecretStore` makes a new reference per value
(``$secret:rds-master-password-<random id>``), so a test that compares whole
dicts compares the label; the string itself is the label's prefix, so
searching stored bytes for it still finds every reference.
"""

from __future__ import annotations

import re
from typing import Any


class AnyRef(str):
    """``"$secret:<label>"`` that equals every reference a store made under ``label``."""

    label: str

    def __new__(cls, label: str) -> AnyRef:
        obj = super().__new__(cls, f"$secret:{label}")
        obj.label = label
        return obj

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, str):
            return NotImplemented
        # not agentstate.core.ref_label: the same tests run against the code before the fix
        return re.fullmatch(rf"\$secret:{re.escape(self.label)}-[0-9a-f]{{24}}", other) is not None

    def __ne__(self, other: Any) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = str.__hash__


RDS_PASSWORD = AnyRef("rds-master-password")
