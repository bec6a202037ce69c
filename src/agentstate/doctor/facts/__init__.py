"""What the doctor reads from a graph and its code, before any check (notebooks 01-06).

Nothing here judges: a compiled graph's channels, nodes, tools and subagents
(``graph_facts``), what a function reads and writes (``tool_facts``: the
``scan`` over ``code_source``, one ``reads_*`` module per thing it reads:
state keys, the files channel and backends, the disk, the store, gathers,
updates), which nodes share a super-step (``steps``, ``routes``), and
the installed releases (``releases``). The checks (``..checks``) read these.
"""
