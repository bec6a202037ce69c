"""Notebook 05's desk helpers: what its prompts share, the doctor, the live engine, the knob.

The page builds the desk (``build_desk(model, prompt, manual)``) and writes both prompt
orders; these helpers run it on one question (``DESK_QUESTION`` unless given) and collect
what the page prints, so the bookkeeping around the mechanism (a scripted model that keeps
every prompt, the doctor's callback, reading the engine's log) stays off the page. Each
that runs a graph has an ``a``-prefixed async twin that runs it with ``ainvoke``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

Build = Callable[..., Any]
Orders = Mapping[str, Callable[..., Any]]

DESK_QUESTION = "The overnight batch outage: what must we report to the regulator?"


def request_id_after(chapter: int = 0) -> Any:
    """Notebook 05's knob: a per-call line inside the manual, and what the experts still share.

    A request id, different for each expert's call, goes after the manual's first
    ``chapter`` chapters (0: after the desk's instructions, before the manual) in system
    message 1 of the fixed order (``build_messages(system_prefix(...))``). The one-row
    table names the chapter and says what the three experts' prompts share and where
    they part (:func:`shared_prefix`):
    each chapter the line moves down adds that chapter to what every call shares, and
    nothing after the line is shared. Only ``chapter`` is a parameter, so
    ``ipywidgets.interact`` draws one slider.
    """
    import dataclasses

    from agentstate.experts import EXPERTS, build_messages, load_manual, system_prefix
    from agentstate.lessons.display import Table
    from agentstate.lessons.fixtures import shared_prefix

    manual = load_manual()
    chapters = manual.chapter_titles()
    if (
        isinstance(chapter, bool)
        or not isinstance(chapter, int)
        or not 0 <= chapter <= len(chapters)
    ):
        raise ValueError(f"chapter must be an int from 0 to {len(chapters)}, got {chapter!r}")
    cut = manual.leading(chapter).size if chapter else 0
    prompts = []
    for n, expert in enumerate(EXPERTS):  # the line differs per call
        data = manual.data[:cut] + f"Request id: {n:04d}\n".encode() + manual.data[cut:]
        prefix = system_prefix(dataclasses.replace(manual, data=data))
        prompts.append(build_messages(prefix, expert, DESK_QUESTION))
    after = chapters[chapter - 1] if chapter else "the desk's instructions"
    return Table([{"id line after": after, **shared_prefix(prompts)}])


def _recorder() -> Any:
    """A scripted model that answers "a note" to each of three experts and keeps every prompt."""
    from agentstate.models import ScriptedChatModel

    return ScriptedChatModel(script=[AIMessage("a note")] * 3)


def _row(recorder: Any) -> Any:
    from agentstate.lessons.display import Table
    from agentstate.lessons.fixtures import shared_prefix

    return Table([shared_prefix(recorder.seen)])


def shares(build_desk: Build, prompt: Callable[..., Any], question: str = DESK_QUESTION) -> Any:
    """One question through the desk on a scripted model: what its three prompts share (05)."""
    recorder = _recorder()
    build_desk(recorder, prompt).invoke({"question": question})
    return _row(recorder)


async def ashares(
    build_desk: Build, prompt: Callable[..., Any], question: str = DESK_QUESTION
) -> Any:
    """:func:`shares`, run with ``ainvoke``."""
    recorder = _recorder()
    await build_desk(recorder, prompt).ainvoke({"question": question})
    return _row(recorder)


def doctor_reports(build_desk: Build, orders: Orders, question: str = DESK_QUESTION) -> Any:
    """The doctor's ``Watch`` (a callback handler) on one run of the desk per order (05)."""
    from agentstate.doctor import Watch
    from agentstate.lessons.display import compare_findings

    reports = {}
    for name, prompt in orders.items():
        desk = build_desk(_recorder(), prompt)
        desk.invoke({"question": question}, {"callbacks": [watch := Watch(desk)]})
        reports[name] = watch.report()
    return compare_findings(reports, whole="the desk")


async def adoctor_reports(build_desk: Build, orders: Orders, question: str = DESK_QUESTION) -> Any:
    """:func:`doctor_reports`, run with ``ainvoke``."""
    from agentstate.doctor import Watch
    from agentstate.lessons.display import compare_findings

    reports = {}
    for name, prompt in orders.items():
        desk = build_desk(_recorder(), prompt)
        await desk.ainvoke({"question": question}, {"callbacks": [watch := Watch(desk)]})
        reports[name] = watch.report()
    return compare_findings(reports, whole="the desk")


def _unrelated() -> list[HumanMessage]:
    import time

    return [HumanMessage(f"Say one word. {time.time_ns()}")]


def tokens_reused(
    server: Any, build_desk: Build, orders: Orders, manual: Any, question: str = DESK_QUESTION
) -> Any:
    """The desk on a running ``EngineServer``, once per order: the most tokens a call reused (05).

    Before each order an unrelated prompt replaces what the engine's cache holds; the
    experts run one at a time (``max_concurrency=1``) so each call can reuse the one
    before. The counts come from the engine's log (``server.prefix_hits()``).
    """
    from agentstate.experts import engine_model
    from agentstate.lessons.display import Table

    model, rows = engine_model(server, max_tokens=8), []
    for name, prompt in orders.items():
        model.invoke(_unrelated())  # the cache now holds this instead
        seen = len(server.prefix_hits())
        build_desk(model, prompt, manual).invoke({"question": question}, {"max_concurrency": 1})
        rows.append({"prompt": name, "tokens reused": max(server.prefix_hits()[seen:], default=0)})
    return Table(rows)


async def atokens_reused(
    server: Any, build_desk: Build, orders: Orders, manual: Any, question: str = DESK_QUESTION
) -> Any:
    """:func:`tokens_reused`, run with ``ainvoke``."""
    from agentstate.experts import engine_model
    from agentstate.lessons.display import Table

    model, rows = engine_model(server, max_tokens=8), []
    for name, prompt in orders.items():
        await model.ainvoke(_unrelated())  # the cache now holds this instead
        seen = len(server.prefix_hits())
        desk = build_desk(model, prompt, manual)
        await desk.ainvoke({"question": question}, {"max_concurrency": 1})
        rows.append({"prompt": name, "tokens reused": max(server.prefix_hits()[seen:], default=0)})
    return Table(rows)
