"""How a doctor run is configured, loaded and reported (notebooks 01-06).

The command line (``cli``), ``[tool.agentstate.doctor]`` (``config``), loading
a target as ``langgraph dev`` does (``loading``, ``isolation``, ``environment``,
``files``), the findings and their formats (``findings``, ``output``, ``sarif``,
``places``), suppressions and each code's page (``suppression``, ``explain``).
"""
