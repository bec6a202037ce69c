"""The validator, rule by rule, and the spec it reads from data/."""

import pytest

from agentstate.rds import check_value, load_spec, validate_requirements

from .helpers_rds import VALID


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
    assert [i.rule for i in check_value("subnet_ids", ["subnet-a", " "])] == ["min_len"]


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
