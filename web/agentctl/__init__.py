"""agentctl: one agent process behind a small authenticated HTTP API.

``turnvisor agentctl`` runs on the machine (or in the container) where an agent
should run; the backend drives it through ``supervisor.executors.agentctl``.
See docs/deploy.md.  The event-stream format is ``protocols.agentctl_wire``.

Modules: ``host`` (the agent's
nursery tree, turns, cancel), ``eventlog`` (numbered events, replay,
fan-out), ``hostconfig`` (its configuration and refusals), ``app`` (the Quart-Trio routes),
``server`` (Hypercorn and the root nursery), ``launcher`` (the stdlib-only
shim that ties the agent's process group to agentctl's life).

This file imports nothing: ``launcher`` must start without the web stack.
"""
