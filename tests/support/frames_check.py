"""Every frame the WebSocket tests exchange, checked against the published schema
(web/contract, ``GET /api/v1/schema``), so the schema and the server cannot drift.

- A frame received must match the schema: its envelope and, by type and
  action, its payload.
- A request sent that the schema refuses must be answered with an error
  (the tests of bad input send such requests on purpose; the server must
  refuse what the schema refuses).

tests/conftest.py turns the check on for the whole suite; the benchmarks,
which share the client, leave it off (``enabled``).
"""

from __future__ import annotations

import functools
from typing import Any

from jsonschema import Draft202012Validator

from web.contract.schema import payload_ref, schema_document

__all__ = ["SchemaMismatch", "check_received", "enabled", "refused_by_schema"]

#: Set by tests/conftest.py.
enabled = False
#: Frames checked so far (a test proves the check runs).
checked = 0


class SchemaMismatch(AssertionError):
    pass


@functools.cache
def _envelope() -> Draft202012Validator:
    doc = schema_document()
    return Draft202012Validator({"$defs": doc["$defs"], "$ref": doc["$ref"]})


@functools.cache
def _payload(kind: str, action: str) -> Draft202012Validator | None:
    ref = payload_ref(kind, action)
    if ref is None:
        return None
    return Draft202012Validator({"$defs": schema_document()["$defs"], **ref})


def _problems(frame: Any) -> list[str]:
    found = [e.message for e in _envelope().iter_errors(frame)]
    if found or not isinstance(frame, dict):
        return found
    validator = _payload(str(frame.get("type")), str(frame.get("action")))
    if validator is None:
        return [f"{frame.get('type')} {frame.get('action')!r} is not in the schema"]
    return [f"payload{''.join(f'[{p!r}]' for p in e.absolute_path)}: {e.message}"
            for e in validator.iter_errors(frame.get("payload"))]


def check_received(frame: Any) -> None:
    """Raises ``SchemaMismatch`` if a frame from the server breaks the schema."""
    global checked
    if not enabled:
        return
    checked += 1
    problems = _problems(frame)
    if problems:
        raise SchemaMismatch(f"frame breaks the published schema: {problems[:3]}\n{frame}")


def refused_by_schema(frame: Any) -> bool:
    """Whether the schema refuses a request the test sends."""
    return enabled and bool(_problems(frame))
