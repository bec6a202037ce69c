"""A wheel built from the checkout carries data/, so `pip install` users get the spec file."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_contains_the_package_and_its_data(tmp_path):
    # the pinned hatchling of the dev set builds it: no isolated build env, so no package index
    build = ["pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)]
    subprocess.run(
        [sys.executable, "-m", *build, str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("agentstate-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "agentstate/rds/validator.py" in names
    assert "agentstate/data/aws_rds_instance_spec.yaml" in names
    # PEP 561: without the marker a user's type checker treats every agentstate import as Any
    assert "agentstate/py.typed" in names
