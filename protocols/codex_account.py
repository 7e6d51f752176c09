"""The Codex app-server's account calls (its login), sans-IO.

``account/read {refreshToken: false}`` answers ``{account, requiresOpenaiAuth}``:
a Codex whose provider needs OpenAI credentials (``requiresOpenaiAuth``) and
has no ``account`` is logged out, and would fail its first turn.  It offers two
ways in, as ``AuthMethod`` values (protocols/acp_auth.py) so a client shows
both dialects alike:

- ``apiKey`` (a key): ``account/login/start {type: "apiKey", apiKey}``, answered
  ``{type: "apiKey"}``; Codex keeps the key in its own home (``CODEX_HOME``).
- ``chatgpt`` (a terminal): ``codex login`` run by the person with the agent's
  home; ``account/read`` then says logged in.  (The app-server's own browser
  flow, ``{type: "chatgpt"}`` → ``authUrl`` and ``account/login/completed``,
  needs the agent kept running for its local callback: ``login_url`` reads
  the URL where a caller runs it.)
"""

from __future__ import annotations

from typing import Any, Final

from .acp_auth import AuthMethod
from .jsonrpc import RpcConnection

__all__ = ["CODEX_METHODS", "account_read", "login_start", "login_url", "needs_login"]

CODEX_METHODS: Final = (
    AuthMethod(id="apiKey", name="OpenAI API key", kind="key",
               description="Codex keeps the key in its own home"),
    AuthMethod(id="chatgpt", name="Sign in with ChatGPT", kind="terminal", args=("login",),
               description="Run the command in a terminal on this machine, sign in in the "
                           "browser it opens, then choose this again"),
)


def account_read(rpc: RpcConnection) -> tuple[int, bytes]:
    return rpc.send_request("account/read", {"refreshToken": False})


def needs_login(result: object) -> bool:
    """``account/read``'s answer says Codex is logged out and needs to be in."""
    return (isinstance(result, dict) and result.get("requiresOpenaiAuth") is True
            and result.get("account") is None)


def login_start(rpc: RpcConnection, method_id: str, key: str | None) -> tuple[int, bytes]:
    """``account/login/start`` for ``apiKey`` (ValueError without a key) or
    ``chatgpt``; ValueError for another method."""
    params: dict[str, Any]
    if method_id == "apiKey":
        if not key:
            raise ValueError("the apiKey login needs a key")
        params = {"type": "apiKey", "apiKey": key}
    elif method_id == "chatgpt":
        params = {"type": "chatgpt"}
    else:
        raise ValueError(f"Codex offers no login method {method_id!r}")
    return rpc.send_request("account/login/start", params)


def login_url(result: object) -> str | None:
    """``account/login/start``'s ``authUrl`` (the browser flow), else None."""
    url = result.get("authUrl") if isinstance(result, dict) else None
    return url if isinstance(url, str) and url else None
