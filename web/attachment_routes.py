"""``POST /api/v1/attachments`` (DESIGN.md §19): an upload for a later ``message.add``;
``GET /api/v1/attachments/<id>``: the file again, for the page's thumbnails and links.

The body is the file itself, raw, with its ``Content-Type``; ``?name=`` names
it.  The app's ``before_request`` authenticates it like every API path; the
upload is the caller's workspace's.  The answer: ``{attachment_id, name, mime,
size}`` (201).  Past ``[limits] max_attachment_bytes``: 413, nothing kept.

The file is served with its mime, the caller's workspace's only (another's: 404),
``X-Content-Type-Options: nosniff`` and, unless it is an image,
``Content-Disposition: attachment``: an uploaded HTML or SVG-like text must never
render as a page of this origin (the page's token lives in its storage).

Every other body is capped by ``[limits] max_body_bytes`` (the app's
``MAX_CONTENT_LENGTH``); this path alone gets the attachment cap, given to the
request when Quart makes it (``request_class``), and the body is read chunk by
chunk into ``supervisor.workspace.attachments``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

from quart import Response, request
from quart_trio import QuartTrio
from quart_trio.wrappers.request import TrioRequest

from supervisor.config import Limits
from supervisor.errors import NotFound
from supervisor.orchestrator import Caller
from supervisor.root import Supervisor
from supervisor.workspace.attachments import ALLOWED_IMAGES, AttachmentStore, TooLarge

__all__ = ["ATTACHMENTS_PATH", "add_attachment_routes", "request_class_for", "too_large"]

ATTACHMENTS_PATH = "/api/v1/attachments"


def request_class_for(limits: Limits) -> type[TrioRequest]:
    """Quart's request class, with the attachment cap on the upload path."""

    class Request(TrioRequest):
        def __init__(self, method: str, scheme: str, path: str, *args: Any,
                     **kwargs: Any) -> None:
            if method.upper() == "POST" and path == ATTACHMENTS_PATH:
                kwargs["max_content_length"] = limits.max_attachment_bytes
            super().__init__(method, scheme, path, *args, **kwargs)

    return Request


def too_large(limits: Limits) -> str:
    return (f"attachment larger than {limits.max_attachment_bytes} bytes "
            "(the server's [limits] max_attachment_bytes)")


def attachment_store(sup: Supervisor) -> AttachmentStore:
    return AttachmentStore(sup.config.data_dir, sup.store,
                           sup.config.limits.max_attachment_bytes)


def add_attachment_routes(app: QuartTrio, sup: Supervisor,
                          me: Callable[[], Awaitable[Caller]]) -> None:
    @app.post(ATTACHMENTS_PATH)
    async def upload() -> Response:
        caller = await me()
        try:
            att = await attachment_store(sup).save(
                caller.workspace_id, request.args.get("name"),
                request.headers.get("Content-Type"), request.body)
        except TooLarge:
            body = json.dumps({"error": {"code": "BAD_REQUEST",
                                         "message": too_large(sup.config.limits)}})
            resp = Response(body, status=413, content_type="application/json")
            # The rest of the body is left unread: the connection cannot carry another.
            resp.headers["Connection"] = "close"
            return resp
        return Response(json.dumps(att.to_dto()), status=201,
                        content_type="application/json")

    @app.get(f"{ATTACHMENTS_PATH}/<attachment_id>")
    async def download(attachment_id: str) -> Response:
        caller = await me()
        store = attachment_store(sup)
        [att] = await store.resolve(caller.workspace_id, [attachment_id])  # else 404
        try:
            data = await store.read(att)
        except OSError:
            raise NotFound(f"attachment {attachment_id} is no longer stored") from None
        resp = Response(data, content_type=att.mime)
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Cache-Control"] = "private, no-store"
        if att.mime not in ALLOWED_IMAGES:
            # The name may hold anything: the RFC 5987 form carries it, quoted safely.
            resp.headers["Content-Disposition"] = (
                f"attachment; filename*=UTF-8''{quote(att.name, safe='')}")
        return resp
