"""The mock agent: a sans-IO behaviour machine (``machine``), its dialects (``acp1``,
``acp2``, ``codex``), its behaviour scripts (``scripts``, ``faults``, ``commands``),
where it keeps sessions (``sessions``) and its stdio transport (``stdio``).  The command
table is in protocols/mock_agent.py, the program."""
