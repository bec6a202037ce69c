"""``python -m agentstate.engine``: the engine process (:mod:`agentstate.engine.app`).

Started by :class:`~agentstate.engine.server.EngineServer` for notebook 05.
"""

if __name__ == "__main__":
    from agentstate.engine.app import main

    main()
