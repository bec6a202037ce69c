"""Stage 05: the manual is loaded verbatim, named by its hash, and cut only at chapter starts."""

import hashlib

import pytest

from agentstate.experts import load_manual
from agentstate.experts.manual import MANUAL_FILE
from agentstate.lessons.datafiles import data_path


def test_manual_is_the_file_bytes_verbatim():
    raw = data_path(MANUAL_FILE).read_bytes()
    manual = load_manual()
    assert manual.data == raw
    assert manual.text == raw.decode("utf-8")
    assert manual.sha256 == hashlib.sha256(raw).hexdigest()
    assert manual.size > 90_000  # about 25k tokens, like the anchor's manual


def test_manual_repr_never_prints_the_text():
    manual = load_manual()
    assert len(repr(manual)) < 200 and "Harbourline" not in repr(manual)


def test_leading_parts_are_exact_byte_prefixes_named_by_their_own_hash():
    manual = load_manual()
    chapters = manual.chapter_titles()
    parts = [manual.leading(k) for k in (1, 2, 4, len(chapters))]
    for part in parts:
        assert manual.data.startswith(part.data)
        assert part.sha256 == hashlib.sha256(part.data).hexdigest()
        assert part.chapter_titles() == chapters[: part.sections]
    assert len({p.sha256 for p in parts[:-1]}) == 3
    assert parts[-1].data == manual.data
    assert load_manual(sections=2) == parts[1]


@pytest.mark.parametrize("bad", [0, -1, 10_000])
def test_bad_section_counts_say_what_is_allowed(bad):
    with pytest.raises(ValueError, match=r"sections must be between 1 and \d+"):
        load_manual(sections=bad)


def test_missing_empty_and_non_utf8_files_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="manual not found"):
        load_manual(tmp_path / "nope.md")
    (tmp_path / "empty.md").write_bytes(b"  \n")
    with pytest.raises(ValueError, match="empty"):
        load_manual(tmp_path / "empty.md")
    (tmp_path / "latin1.md").write_bytes("caf\xe9 ## 1.".encode("latin-1"))
    with pytest.raises(ValueError, match="not valid UTF-8"):
        load_manual(tmp_path / "latin1.md")
