"""Which nodes of a graph can run in one super-step, and which can run twice in one (notebook 02).

LangGraph runs in super-steps: the nodes a step starts run together, and two
writes of a key without a reducer in one step raise ``InvalidUpdateError``.
Plain edges from one node start all their targets in the next step; a
conditional edge starts what its function returns (:mod:`.routes`: one end of
several, a list of them, ``Send``s); a node's ``Command(goto=...)`` too; a
join (``add_edge([a, b], c)``) starts its target once all its sources ran.
:class:`Steps` walks those steps from ``START`` over the sets of nodes that
can be active together, so two routes of a router are never taken for a
fan-out. A pair or a repeat seen only through an outcome the doctor could not
read keeps the reason (:attr:`Share.sure` is False): a warning, not an error.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from agentstate.doctor.facts.routes import KeyKind, Outcome, branch_outcomes, goto_outcomes

START = "__start__"
MAX_STATES = 3000
MAX_COMBINATIONS = 256


@dataclass(frozen=True)
class Share:
    """Two nodes in one step (or one node twice): for sure, or only if a doubt holds."""

    sure: bool
    why: str
    step: int = 1
    """The first super-step it happens in (1: the nodes ``START`` starts), as a run meets it."""

    def before(self, other: Share | None) -> bool:
        """True when this share is the one to report over ``other``: sure first, then earlier."""
        return other is None or (not self.sure, self.step) < (not other.sure, other.step)


@dataclass(frozen=True)
class _State:
    active: frozenset[str]
    repeated: frozenset[str]
    waiting: frozenset[tuple[str, str]]
    doubt: str | None


def _names(nodes: set[str] | frozenset[str]) -> str:
    return ", ".join("the start" if n == START else f"`{n}`" for n in sorted(nodes))


def _when(after: frozenset[str]) -> str:
    """The step after ``after``, as a reader finds it in a run."""
    if after == {START}:
        return "the run's first step (both start the graph)"
    return f"the step after {_names(after)}"


def _merge(parts: tuple[Outcome, ...]) -> Outcome:
    doubts = [p.doubt for p in parts if p.doubt]
    return Outcome(
        named=frozenset().union(*(p.named for p in parts)),
        sent=tuple(s for p in parts for s in p.sent),
        many=tuple(m for p in parts for m in p.many),
        doubt=doubts[0] if doubts else None,
    )


def _node_function(runnable: object) -> object:
    return getattr(runnable, "func", None) or getattr(runnable, "afunc", None)


class Steps:
    """The super-steps a compiled graph's builder allows, read without running it."""

    def __init__(self, builder: Any, key_kind: KeyKind | None = None) -> None:
        self.nodes: set[str] = set(builder.nodes)
        self.deferred = {n for n, spec in builder.nodes.items() if getattr(spec, "defer", False)}
        self.joins: list[tuple[tuple[str, ...], str]] = [
            (tuple(sources), target)
            for sources, target in getattr(builder, "waiting_edges", set())
            if target in self.nodes
        ]
        self.options: dict[str, list[Outcome]] = {}
        for source in [START, *sorted(self.nodes)]:
            self.options[source] = self._options(builder, source, key_kind)
        self.successors: dict[str, set[str]] = {
            source: {n for o in outcomes for n in o.nodes()}
            for source, outcomes in self.options.items()
        }
        for sources, target in self.joins:
            for source in sources:
                self.successors.setdefault(source, set()).add(target)
        self._pairs: dict[frozenset[str], Share] = {}
        self._repeats: dict[str, Share] = {}
        self.complete = self._explore()

    # --- what each node starts ---

    def _options(self, builder: Any, source: str, key_kind: KeyKind | None) -> list[Outcome]:
        static = frozenset(t for s, t in builder.edges if s == source and t in self.nodes)
        choices: list[list[Outcome]] = [[Outcome(named=static)]]
        for spec in builder.branches.get(source, {}).values():
            ends: dict[Hashable, str] | None = spec.ends
            choices.append(branch_outcomes(spec.path, ends, self.nodes, key_kind))
        node = builder.nodes.get(source)
        if node is not None:
            gotos = goto_outcomes(
                _node_function(node.runnable), node.ends or (), self.nodes, key_kind
            )
            if gotos:
                choices.append(gotos)
        merged = [_merge(c) for c in itertools.islice(itertools.product(*choices), 64)]
        return list(dict.fromkeys(merged))

    def sends(self, node: str) -> list[frozenset[str] | None]:
        """The payload keys of every ``Send`` to ``node`` (None where not read)."""
        return [
            keys
            for outcomes in self.options.values()
            for o in outcomes
            for n, keys in (*o.sent, *o.many)
            if n == node
        ]

    def started_by_name(self, node: str) -> bool:
        """True when an edge, a router's name or a join starts ``node`` (not only ``Send``)."""
        return any(node in o.named for outcomes in self.options.values() for o in outcomes) or any(
            target == node for _, target in self.joins
        )

    # --- the walk ---

    def _explore(self) -> bool:
        """Breadth first, so each set of nodes is met first at the earliest step it can run."""
        frontier: deque[tuple[_State, frozenset[str], int]] = deque()
        for outcome in self.options[START]:
            frontier.append((self._state(outcome, frozenset(), None), frozenset({START}), 1))
        seen: set[tuple[frozenset[str], frozenset[str], frozenset[tuple[str, str]], bool]] = set()
        while frontier:
            state, after, step = frontier.popleft()
            key = (state.active, state.repeated, state.waiting, state.doubt is None)
            if key in seen:
                continue
            if len(seen) >= MAX_STATES:
                return False
            seen.add(key)
            self._record(state, after, step)
            per_node = [self.options.get(n, [Outcome()]) for n in sorted(state.active)]
            combos = itertools.islice(itertools.product(*per_node), MAX_COMBINATIONS)
            for combo in combos:
                outcome = _merge(combo)
                waiting = set(state.waiting)
                named = set(outcome.named)
                for sources, target in self.joins:
                    waiting |= {(target, s) for s in sources if s in state.active}
                    if all((target, s) in waiting for s in sources):
                        named.add(target)
                        waiting -= {(target, s) for s in sources}
                joined = Outcome(
                    named=frozenset(named), sent=outcome.sent, many=outcome.many,
                    doubt=outcome.doubt,
                )  # fmt: skip
                nxt = self._state(joined, frozenset(waiting), state.doubt)
                if nxt.active or nxt.waiting != state.waiting:
                    frontier.append((nxt, state.active, step + 1))
        return True

    def _state(
        self, outcome: Outcome, waiting: frozenset[tuple[str, str]], doubt: str | None
    ) -> _State:
        counts: dict[str, int] = dict.fromkeys(outcome.named, 1)
        for node, _ in outcome.sent:
            counts[node] = counts.get(node, 0) + 1
        for node, _ in outcome.many:
            counts[node] = counts.get(node, 0) + 2
        return _State(
            active=frozenset(counts),
            repeated=frozenset(n for n, c in counts.items() if c > 1),
            waiting=waiting,
            doubt=doubt or outcome.doubt,
        )

    def _record(self, state: _State, after: frozenset[str], step: int) -> None:
        sure = state.doubt is None
        active = sorted(state.active - self.deferred)
        why = state.doubt or f"both run in {_when(after)}"
        for a, b in itertools.combinations(active, 2):
            pair = frozenset({a, b})
            share = Share(sure, why, step)
            if share.before(self._pairs.get(pair)):
                self._pairs[pair] = share
        for node in state.repeated:
            reason = state.doubt or f"it is started several times in {_when(after)}"
            share = Share(sure, reason, step)
            if share.before(self._repeats.get(node)):
                self._repeats[node] = share

    # --- answers ---

    def together(self, a: str, b: str) -> Share | None:
        """Whether ``a`` and ``b`` can run in one super-step (None: never)."""
        return self._pairs.get(frozenset({a, b}))

    def repeated(self, node: str) -> Share | None:
        """Whether ``node`` can run more than once in one super-step (None: never)."""
        return self._repeats.get(node)
