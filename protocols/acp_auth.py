"""ACP authentication, read and written for ``AcpClient`` (protocols/acp.py), sans-IO.

``initialize``'s answer lists ``authMethods``: each ``{id, name, description}``
and, after the ACP auth RFD, a ``type`` saying how it authenticates:

- ``agent`` (the default when no ``type`` is given): the agent does it itself
  (a browser login it opens, a file it reads); ``authenticate {methodId}``.
- ``env_var`` with ``varName`` (and a ``link`` where a key is made): the agent
  reads a key from that variable of its environment, so the key is given at
  its next start, then ``authenticate {methodId}``.
- ``terminal`` with ``args`` (and ``env``): the person runs the agent's own
  command with those arguments in a terminal, then ``authenticate``.

gemini-cli 0.61 names no type but marks its key method ``_meta: {"api-key":
{...}}``: it takes the key as ``authenticate``'s ``_meta["api-key"]``.

``session/new``/``load``/``resume`` answered with error ``-32000`` (ACP's
``auth_required``) means the agent needs one of them first: not a failed start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

__all__ = ["AUTH_REQUIRED", "AuthKind", "AuthMethod", "AuthRequired", "authenticate_params",
           "read_auth_methods"]

#: ACP's ``auth_required`` error code.
AUTH_REQUIRED: Final = -32000
#: How a method is carried out: a ``key`` the person gives, a ``terminal``
#: command the person runs, or the ``agent`` doing it on its own.
AuthKind: TypeAlias = Literal["key", "terminal", "agent"]
#: Kept short: these are shown in a card, not documents.
_TEXT_CHARS: Final = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthMethod:
    id: str
    name: str
    description: str = ""
    kind: AuthKind = "agent"
    #: ``env_var``: the variable the agent reads its key from.
    var_name: str | None = None
    #: ``env_var``: where a key is made (a web page), as the agent said it.
    link: str | None = None
    #: ``terminal``: the arguments to run the agent's command with, and its env.
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=())
    #: The key goes as ``authenticate``'s ``_meta["api-key"]`` (gemini-cli).
    key_in_meta: bool = False

    def dto(self) -> dict[str, Any]:
        """What a client is shown (never a key: a method holds none)."""
        return {"id": self.id, "name": self.name, "description": self.description,
                "kind": self.kind, "var_name": self.var_name, "link": self.link}


class AuthRequired(Exception):
    """The agent will not open a session before a login (ACP ``auth_required``;
    Codex: ``account/read`` says logged out): ``methods`` are the ways it offers."""

    def __init__(self, methods: tuple[AuthMethod, ...], message: str = "") -> None:
        super().__init__(message or "the agent needs a login")
        self.methods = methods


def _text(value: object) -> str:
    return value[:_TEXT_CHARS] if isinstance(value, str) else ""


def _read_one(raw: object) -> AuthMethod | None:
    if not isinstance(raw, dict):
        return None
    mid = raw.get("id")
    if not isinstance(mid, str) or not mid:
        return None
    name = _text(raw.get("name")) or mid
    description = _text(raw.get("description"))
    kind = raw.get("type", "agent")
    meta = raw.get("_meta")
    if kind == "env_var":
        var = raw.get("varName")
        if not isinstance(var, str) or not var:
            return None  # a key with nowhere to go cannot be given
        return AuthMethod(id=mid, name=name, description=description, kind="key",
                          var_name=var, link=_text(raw.get("link")) or None)
    if kind == "terminal":
        args = raw.get("args", [])
        env = raw.get("env", {})
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            args = []
        if not isinstance(env, dict):
            env = {}
        return AuthMethod(id=mid, name=name, description=description, kind="terminal",
                          args=tuple(args), env=tuple(
                              (k, v) for k, v in env.items()
                              if isinstance(k, str) and isinstance(v, str)))
    if isinstance(meta, dict) and isinstance(meta.get("api-key"), dict):
        return AuthMethod(id=mid, name=name, description=description, kind="key",
                          key_in_meta=True)
    # ``agent``, and a type from a later revision: the agent does it itself.
    return AuthMethod(id=mid, name=name, description=description)


def read_auth_methods(result: object) -> tuple[AuthMethod, ...]:
    """The ``authMethods`` of ``initialize``'s answer; one without an id (or an
    ``env_var`` without its ``varName``) is left out, a duplicate id too."""
    raw = result.get("authMethods") if isinstance(result, dict) else None
    if not isinstance(raw, list):
        return ()
    seen: set[str] = set()
    out = []
    for item in raw:
        method = _read_one(item)
        if method is not None and method.id not in seen:
            seen.add(method.id)
            out.append(method)
    return tuple(out)


def authenticate_params(method: AuthMethod, key: str | None) -> dict[str, Any]:
    """``authenticate``'s params: ``{methodId}``, and the key where the method
    takes it there (``_meta["api-key"]``); an ``env_var`` key went with the
    agent's environment, never here."""
    params: dict[str, Any] = {"methodId": method.id}
    if method.key_in_meta and key:
        params["_meta"] = {"api-key": key}
    return params
