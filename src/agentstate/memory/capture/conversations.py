"""The conversations notebook 06 replays, from ``data/conversations/*.json``.

A file holds ``events`` in the order the observer sees them. An event is a
control message (``{"thread": t, "system": "SESSION_START"}``) or a
conversation message (``{"thread": t, "role": "user"|"assistant",
"content": ...}``). ``msg_idx`` is not written in the files: it is the
1-based position of a conversation message in its thread, computed here, so
the data cannot disagree with itself. Control messages are typed, never
guessed from text: a user who types "SESSION_END" sent a user message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from langchain_core.messages import BaseMessage, ChatMessage, SystemMessage

from agentstate.lessons.datafiles import data_path

CONTROLS = ("SESSION_START", "FLUSH_CONTEXT", "SESSION_END")
ROLES = ("user", "assistant")


@dataclass(frozen=True)
class Event:
    """One event the observer sees: a control message or a conversation message.

    Checked when made, so a bad event fails where it is built and never
    reaches an agent: roles ``user``/``assistant`` only, ``msg_idx`` a
    non-negative int, controls one of ``CONTROLS``.
    """

    thread: str
    position: int  # index of the event in its thread (control and conversation alike)
    kind: str  # "control" or "message"
    content: str
    role: str | None = None
    msg_idx: int | None = None

    def __post_init__(self) -> None:
        def whole(value: object) -> bool:
            return isinstance(value, int) and not isinstance(value, bool) and value >= 0

        if not isinstance(self.thread, str) or not self.thread.strip():
            raise ValueError(f"thread must be a non-empty string, got {self.thread!r}")
        if not whole(self.position):
            raise ValueError(f"position must be a non-negative int, got {self.position!r}")
        if not isinstance(self.content, str):
            raise ValueError(f"content must be a string, got {type(self.content).__name__}")
        if self.kind == "control":
            if self.content not in CONTROLS:
                raise ValueError(f"a control event is one of {CONTROLS}, got {self.content!r}")
        elif self.kind == "message":
            if self.role not in ROLES:
                raise ValueError(
                    f"role must be one of {ROLES} (system messages are never stored), "
                    f"got {self.role!r}"
                )
            if not whole(self.msg_idx):
                raise ValueError(f"msg_idx must be a non-negative int, got {self.msg_idx!r}")
        else:
            raise ValueError(f"kind must be 'control' or 'message', got {self.kind!r}")

    def to_message(self) -> BaseMessage:
        """The message the observer sends: typed, with a stable id (resending replaces)."""
        if self.kind == "control":
            return SystemMessage(
                self.content,
                id=f"{self.thread}-e{self.position}",
                additional_kwargs={"position": self.position},
            )
        return ChatMessage(
            role=self.role,  # type: ignore[arg-type]  # a message Event has a role (__post_init__)
            content=self.content,
            id=f"{self.thread}-m{self.msg_idx}",
            additional_kwargs={"msg_idx": self.msg_idx, "position": self.position},
        )


@dataclass(frozen=True)
class Conversation:
    """A named, numbered list of events, possibly over several threads."""

    name: str
    title: str
    events: tuple[Event, ...]

    @property
    def threads(self) -> list[str]:
        """Thread names in order of first appearance."""
        return list(dict.fromkeys(e.thread for e in self.events))

    def messages(self, thread: str) -> list[Event]:
        """The conversation messages of ``thread`` (no controls), in order."""
        return [e for e in self.events if e.thread == thread and e.kind == "message"]

    def thread_events(self, thread: str) -> list[Event]:
        """Every event of ``thread``, controls included, in order."""
        return [e for e in self.events if e.thread == thread]


def parse(raw: dict, name: str = "conversation") -> Conversation:
    """Validate and number a conversation; ValueError says which event is wrong."""
    if not isinstance(raw.get("events"), list) or not raw["events"]:
        raise ValueError(f"{name}: 'events' must be a non-empty list")
    positions: dict[str, int] = {}
    counts: dict[str, int] = {}
    events = []
    for i, item in enumerate(raw["events"]):
        thread = item.get("thread", "main")
        where = f"{name}: event {i} (thread {thread!r})"
        position = positions[thread] = positions.get(thread, -1) + 1
        if "system" in item:
            if item["system"] not in CONTROLS:
                raise ValueError(f"{where}: system must be one of {CONTROLS}")
            events.append(Event(thread, position, "control", item["system"]))
            continue
        if item.get("role") not in ROLES or not isinstance(item.get("content"), str):
            raise ValueError(f"{where}: needs role in {ROLES} and a string content")
        counts[thread] = counts.get(thread, 0) + 1
        events.append(
            Event(thread, position, "message", item["content"], item["role"], counts[thread])
        )
    return Conversation(raw.get("name", name), raw.get("title", name), tuple(events))


def available() -> list[str]:
    """The names of the conversations in ``data/conversations``."""
    return sorted(p.stem for p in data_path("conversations").glob("*.json"))


def load(name: str) -> Conversation:
    """Load ``data/conversations/<name>.json``."""
    path = data_path("conversations") / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"no conversation {name!r}; available: {', '.join(available())}")
    return parse(json.loads(Path(path).read_text(encoding="utf-8")), name)


def synthetic(n_messages: int, thread: str = "bench") -> Conversation:
    """A long generated conversation (the benchmark): SESSION_START, n messages, SESSION_END."""
    raw = [{"thread": thread, "system": "SESSION_START"}]
    for i in range(1, n_messages + 1):
        role = ROLES[(i + 1) % 2]
        raw.append(
            {
                "thread": thread,
                "role": role,
                "content": f"message {i} from the {role}: é ✓ {'x' * (i % 40)}",
            }
        )
    raw.append({"thread": thread, "system": "SESSION_END"})
    return parse({"name": f"synthetic_{n_messages}", "events": raw})
