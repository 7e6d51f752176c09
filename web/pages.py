"""HTML pages other than the app's own: what a person sees for an unknown page (404), and the
availability of each agent profile for the picker.  (Without a valid token the app's page
itself says so: the server cannot tell, web/static/credential.js can.)

Only page routes get these; /api keeps its JSON errors (DESIGN.md §5).
"""

from __future__ import annotations

import html
import os
import shutil
from collections.abc import Mapping
from typing import Any, Final

from quart import Response

from supervisor.profiles import AgentProfile

__all__ = ["agent_availability", "html_error_page"]

_PAGE: Final = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta name="color-scheme" content="light dark">
  <title>{title} · Turnvisor</title>
  <link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
  <link rel="stylesheet" href="/static/app.css">
</head>
<body>
  <main class="plain-page" data-testid="error-page" data-status="{status}">
    <h1>{title}</h1>
    {body}
  </main>
</body>
</html>
"""

NOT_FOUND_BODY: Final = (
    "<p>There is no page here. The task may have been removed, or the address is mistyped.</p>"
    '<p><a href="/">Go to the task list</a></p>'
)
def html_error_page(status: int, title: str, body_html: str) -> Response:
    """A small static HTML page; ``body_html`` is trusted markup from this module."""
    page = _PAGE.format(title=html.escape(title), status=status, body=body_html)
    resp = Response(page, status=status, content_type="text/html; charset=utf-8")
    resp.headers["Cache-Control"] = "no-store"
    resp.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'none'; "
        "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return resp


def _availability(profile: AgentProfile, environ: Mapping[str, str]) -> dict[str, Any]:
    if profile.executor != "local":
        # Runs elsewhere (agentctl, container): only that side knows; let the launch tell.
        return {"available": True, "reason": None}
    if not profile.command:
        return {"available": False, "reason": "the profile has no command"}
    program = profile.command[0]
    path = profile.env.get("PATH", environ.get("PATH", os.defpath))
    if shutil.which(program, path=path) is None:
        return {"available": False, "reason": f"the program “{program}” is not installed here"}
    return {"available": True, "reason": None}


def agent_availability(profiles: Mapping[str, AgentProfile],
                       environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """name -> {available, reason}: whether each profile's program can be found on this machine."""
    env = os.environ if environ is None else environ
    return {name: _availability(p, env) for name, p in sorted(profiles.items())}
