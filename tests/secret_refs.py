"""Test helper for notebook 02's secret references: equal to any reference with one label.

A :class:`~agentstate.core.SecretStore` makes a new reference per value
(``$secret:rds-master-password-<random id>``), so a test that compares whole
dicts compares the label; the string itself is the label's prefix, so
searching stored bytes for it still finds every reference.
"""

from __future__ import annotations

from typing import Any

from agentstate.core import ref_label


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
        try:
            return ref_label(other) == self.label
        except ValueError:
            return False

    def __ne__(self, other: Any) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = str.__hash__


RDS_PASSWORD = AnyRef("rds-master-password")
