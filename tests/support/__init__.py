"""What the tests and the benchmarks share (bench/ imports it too).

- ``ws``: the one WebSocket client (requests by id, collected and watched
  notifications, per-frame receive timestamps) and predicates over notifications;
- ``server``: a real server in the test's own nursery (``running_server``, ``Server``);
- ``serverproc``: ``turnvisor serve`` as a subprocess (trio and thread variants),
  the one parser of its "listening" line;
- ``leaks``: the one leak counter (fds, RSS, children, agent groups, Trio tasks).
"""
