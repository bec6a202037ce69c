"""``agentstate doctor --fix``: the fix a lesson writes by hand, written into the reader's code.

The pipeline after the checks: :mod:`.plan` says which edit fixes a finding
(a reducer on the key, the key declared on the state, the parent's schema
handed to a subagent, the turn cache), :mod:`.source_edits`, :mod:`.call_edits`
and :mod:`.imports` make it with libcst (comments, formatting and the import
order kept), :mod:`.apply` writes it without ever harming a file, and
:mod:`.command` is what ``--fix``, ``--unsafe-fixes`` and ``--diff`` do, and
:mod:`.preview` the diff for an agent in memory (``preview_fix``).
The fixes are the ones notebooks 02, 03 and 04 teach; each lesson 01-04
prints ``preview_fix``'s diff in its doctor cell.
"""
