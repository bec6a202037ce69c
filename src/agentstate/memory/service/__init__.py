"""The memory service standing in for Mycelian: what runs in the server process (notebook 06).

``store`` (SQLite: durable write queue, entries with FTS5, context snapshots,
call log; one server process per file), ``writer`` (drains the queue),
``server`` (the FastMCP tools, optional bearer token over HTTP; ``python -m
agentstate.memory.service.server``), ``options`` (the server's options and
their checks, light to import), ``cli`` (``agentstate memory serve``),
and ``process`` (start and stop the server on 127.0.0.1). For a fleet of
replicas over one database: ``store_postgres`` (the same interface over
Postgres), ``fleet_writer`` (each replica's share of the one queue),
``stores`` (the backend ``--db`` names) and ``targets`` (reading ``--db``,
never showing a password). What both backends share lives once: ``sql_store``
(the store's interface and its rules over any SQL database), ``checks`` (what
the service accepts) and ``queue_writer`` (what both writers do alike). Every file the
service opens goes through :mod:`agentstate.private_files` (``lstat`` first: a
symlink, a FIFO or a device is refused before it is opened or chmodded). Nothing here imports the
capture half: the service knows only its tools, not who calls them.
"""
