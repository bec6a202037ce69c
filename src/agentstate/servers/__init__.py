"""Local server processes the package starts for real parts (notebooks 05 and 06, the tests).

``loopback`` starts a program on 127.0.0.1 and knows when it answers on its
own socket; ``postgres`` is a throwaway PostgreSQL server on a free port (the
Postgres checkpointers of ``agentstate.persistence``, the memory service on
Postgres of notebook 06's going-further).
"""

__all__: list[str] = []
