"""Input validation at the edge: one clear error per bad field, never a traceback."""

from __future__ import annotations

from typing import Any

__all__ = ["BadInput", "opt_bool", "opt_flag", "opt_int", "opt_str", "opt_text", "req_bool",
           "req_int", "req_str"]


class BadInput(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def req_str(payload: dict[str, Any], name: str, *, max_len: int = 200) -> str:
    value = payload.get(name)
    if value is None:
        raise BadInput("VALIDATION_ERROR", f"{name} is required")
    if not isinstance(value, str):
        raise BadInput("VALIDATION_ERROR", f"{name} must be a string")
    if not value or len(value) > max_len:
        raise BadInput("VALIDATION_ERROR", f"{name} must be 1 to {max_len} characters")
    try:
        # JSON may spell a lone surrogate ("\ud800"), which has no UTF-8 form:
        # SQLite (and an agent's stdin) would refuse it later, as an internal error.
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput("VALIDATION_ERROR", f"{name} is not valid Unicode") from None
    return value


def opt_str(payload: dict[str, Any], name: str, *, max_len: int = 200) -> str | None:
    if payload.get(name) is None:
        return None
    return req_str(payload, name, max_len=max_len)


def opt_int(payload: dict[str, Any], name: str, *, lo: int, hi: int) -> int | None:
    value = payload.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BadInput("VALIDATION_ERROR", f"{name} must be an integer from {lo} to {hi}")
    return value


def opt_bool(payload: dict[str, Any], name: str) -> bool:
    value = payload.get(name, False)
    if not isinstance(value, bool):
        raise BadInput("VALIDATION_ERROR", f"{name} must be true or false")
    return value


def opt_flag(payload: dict[str, Any], name: str) -> bool | None:
    """A boolean that may be left out (None: leave the value as it is)."""
    if payload.get(name) is None:
        return None
    return opt_bool(payload, name)


def opt_text(payload: dict[str, Any], name: str, *, max_len: int) -> str | None:
    """A string that may be left out, or empty (clearing what it names)."""
    if payload.get(name) == "":
        return ""
    return opt_str(payload, name, max_len=max_len)


def req_int(payload: dict[str, Any], name: str, *, lo: int, hi: int) -> int:
    value = opt_int(payload, name, lo=lo, hi=hi)
    if value is None:
        raise BadInput("VALIDATION_ERROR", f"{name} is required")
    return value


def req_bool(payload: dict[str, Any], name: str) -> bool:
    if name not in payload or payload[name] is None:
        raise BadInput("VALIDATION_ERROR", f"{name} is required")
    return opt_bool(payload, name)
