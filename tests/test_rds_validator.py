"""The validator, rule by rule, and the spec it reads from data/."""

import pytest
import yaml

from agentstate.lessons.datafiles import data_path
from agentstate.lessons.fixtures import VALID_REQUIREMENTS as VALID
from agentstate.rds import check_value, load_spec, validate_requirements
from agentstate.rds.spec import parse_check


def rules(requirements):
    return {(i.field, i.rule) for i in validate_requirements(requirements)}


def test_the_minimal_valid_spec_passes():
    assert validate_requirements(VALID) == []


@pytest.mark.parametrize("field", load_spec().required_fields)
def test_each_required_field_is_reported_missing(field):
    requirements = {k: v for k, v in VALID.items() if k != field}
    assert (field, "required") in rules(requirements)


def test_db_t3_micro_matches_the_instance_class_pattern():
    assert check_value("instance_class", "db.t3.micro") == []
    (issue,) = check_value("instance_class", "t3.micro")
    assert (issue.field, issue.rule) == ("instance_class", "pattern")
    assert "^db\\." in issue.message


@pytest.mark.parametrize("field", ["engine", "engine_version", "username"])
def test_min_len_on_strings(field):
    assert [i.rule for i in check_value(field, "")] == ["min_len"]


@pytest.mark.parametrize(
    ("value", "rule"), [(0, "gt"), (-5, "gt"), (2**31, "type"), ("20", "type"), (True, "type")]
)
def test_allocated_storage_is_a_positive_int32(value, rule):
    assert [i.rule for i in check_value("allocated_storage_gb", value)] == [rule]


@pytest.mark.parametrize(
    ("value", "rules_"), [(0, []), (65535, []), (65536, ["lte"]), (-1, ["gte"])]
)
def test_port_range(value, rules_):
    assert [i.rule for i in check_value("port", value)] == rules_


@pytest.mark.parametrize("field", ["storage_encrypted", "multi_az", "publicly_accessible"])
def test_booleans_reject_strings_and_ints(field):
    assert check_value(field, True) == []
    assert [i.rule for i in check_value(field, "true")] == ["type"]
    assert [i.rule for i in check_value(field, 1)] == ["type"]


def test_subnet_rule_two_subnets_or_a_group():
    no_subnets = {k: v for k, v in VALID.items() if k != "subnet_ids"}
    assert ("subnet_ids", "subnets_or_group") in rules(no_subnets)
    assert ("subnet_ids", "subnets_or_group") in rules({**no_subnets, "subnet_ids": ["subnet-a"]})
    assert rules({**no_subnets, "db_subnet_group_name": "prod-db-subnets"}) == set()


def test_lists_must_hold_strings():
    assert [i.rule for i in check_value("subnet_ids", "subnet-a")] == ["type"]
    assert [i.rule for i in check_value("security_group_ids", ["sg-1", 2])] == ["type"]
    assert [i.rule for i in check_value("subnet_ids", ["subnet-a", " "])] == ["blank"]


def test_password_must_be_a_secret_reference():
    assert check_value("password", "$secret:rds-master-password") == []
    (issue,) = check_value("password", "hunter2-plain")
    assert issue.rule == "secret_ref"
    assert "hunter2" not in str(issue)


def test_unknown_fields_and_label_keys():
    assert [i.rule for i in check_value("colour", "blue")] == ["known_field"]
    assert check_value("labels.team", "payments") == []
    assert [i.rule for i in check_value("labels.Bad Key", "x")] == ["key_pattern"]
    assert [i.rule for i in check_value("labels.team", 3)] == ["type"]
    assert [i.rule for i in check_value("labels", "x")] == ["known_field"]


def test_metadata_name_pattern():
    assert check_value("name", "orders-db") == []
    assert [i.rule for i in check_value("name", "Orders_DB")] == ["pattern"]


def test_every_issue_names_field_and_rule():
    issues = validate_requirements({"instance_class": "m5.large", "port": 70000})
    assert all(i.field and i.rule for i in issues)
    assert ("instance_class", "pattern") in {(i.field, i.rule) for i in issues}
    assert ("port", "lte") in {(i.field, i.rule) for i in issues}


# --- Bad input that used to slip through (issue 11, "Validation") ---


def rule_names(field, value):
    return [i.rule for i in check_value(field, value)]


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("name", "orders-db\n", "pattern"),
        ("labels.team\n", "payments", "key_pattern"),
    ],
)
def test_a_trailing_newline_does_not_satisfy_a_pattern(field, value, rule):
    assert rule in rule_names(field, value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("engine", "   "),
        ("org", "\t "),
        ("org", ""),
        ("kms_key_id", " "),
        ("labels.team", "  "),
    ],
)
def test_blank_strings_are_rejected(field, value):
    issues = check_value(field, value)
    assert [i.rule for i in issues] in (["blank"], ["min_len"])
    assert all(i.field == field for i in issues)


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("engine", "post\x00gres", "U+0000 at position 5"),
        ("username", "db\x1badmin", "U+001B at position 3"),
        ("engine_version", "15.5\r", "U+000D at position 5"),
        ("labels.team", "pay\x7fments", "U+007F at position 4"),
        ("labels.te\x00am", "payments", "U+0000 at position 3"),
        ("option_group_name", "default\u2028x", "U+2028 at position 8"),
    ],
)
def test_control_characters_are_rejected_and_located(field, value, where):
    issues = [i for i in check_value(field, value) if i.rule == "control_chars"]
    assert len(issues) == 1 and where in issues[0].message


@pytest.mark.parametrize("value", [" postgres", "postgres ", "postgres\u00a0"])
def test_surrounding_whitespace_is_rejected(value):
    assert "whitespace" in rule_names("engine", value)


def limit(field, key="max_len"):
    return getattr(load_spec().fields[field], key)


@pytest.mark.parametrize(
    "field",
    [
        "org",
        "env",
        "engine",
        "engine_version",
        "instance_class",
        "db_subnet_group_name",
        "kms_key_id",
        "username",
        "parameter_group_name",
        "option_group_name",
    ],
)
def test_every_string_field_has_a_maximum_length(field):
    n = limit(field)
    ok = "db." + "a" * (n - 3) if field == "instance_class" else "a" * n
    assert check_value(field, ok) == []
    (issue,) = check_value(field, ok + "a")
    assert issue.rule == "max_len" and f"must be at most {n} characters" in issue.message


def test_the_name_is_an_aws_identifier_of_at_most_63_characters():
    assert limit("name") == 63
    assert check_value("name", "a" * 63) == []
    assert "max_len" in rule_names("name", "a" * 64)


def test_label_keys_and_values_are_bounded():
    labels = load_spec().fields["labels"]
    assert check_value("labels." + "k" * labels.key_max_len, "v" * labels.max_len) == []
    assert rule_names("labels." + "k" * (labels.key_max_len + 1), "v") == ["key_max_len"]
    assert rule_names("labels.team", "v" * (labels.max_len + 1)) == ["max_len"]


def test_the_password_reference_is_bounded():
    assert check_value("password", "$secret:" + "a" * 128) == []
    assert rule_names("password", "$secret:" + "a" * 129) == ["secret_ref"]
    assert limit("password") == len("$secret:") + 128


@pytest.mark.parametrize("field", ["subnet_ids", "security_group_ids"])
def test_an_empty_list_is_rejected(field):
    (issue,) = check_value(field, [])
    assert (issue.field, issue.rule) == (field, "min_items")


@pytest.mark.parametrize(
    ("field", "key"), [("subnet_ids", "max_items"), ("security_group_ids", "max_items")]
)
def test_lists_have_a_maximum_number_of_items(field, key):
    n = limit(field, key)
    items = [f"id-{i}" for i in range(n + 1)]
    assert check_value(field, items[:n]) == []
    assert rule_names(field, items) == ["max_items"]


@pytest.mark.parametrize(
    ("value", "rule", "text"),
    [
        (["sg-1", 2], "type", "item 2: expected a string, got int"),
        (["sg-1", None], "type", "item 2: expected a string, got NoneType"),
        (["sg-1", "sg-1"], "unique", "item 2 repeats item 1"),
        (["sg-1", "sg 2"], "item_pattern", "item 2: must match"),
        (["sg-1\n"], "item_pattern", "item 1: must match"),
        (["sg-1", "\x00"], "control_chars", "item 2: must not contain control characters"),
        (["sg-1", "  "], "blank", "item 2: must not be empty or only whitespace"),
        (["sg-1", "s" * 256], "item_max_len", "item 2: must be at most 255 characters"),
    ],
)
def test_list_items_are_checked_one_by_one(value, rule, text):
    issues = [i for i in check_value("security_group_ids", value) if i.rule == rule]
    assert len(issues) == 1 and text in issues[0].message
    assert issues[0].field == "security_group_ids"


# --- Cross-field rules are evaluated from the data ---

KMS_RULE = {
    "id": "kms_needs_encryption",
    "fields": ["kms_key_id", "storage_encrypted"],
    "message": "a kms_key_id needs storage_encrypted: true",
    "check": {
        "any_of": [
            {"not": {"present": "kms_key_id"}},
            {"equals": {"field": "storage_encrypted", "value": True}},
        ]
    },
}


def spec_copy(tmp_path, edit):
    """Load a temporary copy of the shipped spec after ``edit(raw)`` changed it."""
    raw = yaml.safe_load(data_path("aws_rds_instance_spec.yaml").read_text(encoding="utf-8"))
    edit(raw)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return load_spec(path)


def test_a_rule_added_to_the_spec_data_is_enforced(tmp_path):
    spec = spec_copy(tmp_path, lambda raw: raw["message_rules"].append(KMS_RULE))
    kms = {**VALID, "kms_key_id": "arn:aws:kms:us-east-1:111122223333:key/k"}
    (issue,) = validate_requirements(kms, spec)
    assert (issue.field, issue.rule, issue.message) == (
        "kms_key_id",
        "kms_needs_encryption",
        KMS_RULE["message"],
    )
    assert validate_requirements({**kms, "storage_encrypted": True}, spec) == []
    assert validate_requirements(VALID, spec) == []


def test_the_subnet_rule_is_read_from_the_data(tmp_path):
    def three_subnets(raw):
        (rule,) = raw["message_rules"]
        rule["check"]["any_of"][0]["min_items"]["n"] = 3

    spec = spec_copy(tmp_path, three_subnets)
    assert ("subnet_ids", "subnets_or_group") in {
        (i.field, i.rule) for i in validate_requirements(VALID, spec)
    }
    three = {**VALID, "subnet_ids": ["subnet-a", "subnet-b", "subnet-c"]}
    assert validate_requirements(three, spec) == []


@pytest.mark.parametrize(
    ("check", "error"),
    [
        ({"at_least": {"field": "subnet_ids", "n": 2}}, "unknown rule form 'at_least'"),
        ({"present": "colour"}, "unknown field 'colour'"),
        ({"min_items": {"field": "engine", "n": 2}}, "'engine' is not a string_list"),
        ({"min_items": {"field": "subnet_ids", "n": -1}}, "n must be a whole number >= 0"),
        ({"any_of": []}, "any_of needs a non-empty list"),
        ({"present": "engine", "not": {"present": "port"}}, "exactly one rule form"),
        ("engine", "exactly one rule form"),
    ],
)
def test_a_malformed_rule_is_refused_at_load_naming_the_problem(tmp_path, check, error):
    bad = {**KMS_RULE, "check": check}
    with pytest.raises(ValueError, match="kms_needs_encryption") as err:
        spec_copy(tmp_path, lambda raw: raw["message_rules"].append(bad))
    assert error in str(err.value)


def test_a_rule_without_a_check_is_refused_at_load(tmp_path):
    bad = {k: v for k, v in KMS_RULE.items() if k != "check"}
    with pytest.raises(ValueError, match="kms_needs_encryption.*check"):
        spec_copy(tmp_path, lambda raw: raw["message_rules"].append(bad))


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (lambda raw: raw["fields"]["engine"].pop("max_len"), "'engine' needs max_len"),
        (lambda raw: raw["fields"]["subnet_ids"].pop("max_items"), "needs max_items"),
        (lambda raw: raw["fields"]["engine"].update(maxlen=3), "unknown key 'maxlen'"),
        (lambda raw: raw["fields"]["port"].update(max_len=3), "max_len does not apply"),
        (lambda raw: raw["fields"]["engine"].update(pattern="^a$|b"), "'$' only at the end"),
        (lambda raw: raw["fields"]["engine"].update(pattern="(["), "invalid pattern"),
        (lambda raw: raw["fields"]["engine"].update(pattern=5), "a pattern must be a string"),
        (lambda raw: raw["fields"]["engine"].update(required="yes"), "required must be true"),
    ],
)
def test_a_malformed_field_is_refused_at_load(tmp_path, edit, error):
    with pytest.raises(ValueError) as err:
        spec_copy(tmp_path, edit)
    assert error in str(err.value)


LABELLED = {"engine": "postgres", "labels.team": "payments", "subnet_ids": ["a", "b"]}


@pytest.mark.parametrize(
    ("check", "holds"),
    [
        ({"present": "engine"}, True),
        ({"present": "username"}, False),
        ({"present": "labels"}, True),
        ({"not": {"present": "labels"}}, False),
        ({"min_items": {"field": "subnet_ids", "n": 2}}, True),
        ({"min_items": {"field": "subnet_ids", "n": 3}}, False),
        ({"equals": {"field": "engine", "value": "postgres"}}, True),
        ({"equals": {"field": "engine", "value": "mysql"}}, False),
        ({"all_of": [{"present": "engine"}, {"present": "username"}]}, False),
        ({"any_of": [{"present": "engine"}, {"present": "username"}]}, True),
    ],
)
def test_each_rule_form_evaluates_what_it_says(check, holds):
    parsed = parse_check(check, load_spec().fields, "test rule")
    assert parsed.holds(LABELLED) is holds


def test_equals_does_not_confuse_true_with_one():
    parsed = parse_check({"equals": {"field": "port", "value": 1}}, load_spec().fields, "t")
    assert parsed.holds({"port": 1}) and not parsed.holds({"port": True})
