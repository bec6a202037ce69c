"""The AwsRdsInstance renderer: structure, camelCase keys, determinism, errors."""

import pytest
import yaml

from agentstate.lessons.fixtures import VALID_REQUIREMENTS as VALID
from agentstate.rds import ManifestError, render_manifest


def test_manifest_structure_and_camel_case_keys():
    doc = yaml.safe_load(render_manifest({**VALID, "multi_az": True, "port": 5432}))
    assert doc["apiVersion"] == "aws.project-planton.org/v1"
    assert doc["kind"] == "AwsRdsInstance"
    assert doc["metadata"] == {"name": "orders-db"}
    assert doc["spec"]["instanceClass"] == "db.t3.micro"
    assert doc["spec"]["allocatedStorageGb"] == 20
    assert doc["spec"]["subnetIds"] == VALID["subnet_ids"]
    assert doc["spec"]["multiAz"] is True
    assert "instance_class" not in doc["spec"]


def test_rendering_is_deterministic_whatever_the_insertion_order():
    shuffled = dict(reversed(list({**VALID, "labels.team": "a", "labels.app": "b"}.items())))
    first = render_manifest({**VALID, "labels.team": "a", "labels.app": "b"})
    assert first == render_manifest(shuffled)
    assert yaml.safe_load(first)["metadata"]["labels"] == {"app": "b", "team": "a"}
    assert first.index("apiVersion") < first.index("kind") < first.index("metadata")


def test_password_is_rendered_as_its_reference():
    text = render_manifest(VALID)
    assert "password: $secret:rds-master-password" in text


def test_invalid_requirements_are_refused_with_every_issue():
    with pytest.raises(ManifestError) as err:
        render_manifest({"engine": "postgres", "instance_class": "t3"})
    message = str(err.value)
    assert "instance_class" in message and "pattern" in message
    assert "username: missing required field" in message


@pytest.mark.parametrize(
    ("extra", "field", "rule"),
    [
        ({"name": "orders-db\n"}, "name", "pattern"),
        ({"labels.team": "pay\x00ments"}, "labels.team", "control_chars"),
        ({"security_group_ids": []}, "security_group_ids", "min_items"),
        ({"engine": "postgres "}, "engine", "whitespace"),
    ],
)
def test_values_that_used_to_slip_through_never_reach_the_manifest(extra, field, rule):
    with pytest.raises(ManifestError) as err:
        render_manifest({**VALID, **extra})
    assert f"{field}: " in str(err.value) and f"[{rule}]" in str(err.value)
