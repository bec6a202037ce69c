"""Draw what a memory holds, message by message, beside what the capture rules ask for.

The auditor (``capture/baselines/auditor``) reports broken rules as rows; this
picture shows the same store as the rules see it, one column per message of a
thread: the roles of the entries stored for it (``u`` user, ``a`` assistant;
green when exactly one entry with the right role, red otherwise), the
bootstrap (``B`` per ``get_context``) before the first message, and each
flush (``F`` per ``put_context``) after the message it follows. The first row
is what the rules ask for, the other rows what each run left in the store,
read from the database as the auditor reads it (:func:`read_memory`). Drawn
about 950 px wide with type of 12 px or more. Drawn in notebook 06's going further.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentstate.memory.capture.baselines.auditor import actual_flushes, expected_flushes
from agentstate.memory.capture.conversations import Conversation

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RIGHT, WRONG, RULE = "#2a9d8f", "#e76f51", "#6c757d"
FONT_SIZE = 10  # points: 13.9 px at the figure's 100 dpi
MAX_MESSAGES = 24  # columns that stay legible in about 950 px


def capture_columns(
    conversation: Conversation, thread: str, stored: Mapping[str, Any] | None
) -> dict[str, Any]:
    """One row of the picture as data: per msg_idx the stored roles, the bootstraps, the flushes.

    ``stored`` is :func:`read_memory`'s dict for the thread's memory; ``None``
    gives what the rules ask for. ``roles`` maps each msg_idx to the role
    initials of the entries stored for it (text equal to the message's, in
    store order) and ``extra`` counts the entries matching no message.
    """
    if thread not in conversation.threads:
        known = ", ".join(repr(t) for t in conversation.threads)
        raise ValueError(f"no thread {thread!r} in this conversation; its threads: {known}")
    if stored is not None and not {"entries", "ops"} <= set(stored):
        raise ValueError("stored: pass read_memory(db, memory_id), a dict with entries and ops")
    messages = {m.msg_idx: m for m in conversation.messages(thread)}
    starts = sum(e.content == "SESSION_START" for e in conversation.thread_events(thread))
    if stored is None:
        roles = {i: m.role[0] for i, m in messages.items() if m.role}
        return {
            "roles": roles,
            "extra": 0,
            "bootstraps": starts,
            "flushes": expected_flushes(conversation, thread),
        }
    found: dict[Any, str] = {i: "" for i in messages}
    extra = 0
    for entry in stored["entries"]:
        idx, role = entry["tags"].get("msg_idx"), str(entry["tags"].get("role", "?"))
        message = messages.get(idx)
        if message is not None and entry["raw_entry"] == message.content:
            found[idx] += role[:1]
        else:
            extra += 1
    ops = stored["ops"]
    return {
        "roles": found,
        "extra": extra,
        "bootstraps": sum(op["tool"] == "get_context" for op in ops),
        "flushes": [p for p, _ in actual_flushes(ops)],
    }


def draw_capture(
    conversation: Conversation,
    thread: str,
    runs: Mapping[str, Mapping[str, Any]],
    *,
    messages: tuple[int, int] | None = None,
    title: str | None = None,
) -> Figure:
    """Draw the rules' row and one row per run (``name -> read_memory(db, memory_id)``).

    ``messages=(first, last)`` draws those msg_idx only (both included); a
    thread of more than ``MAX_MESSAGES`` messages must be drawn in such parts.
    """
    import matplotlib.pyplot as plt

    rows = {"the rules ask": capture_columns(conversation, thread, None)}
    rows |= {name: capture_columns(conversation, thread, s) for name, s in runs.items()}
    rule = rows["the rules ask"]
    first, last = messages or (min(rule["roles"], default=1), max(rule["roles"], default=0))
    indices = [i for i in sorted(rule["roles"]) if first <= i <= last]
    if not indices or len(indices) > MAX_MESSAGES:
        raise ValueError(
            f"draw_capture draws 1 to {MAX_MESSAGES} messages legibly; thread {thread!r} has "
            f"{len(indices)} in msg_idx {first}-{last}: pass messages=(first, last)"
        )
    label_width = 1.9
    cell = min(0.5, (9.3 - label_width) / (len(indices) + 2))
    width = label_width + cell * (len(indices) + 2)
    fig = plt.figure(figsize=(width, 0.62 * len(rows) + 1.0), layout="constrained")
    plt.close(fig)  # shown once, as the returned value
    ax = fig.subplots()
    ax.set_xlim(-label_width, cell * (len(indices) + 2))
    ax.set_ylim(len(rows) - 0.4, -1.0)
    ax.axis("off")
    font: dict[str, Any] = {
        "fontsize": FONT_SIZE,
        "va": "center",
        "ha": "center",
        "family": "monospace",
    }

    def x_of(idx: int) -> float:  # the centre of message idx's column; column 0 is the bootstrap
        return cell * (indices.index(idx) + 1.5)

    ax.text(cell / 2, -0.75, "boot", **{**font, "fontsize": FONT_SIZE - 1})
    for idx in indices:
        ax.text(x_of(idx), -0.75, str(idx), **font)
    want_flushes = Counter(rule["flushes"])
    for y, (name, row) in enumerate(rows.items()):
        ax.text(-0.1, y, name, **{**font, "ha": "right", "family": "sans-serif"})
        asked = name == "the rules ask"
        ok = row["bootstraps"] == rule["bootstraps"]
        boot = "B" * row["bootstraps"] or "-"
        ax.text(cell / 2, y, boot, **font, color=RULE if asked else RIGHT if ok else WRONG)
        for idx in indices:
            got = row["roles"][idx]
            right = got == rule["roles"][idx]
            colour = RULE if asked else RIGHT if right else WRONG
            box = {"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": colour}
            ax.text(x_of(idx), y, got or "-", **font, color=colour, bbox=box)
        have = Counter(row["flushes"])
        for p in sorted(set(have) | set(want_flushes)):
            if p not in indices:
                continue
            extra, missing = have[p] - want_flushes[p], want_flushes[p] - have[p]
            colour = RULE if asked else WRONG if extra or missing else RIGHT
            mark = "F" * have[p] if not missing else "F?"
            ax.text(x_of(p) + cell / 2, y - 0.38, mark, **font, color=colour)
        if row["extra"]:
            ax.text(cell * (len(indices) + 1.5), y, f"+{row['extra']}", **font, color=WRONG)
    note = (
        "per message: the roles of its stored entries (u user, a assistant); B: get_context;\n"
        "F: put_context after it; F?: a flush missing; +n: entries that match no message"
    )
    ax.set_title(title or f"thread {thread!r}", fontsize=FONT_SIZE + 1, loc="left")
    fig.supxlabel(note, fontsize=FONT_SIZE - 1, x=0.0, ha="left")
    return fig
