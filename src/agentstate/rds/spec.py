"""The AwsRdsInstance field catalogue, loaded from ``data/aws_rds_instance_spec.yaml``.

One description of the spec feeds the validator, the renderer and the
field-info tool, so they cannot disagree. The file is checked as it loads: an
unknown key, a string without a length limit, a malformed pattern or a
cross-field rule in a form the validator cannot evaluate is refused here,
naming the field or rule, rather than silently ignored mid-lesson. Taught from
notebook 01 on (the rules in notebook 02).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import yaml

from agentstate.lessons.datafiles import data_path

SPEC_FILE = "aws_rds_instance_spec.yaml"
FIELD_TYPES = {"string", "int32", "bool", "string_list", "string_map"}
COMMON_KEYS = {"type", "key", "description", "required", "example"}
TYPE_KEYS: dict[str, set[str]] = {
    "string": {"min_len", "max_len", "pattern", "secret"},
    "int32": {"gt", "gte", "lte"},
    "bool": set(),
    "string_list": {"min_items", "max_items", "item_max_len", "item_pattern"},
    "string_map": {"key_pattern", "key_max_len", "max_len"},
}
# No string may be unbounded: these limits must be present for each type.
REQUIRED_LIMITS: dict[str, tuple[str, ...]] = {
    "string": ("max_len",),
    "string_list": ("max_items", "item_max_len"),
    "string_map": ("key_max_len", "max_len"),
}
PATTERN_KEYS = ("pattern", "item_pattern", "key_pattern")
COUNT_KEYS = ("min_len", "max_len", "min_items", "max_items", "item_max_len", "key_max_len")


@lru_cache(maxsize=64)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a spec pattern so that ``search`` behaves like protovalidate's RE2.

    In RE2 ``$`` is the very end of the text; Python's ``$`` also matches
    before a trailing newline, which let ``orders-db\\n`` through. A final
    ``$`` becomes ``\\Z``; a ``$`` anywhere else is refused.
    """
    if not isinstance(pattern, str):
        raise ValueError(f"a pattern must be a string, got {pattern!r}")
    body = pattern[:-1] if pattern.endswith("$") else pattern
    if "$" in body:
        raise ValueError(
            f"pattern {pattern!r} may use '$' only at the end (it means the end of the value)"
        )
    try:
        return re.compile(body + (r"\Z" if body != pattern else ""))
    except re.error as err:
        raise ValueError(f"invalid pattern {pattern!r}: {err}") from None


@dataclass(frozen=True)
class FieldSpec:
    """One field: its type, rules and the camelCase key it has in the manifest."""

    name: str
    type: str
    key: str
    section: str  # "metadata" or "spec"
    description: str = ""
    required: bool = False
    secret: bool = False
    min_len: int | None = None
    max_len: int | None = None  # string: characters; string_map: characters of each value
    pattern: str | None = None
    gt: int | None = None
    gte: int | None = None
    lte: int | None = None
    min_items: int | None = None  # string_list only, like the four below
    max_items: int | None = None
    item_max_len: int | None = None
    item_pattern: str | None = None
    key_pattern: str | None = None  # string_map only: entries are stored as "<name>.<key>"
    key_max_len: int | None = None
    example: Any = None

    def rules(self) -> list[str]:
        """Human-readable rules, in the words the validator's errors use."""
        out = [f"type {self.type}"]
        if self.required:
            out.append("required")
        optional = [
            (self.min_len, f"min_len {self.min_len}"),
            (self.max_len, f"max_len {self.max_len}"),
            (self.pattern, f"pattern {self.pattern}"),
            (self.gt, f"> {self.gt}"),
            (self.gte, f">= {self.gte}"),
            (self.lte, f"<= {self.lte}"),
            (self.min_items, f"min_items {self.min_items}"),
            (self.max_items, f"max_items {self.max_items}"),
            (self.item_max_len, f"item max_len {self.item_max_len}"),
            (self.item_pattern, f"item pattern {self.item_pattern}"),
            (self.key_pattern, f"key pattern {self.key_pattern}"),
            (self.key_max_len, f"key max_len {self.key_max_len}"),
        ]
        out += [text for value, text in optional if value is not None]
        if self.type == "string_list":
            out.append("items unique")
        if self.secret:
            out.append("secret reference only")
        return out


# --- Cross-field rules: a small expression form, evaluated from the data ---


class Check(Protocol):
    """A condition over a whole requirement set."""

    def holds(self, requirements: Mapping[str, Any]) -> bool:
        """True when ``requirements`` satisfy the condition."""
        ...


@dataclass(frozen=True)
class Present:
    """The field is stored and not empty (``has()`` in the proto's CEL)."""

    field: str
    is_map: bool = False

    def holds(self, requirements: Mapping[str, Any]) -> bool:
        """True when ``requirements`` satisfy this condition."""
        if self.is_map:
            return any(k.startswith(f"{self.field}.") for k in requirements)
        value = requirements.get(self.field)
        return value is not None and value != "" and value != []


@dataclass(frozen=True)
class Equals:
    field: str
    value: Any

    def holds(self, requirements: Mapping[str, Any]) -> bool:
        """True when ``requirements`` satisfy this condition."""
        stored = requirements.get(self.field)
        return type(stored) is type(self.value) and stored == self.value


@dataclass(frozen=True)
class MinItems:
    field: str
    n: int

    def holds(self, requirements: Mapping[str, Any]) -> bool:
        """True when ``requirements`` satisfy this condition."""
        value = requirements.get(self.field)
        return isinstance(value, list) and len(value) >= self.n


@dataclass(frozen=True)
class AllOf:
    checks: tuple[Check, ...]

    def holds(self, requirements: Mapping[str, Any]) -> bool:
        """True when ``requirements`` satisfy this condition."""
        return all(c.holds(requirements) for c in self.checks)


@dataclass(frozen=True)
class AnyOf:
    checks: tuple[Check, ...]

    def holds(self, requirements: Mapping[str, Any]) -> bool:
        """True when ``requirements`` satisfy this condition."""
        return any(c.holds(requirements) for c in self.checks)


@dataclass(frozen=True)
class Not:
    check: Check

    def holds(self, requirements: Mapping[str, Any]) -> bool:
        """True when ``requirements`` satisfy this condition."""
        return not self.check.holds(requirements)


def _known(name: Any, fields: Mapping[str, FieldSpec], where: str) -> FieldSpec:
    if not isinstance(name, str) or name not in fields:
        raise ValueError(f"{where}: unknown field {name!r}")
    return fields[name]


def _args(arg: Any, keys: set[str], form: str, where: str) -> dict[str, Any]:
    if not isinstance(arg, dict) or set(arg) != keys:
        raise ValueError(f"{where}: {form} takes {{{', '.join(sorted(keys))}}}, got {arg!r}")
    return arg


def _present(arg: Any, fields: Mapping[str, FieldSpec], where: str) -> Check:
    f = _known(arg, fields, where)
    return Present(f.name, is_map=f.type == "string_map")


def _equals(arg: Any, fields: Mapping[str, FieldSpec], where: str) -> Check:
    arg = _args(arg, {"field", "value"}, "equals", where)
    return Equals(_known(arg["field"], fields, where).name, arg["value"])


def _min_items(arg: Any, fields: Mapping[str, FieldSpec], where: str) -> Check:
    arg = _args(arg, {"field", "n"}, "min_items", where)
    f = _known(arg["field"], fields, where)
    if f.type != "string_list":
        raise ValueError(f"{where}: min_items: {f.name!r} is not a string_list")
    n = arg["n"]
    if not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
        raise ValueError(f"{where}: min_items: n must be a whole number >= 0, got {n!r}")
    return MinItems(f.name, n)


def _group(kind: Callable[[tuple[Check, ...]], Check], form: str):
    def parse(arg: Any, fields: Mapping[str, FieldSpec], where: str) -> Check:
        if not isinstance(arg, list) or not arg:
            raise ValueError(f"{where}: {form} needs a non-empty list of checks, got {arg!r}")
        return kind(tuple(parse_check(c, fields, where) for c in arg))

    return parse


def _not(arg: Any, fields: Mapping[str, FieldSpec], where: str) -> Check:
    return Not(parse_check(arg, fields, where))


RULE_FORMS: dict[str, Callable[[Any, Mapping[str, FieldSpec], str], Check]] = {
    "all_of": _group(AllOf, "all_of"),
    "any_of": _group(AnyOf, "any_of"),
    "equals": _equals,
    "min_items": _min_items,
    "not": _not,
    "present": _present,
}


def parse_check(raw: Any, fields: Mapping[str, FieldSpec], where: str) -> Check:
    """Turn ``{form: argument}`` into a :class:`Check`; anything else is refused."""
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ValueError(f"{where}: a check needs exactly one rule form, got {raw!r}")
    ((form, arg),) = raw.items()
    if form not in RULE_FORMS:
        known = ", ".join(sorted(RULE_FORMS))
        raise ValueError(f"{where}: unknown rule form {form!r}; known forms: {known}")
    return RULE_FORMS[form](arg, fields, where)


@dataclass(frozen=True)
class MessageRule:
    """A cross-field rule such as ``subnet_ids.size() >= 2 || has(db_subnet_group_name)``.

    ``expression`` is the proto's CEL, for reading; ``check`` is what is
    evaluated. An issue is reported on the first of ``fields``.
    """

    id: str
    expression: str
    message: str
    fields: tuple[str, ...]
    check: Check


def _rule(raw: Any, fields: Mapping[str, FieldSpec]) -> MessageRule:
    rule_id = raw.get("id") if isinstance(raw, dict) else None
    where = f"message rule {rule_id!r}"
    if not isinstance(rule_id, str) or not rule_id:
        raise ValueError(f"message rule {raw!r}: needs an id")
    missing = {"message", "fields", "check"} - set(raw)
    if missing:
        raise ValueError(f"{where}: needs {', '.join(sorted(missing))}")
    unknown = set(raw) - {"id", "expression", "message", "fields", "check"}
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    names = raw["fields"]
    if not isinstance(names, list) or not names:
        raise ValueError(f"{where}: fields must be a non-empty list")
    return MessageRule(
        id=rule_id,
        expression=str(raw.get("expression", "")),
        message=str(raw["message"]),
        fields=tuple(_known(n, fields, where).name for n in names),
        check=parse_check(raw["check"], fields, where),
    )


@dataclass(frozen=True)
class RdsSpec:
    api_version: str
    kind: str
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    message_rules: tuple[MessageRule, ...] = ()

    @property
    def required_fields(self) -> list[str]:
        return [name for name, f in self.fields.items() if f.required]

    def resolve(self, name: str) -> tuple[FieldSpec, str | None] | None:
        """The spec of a stored name and its map key: ``labels.team`` -> (labels, "team")."""
        if name in self.fields and self.fields[name].type != "string_map":
            return self.fields[name], None
        head, dot, key = name.partition(".")
        if dot and head in self.fields and self.fields[head].type == "string_map":
            return self.fields[head], key
        return None


def _field(name: str, raw: Any, section: str) -> FieldSpec:
    where = f"spec field {name!r}"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a mapping of rules, got {raw!r}")
    kind = raw.get("type")
    if kind not in FIELD_TYPES:
        raise ValueError(f"{where}: type must be one of {sorted(FIELD_TYPES)}")
    all_type_keys = set().union(*TYPE_KEYS.values())
    for key in sorted(set(raw) - COMMON_KEYS - TYPE_KEYS[kind]):
        if key in all_type_keys:
            raise ValueError(f"{where}: {key} does not apply to a {kind} field")
        raise ValueError(f"{where}: unknown key {key!r}")
    if not isinstance(raw.get("key"), str):
        raise ValueError(f"{where}: needs key (its camelCase name in the manifest)")
    for key in ("required", "secret"):
        if not isinstance(raw.get(key, False), bool):
            raise ValueError(f"{where}: {key} must be true or false, got {raw[key]!r}")
    for key in REQUIRED_LIMITS.get(kind, ()):
        if key not in raw:
            raise ValueError(f"{where} needs {key} (no string may be unbounded)")
    for key in COUNT_KEYS:
        value = raw.get(key)
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool)):
            raise ValueError(f"{where}: {key} must be a whole number, got {value!r}")
        if value is not None and value < (1 if key.endswith("max_len") else 0):
            raise ValueError(f"{where}: {key} is too small: {value}")
    for low, high in (("min_len", "max_len"), ("min_items", "max_items")):
        if raw.get(low) is not None and raw.get(high) is not None and raw[low] > raw[high]:
            raise ValueError(f"{where}: {low} {raw[low]} is above {high} {raw[high]}")
    for key in PATTERN_KEYS:
        if key in raw:
            try:
                compile_pattern(raw[key])
            except ValueError as err:
                raise ValueError(f"{where}: {key}: {err}") from None
    return FieldSpec(name=name, section=section, **raw)


def parse_spec(raw: Any) -> RdsSpec:
    """Build an :class:`RdsSpec` from the parsed YAML, refusing anything it cannot check."""
    if not isinstance(raw, dict):
        raise ValueError("the spec must be a mapping")
    missing = {"api_version", "kind", "metadata_fields", "fields"} - set(raw)
    if missing:
        raise ValueError(f"the spec needs {', '.join(sorted(missing))}")
    fields = {n: _field(n, f, "metadata") for n, f in raw["metadata_fields"].items()}
    for n, f in raw["fields"].items():
        if n in fields:
            raise ValueError(f"spec field {n!r} is defined twice")
        fields[n] = _field(n, f, "spec")
    rules = tuple(_rule(r, fields) for r in raw.get("message_rules") or [])
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        raise ValueError(f"message rule ids must be unique, got {ids}")
    return RdsSpec(
        api_version=raw["api_version"], kind=raw["kind"], fields=fields, message_rules=rules
    )


def _read(path: Path) -> RdsSpec:
    try:
        return parse_spec(yaml.safe_load(path.read_text(encoding="utf-8")))
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


@lru_cache(maxsize=1)
def _shipped_spec() -> RdsSpec:
    return _read(data_path(SPEC_FILE))


def load_spec(path: str | os.PathLike[str] | None = None) -> RdsSpec:
    """The shipped spec (parsed once), or the spec file at ``path``; bad files fail here."""
    return _shipped_spec() if path is None else _read(Path(path))
