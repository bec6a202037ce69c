"""agentstate: how state really behaves in LangGraph agents.

The package is the single source of truth for the notebook series in
``notebooks/``: every notebook imports its broken baseline and its fix from
here. Subpackages are one system each (``rds`` for stages 01-04); shared
modules hold the scripted model, the model factory and the tracer.
"""

__version__ = "0.1.0"
