"""Benchmarks (not tests): they start real processes and print figures.

    python -m bench.cancel_latency [--quick] [--json PATH] [--png PATH] [--agent NAME ...]

See docs/performance.md for the latest figures and how they were made.
"""
