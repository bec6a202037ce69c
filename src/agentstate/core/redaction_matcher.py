"""Find many known strings in a text at once, learning new ones at a cost in their own length.

The value pass (``core.redaction_values``, notebook 02) searches every reply
for every value a thread holds, in several encodings each. A regex rebuilt
over all of them made each new value cost as much as all the others (0.2-0.3 s
at 1,000 values, 11 s to load 10,000) and recursed once per nested prefix
(600 values that are prefixes of one another raised ``RecursionError``).

:class:`Matcher` is an Aho-Corasick automaton: one pass over the text gives,
for every position, the longest word that ends there (the deepest word on
the state's failure chain); a sweep from the right then keeps every match
not inside another, and overlapping matches are merged into one region: the
union of their characters, so two values written overlapping (``AAAABBBB``,
the second starting inside the first) are both hidden whole (issue 40; the
rightmost match alone left 14 of 20 characters of the first plain).
No recursion anywhere: tries, failure links and searches are
loops. An automaton is built once, so new words go into a fresh block, and a
block is merged with the one before it while that one is at most twice its
size (the logarithmic method of Bentley and Saxe): a word is rebuilt
O(log n) times over its life, and a search runs O(log n) blocks, each in time
linear in the text.

Pure Python on purpose: ``pyahocorasick``'s ``iter_long`` misses matches
(its issues #133, #185, #189, still open), a miss here is a leaked secret,
and the core package depends only on LangChain, LangGraph and pydantic.
"""

from __future__ import annotations

import gc
import threading
from array import array
from collections import deque
from collections.abc import Iterable

_NONE, _MANY = -1, -2  # a node's ``code``: no child, or its children are in ``many``


class _Block:
    """A static automaton over a fixed set of words, built and searched without recursion.

    Most nodes of a secret's trie have one child, so a node keeps that child in
    two integer arrays (its character's code, its node); only a node with
    several children has a dict. About 40 bytes a node instead of a dict's 200.
    """

    __slots__ = ("best", "code", "fail", "many", "next", "size")

    def __init__(self, words: list[str]) -> None:
        self.size = len(words)
        code = array("l", [_NONE])
        nxt = array("l", [0])
        depth = array("l", [0])
        ends = bytearray(1)
        many: dict[int, dict[str, int]] = {}
        for word in words:
            node = 0
            for char in word:
                at = code[node]
                if at == ord(char):
                    node = nxt[node]
                    continue
                child = many[node].get(char) if at == _MANY else None
                if child is None:
                    child = len(code)
                    code.append(_NONE)
                    nxt.append(0)
                    depth.append(depth[node] + 1)
                    ends.append(0)
                    if at == _NONE:
                        code[node], nxt[node] = ord(char), child
                    elif at == _MANY:
                        many[node][char] = child
                    else:  # a second child: the node's children move to a dict
                        many[node] = {chr(at): nxt[node], char: child}
                        code[node] = _MANY
                node = child
            ends[node] = 1
        self.code, self.next, self.many = code, nxt, many
        fail = array("l", bytes(8 * len(code)))
        best = array("l", bytes(8 * len(code)))  # the longest word ending at this node's end
        queue: deque[int] = deque(child for _, child in self._children(0))
        for child in queue:
            best[child] = depth[child] if ends[child] else 0
        while queue:
            node = queue.popleft()
            for char, child in self._children(node):
                link = fail[node]
                target = self._step(link, char)
                while target is None and link:
                    link = fail[link]
                    target = self._step(link, char)
                fail[child] = target or 0
                best[child] = depth[child] if ends[child] else best[fail[child]]
                queue.append(child)
        self.fail, self.best = fail, best

    def _children(self, node: int) -> list[tuple[str, int]]:
        at = self.code[node]
        if at == _NONE:
            return []
        if at == _MANY:
            return list(self.many[node].items())
        return [(chr(at), self.next[node])]

    def _step(self, node: int, char: str) -> int | None:
        at = self.code[node]
        if at == ord(char):
            return self.next[node]
        if at == _MANY:
            return self.many[node].get(char)
        return None

    def longest(self, text: str, out: dict[int, int]) -> None:
        """For each end position of ``text``, the longest word ending there, into ``out``."""
        code, nxt, many, fail, best = self.code, self.next, self.many, self.fail, self.best
        state = 0
        for pos, char in enumerate(text, 1):
            point = ord(char)
            while True:
                at = code[state]
                if at == point:
                    state = nxt[state]
                    break
                if at == _MANY:
                    child = many[state].get(char)
                    if child is not None:
                        state = child
                        break
                if not state:
                    break
                state = fail[state]
            length = best[state]
            if length and length > out.get(pos, 0):
                out[pos] = length


class Matcher:
    """Words added one by one; :meth:`regions` finds every occurrence, overlaps merged.

    Thread-safe: words are added and blocks merged under a lock, and a search
    reads blocks that never change once built.
    """

    def __init__(self) -> None:
        self._blocks: list[_Block] = []
        self._pending: list[str] = []
        self._words: list[str] = []  # every word, in the order added: blocks are slices of it
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def add(self, words: Iterable[str]) -> None:
        """Learn ``words`` (empty and known ones are skipped): cost in their own length."""
        with self._lock:
            for word in words:
                if word and word not in self._seen:
                    self._seen.add(word)
                    self._words.append(word)
                    self._pending.append(word)

    def __len__(self) -> int:
        return len(self._seen)

    def _current(self) -> list[_Block]:
        """The blocks, with the words added since the last search built into them."""
        with self._lock:
            if self._pending:
                words, self._pending = self._pending, []
                blocks = self._blocks
                # merge while the block before is no more than twice as large: O(log n) blocks
                while blocks and blocks[-1].size <= 2 * len(words):
                    words = self._words[-blocks[-1].size - len(words) :]
                    blocks = blocks[:-1]
                enabled = gc.isenabled()
                gc.disable()  # millions of small objects: the cyclic collector would rescan them
                try:
                    self._blocks = [*blocks, _Block(words)]
                finally:
                    if enabled:
                        gc.enable()
            return self._blocks

    def regions(self, text: str) -> list[tuple[int, int, list[tuple[int, int]]]]:
        """``(start, end, matches)``: the union of every occurrence of every word, in order.

        Each region is a maximal run of overlapping matches; ``matches`` are its
        ``(start, end)`` matches that are not inside another, left to right.
        Every character of every occurrence is inside a region.
        """
        blocks = self._current()
        if not blocks or not text:
            return []
        longest: dict[int, int] = {}
        for block in blocks:
            block.longest(text, longest)
        return union_of(longest)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` of the regions of :meth:`regions`: every match, overlaps merged."""
        return [(start, end) for start, end, _ in self.regions(text)]


def union_of(longest: dict[int, int]) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """From the longest match at each end, the regions their union makes, with their matches."""
    kept: list[tuple[int, int]] = []
    start = None
    for end in sorted(longest, reverse=True):
        first = end - longest[end]
        if start is None or first < start:  # not inside the match that set ``start``
            start = first
            kept.append((first, end))
    kept.reverse()
    regions: list[tuple[int, int, list[tuple[int, int]]]] = []
    for first, end in kept:
        if regions and first < regions[-1][1]:
            regions[-1][2].append((first, end))
            regions[-1] = (regions[-1][0], max(regions[-1][1], end), regions[-1][2])
        else:
            regions.append((first, end, [(first, end)]))
    return regions
