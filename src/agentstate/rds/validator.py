"""Check requirements against every AwsRdsInstance rule, naming field and rule.

It checks the numeric bounds, accepts ``db.t3.micro`` against ``^db\\.``
and evaluates the cross-field rules the spec data states. Every string (a
value, a list item, a label key) must be non-blank, free of control
characters and surrounding whitespace, and within the spec's length limit;
list items are checked one by one. ``check_value`` validates one field at
store time; ``validate_requirements`` checks a whole
set before a manifest is generated. Taught in notebook 02.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from agentstate.core.secrets import is_secret_ref
from agentstate.rds.spec import FieldSpec, RdsSpec, compile_pattern, load_spec

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Control (Cc), format (Cf: zero-width, bidi overrides), surrogate (Cs) and
# line/paragraph separators (Zl, Zp, which YAML also treats as line breaks).
FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


@dataclass(frozen=True)
class ValidationIssue:
    field: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} [{self.rule}]"


def _type_issue(spec: FieldSpec, value: Any) -> ValidationIssue | None:
    ok = {
        "string": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int32": isinstance(value, int)
        and not isinstance(value, bool)
        and INT32_MIN <= value <= INT32_MAX,
        "string_list": isinstance(value, list),
    }[spec.type]
    if ok:
        return None
    expected = {
        "string": "a string",
        "bool": "true or false",
        "int32": "a whole number (int32)",
        "string_list": "a list of strings",
    }[spec.type]
    return ValidationIssue(spec.name, "type", f"expected {expected}, got {type(value).__name__}")


def _text_problems(
    text: str,
    *,
    max_len: int | None,
    pattern: str | None,
    len_rule: str = "max_len",
    pattern_rule: str = "pattern",
) -> list[tuple[str, str]]:
    """(rule, message) for one string: blank, control characters, edges, length, pattern."""
    if not text.strip():
        return [("blank", "must not be empty or only whitespace")]
    problems = []
    bad = next(
        (i for i, c in enumerate(text) if unicodedata.category(c) in FORBIDDEN_CATEGORIES), None
    )
    if bad is not None:
        where = f"U+{ord(text[bad]):04X} at position {bad + 1}"
        problems.append(("control_chars", f"must not contain control characters ({where})"))
    elif text[0].isspace() or text[-1].isspace():
        problems.append(("whitespace", "must not start or end with whitespace"))
    if max_len is not None and len(text) > max_len:
        problems.append((len_rule, f"must be at most {max_len} characters, got {len(text)}"))
    if pattern is not None and not compile_pattern(pattern).search(text):
        problems.append((pattern_rule, f"must match {pattern}"))
    return problems


def _string_issues(name: str, f: FieldSpec, value: str) -> list[ValidationIssue]:
    if f.secret and not is_secret_ref(value):
        # Say nothing else about a plain secret: no message may describe it.
        return [
            ValidationIssue(name, "secret_ref", "must be a secret reference like $secret:<name>")
        ]
    if f.min_len is not None and len(value) < f.min_len:
        return [ValidationIssue(name, "min_len", f"must have at least {f.min_len} item(s)")]
    problems = _text_problems(value, max_len=f.max_len, pattern=f.pattern)
    return [ValidationIssue(name, rule, message) for rule, message in problems]


def _list_issues(name: str, f: FieldSpec, value: list[Any]) -> list[ValidationIssue]:
    problems: list[tuple[str, str]] = []
    if f.min_items is not None and len(value) < f.min_items:
        problems.append(
            ("min_items", f"must have at least {f.min_items} item(s), got {len(value)}")
        )
    if f.max_items is not None and len(value) > f.max_items:
        problems.append(("max_items", f"must have at most {f.max_items} items, got {len(value)}"))
    first_seen: dict[str, int] = {}
    for n, item in enumerate(value, start=1):
        if not isinstance(item, str):
            problems.append(("type", f"item {n}: expected a string, got {type(item).__name__}"))
            continue
        item_problems = _text_problems(
            item,
            max_len=f.item_max_len,
            pattern=f.item_pattern,
            len_rule="item_max_len",
            pattern_rule="item_pattern",
        )
        problems += [(rule, f"item {n}: {message}") for rule, message in item_problems]
        if item in first_seen:
            problems.append(("unique", f"item {n} repeats item {first_seen[item]}"))
        first_seen.setdefault(item, n)
    return [ValidationIssue(name, rule, message) for rule, message in problems]


def _map_entry_issues(name: str, f: FieldSpec, key: str, value: Any) -> list[ValidationIssue]:
    key_problems = _text_problems(
        key,
        max_len=f.key_max_len,
        pattern=f.key_pattern,
        len_rule="key_max_len",
        pattern_rule="key_pattern",
    )
    issues = [ValidationIssue(name, rule, f"key {message}") for rule, message in key_problems]
    if not isinstance(value, str):
        return [
            *issues,
            ValidationIssue(name, "type", f"expected a string, got {type(value).__name__}"),
        ]
    value_problems = _text_problems(value, max_len=f.max_len, pattern=None)
    return issues + [ValidationIssue(name, rule, message) for rule, message in value_problems]


def _number_issues(name: str, f: FieldSpec, value: int) -> list[ValidationIssue]:
    issues = []
    if f.gt is not None and not value > f.gt:
        issues.append(ValidationIssue(name, "gt", f"must be greater than {f.gt}"))
    if f.gte is not None and not value >= f.gte:
        issues.append(ValidationIssue(name, "gte", f"must be at least {f.gte}"))
    if f.lte is not None and not value <= f.lte:
        issues.append(ValidationIssue(name, "lte", f"must be at most {f.lte}"))
    return issues


def check_value(name: str, value: Any, spec: RdsSpec | None = None) -> list[ValidationIssue]:
    """Issues with storing ``value`` in field ``name`` (unknown field, type, per-field rules)."""
    spec = spec or load_spec()
    resolved = spec.resolve(name)
    if resolved is None:
        return [ValidationIssue(name, "known_field", "unknown field; see list_required_fields")]
    f, map_key = resolved
    if f.type == "string_map":
        return _map_entry_issues(name, f, map_key or "", value)
    type_issue = _type_issue(f, value)
    if type_issue:
        return [type_issue]
    if f.type == "string":
        return _string_issues(name, f, value)
    if f.type == "string_list":
        return _list_issues(name, f, value)
    if f.type == "int32":
        return _number_issues(name, f, value)
    return []


def validate_requirements(
    requirements: dict[str, Any], spec: RdsSpec | None = None
) -> list[ValidationIssue]:
    """Every issue of a requirement set: missing fields, field rules, the spec's message rules."""
    spec = spec or load_spec()
    issues = [
        ValidationIssue(name, "required", "missing required field")
        for name in spec.required_fields
        if name not in requirements
    ]
    for name, value in requirements.items():
        issues.extend(check_value(name, value, spec))
    issues += [
        ValidationIssue(rule.fields[0], rule.id, rule.message)
        for rule in spec.message_rules
        if not rule.check.holds(requirements)
    ]
    return issues
