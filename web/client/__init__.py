"""The ``turnvisor`` command as a client of a running server (DESIGN.md §14)."""
