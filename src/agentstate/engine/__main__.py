"""``python -m agentstate.engine``: the engine process (:mod:`agentstate.engine.app`)."""

if __name__ == "__main__":
    from agentstate.engine.app import main

    main()
