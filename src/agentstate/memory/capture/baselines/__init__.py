"""What the capture graph is measured against (notebook 06).

``react`` (the prebuilt ReAct agent, the lesson's baseline, same prompt and
tools) and ``auditor`` (reads a memory's store and lists every broken capture
rule, for any agent).
"""
