"""Browser tests: Playwright's sync API driving Debian's chromium against a real
``turnvisor serve`` subprocess (see conftest.py)."""
