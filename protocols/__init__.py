"""Agent wire protocols: sans-IO cores (ACP, Codex app-server), a thin Trio
transport, the adapters the supervisor drives, and the mock agent.

Nothing heavy is imported here: ``python -m protocols.mock_agent`` must start fast.
"""
