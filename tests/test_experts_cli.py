"""Stage 05: `agentstate experts ...` as the README shows it, in-process."""

import json

import pytest

from agentstate.cli import main
from agentstate.experts import load_manual

QUERY = "The batch outage debited a customer twice: what must we report to the regulator?"


def run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_manual_stats_prints_bytes_and_hashes(capsys):
    code, out = run(capsys, "experts", "manual-stats", "--json")
    info = json.loads(out)
    manual = load_manual()
    assert code == 0 and info["bytes"] == manual.size and info["sha256"] == manual.sha256
    assert len(info["prefix_sha256"]) == 64 and info["prefix_bytes"] > manual.size
    code, out = run(capsys, "experts", "manual-stats", "--sections", "2")
    assert code == 0 and load_manual(sections=2).sha256 in out


def test_threads_persist_across_invocations_in_sqlite(capsys, tmp_path):
    db = str(tmp_path / "cli.sqlite")
    args = ["experts", "run", "--checkpoint-db", db, "--thread-id", "ops-7", "--json"]
    code1, out1 = run(capsys, *args, "--input", QUERY)
    code2, out2 = run(capsys, *args, "--input", "Which sanctions lists do we screen?",
                      "--execution", "parallel")  # fmt: skip
    first, second = json.loads(out1), json.loads(out2)
    assert code1 == code2 == 0
    assert first["turns"] == 1 and second["turns"] == 2
    assert len(first["experts"]) == 3 and second["experts"] == ["compliance_auditor"]
    assert first["prefix_sha256"] == second["prefix_sha256"]


def test_plain_output_and_metrics_note(capsys):
    code, out = run(capsys, "experts", "run", "--input", "How do I block a lost card?",
                    "--show-metrics")  # fmt: skip
    assert code == 0 and "experts: support_concierge" in out and "none in stub mode" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--input", "  "], "--input is empty"),
        (["--input", "q", "--checkpoint-db", "x.sqlite"], "needs --thread-id"),
        (["--input", "q", "--sections", "0"], "sections must be between"),
        (["--input", "q", "--checkpoint-db", "/no/such/dir/x.sqlite", "--thread-id", "t"],
         "does not exist"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_clear_line(capsys, argv, message):
    code, out = run(capsys, "experts", "run", *argv)
    assert code == 2 and message in out


def test_llm_mode_without_an_endpoint_says_how_to_start_one(capsys, monkeypatch):
    monkeypatch.delenv("AGENTSTATE_LLM_BASE_URL", raising=False)
    code, out = run(capsys, "experts", "run", "--input", "q", "--mode", "llm")
    assert code == 2 and "agentstate engine start" in out and "make engine" in out


def test_llm_mode_with_nothing_listening_says_how_to_start_one(capsys):
    from agentstate.engine import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    code, out = run(capsys, "experts", "run", "--input", "q", "--mode", "llm", "--base-url", url)
    assert code == 2 and "cannot reach the model endpoint" in out


@pytest.mark.parametrize("kind", ["folder", "text file", "damaged database"])
def test_a_checkpoint_db_that_is_not_sqlite_is_one_line_and_left_alone(capsys, tmp_path, kind):
    """Issue 16: a folder or a non-SQLite file was a traceback (exit 1); the file got chmodded."""
    target = tmp_path / "db"
    if kind == "folder":
        target.mkdir()
    else:
        body = b"not a database\n" if kind == "text file" else b"SQLite format 3\x00" + b"x" * 200
        target.write_bytes(body)
        target.chmod(0o644)
    before = sorted(p.name for p in tmp_path.iterdir())
    mode = target.stat().st_mode
    code, out = run(capsys, "experts", "run", "--input", "q", "--checkpoint-db", str(target),
                    "--thread-id", "t")  # fmt: skip
    assert code == 2 and out.startswith("error: ") and out.count("\n") == 1, out
    assert str(target) in out and ("folder" in out if kind == "folder" else "database" in out)
    assert sorted(p.name for p in tmp_path.iterdir()) == before and target.stat().st_mode == mode
    if kind != "folder":
        assert target.read_bytes().startswith(b"not a" if kind == "text file" else b"SQLite")


@pytest.mark.parametrize("checkout", [True, False])
def test_an_unreachable_endpoint_says_how_to_install_the_engine_where_it_runs(
    capsys, monkeypatch, checkout
):
    """A pip user is told the pip line, not `make engine` (there is no Makefile there)."""
    from agentstate.engine import free_port, model  # noqa: PLC0415

    monkeypatch.setattr(model, "in_checkout", lambda root=None: checkout)
    url = f"http://127.0.0.1:{free_port()}/v1"
    code, out = run(capsys, "experts", "run", "--input", "q", "--mode", "llm", "--base-url", url)
    assert code == 2 and "agentstate engine start" in out
    assert ("make engine" in out) == checkout and ("pip install" in out) == (not checkout)
