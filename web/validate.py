"""The error of bad input at the edge (the checks themselves are the request
models of web/contract/requests.py): one clear message, never a traceback."""

from __future__ import annotations

__all__ = ["BadInput"]


class BadInput(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
