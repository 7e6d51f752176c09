"""``turnvisor images load``: the container executor's image put on an engine.

An engine on another host (``ssh://``) must have the image its container
profiles run (scripts/build_agent_image.sh builds it here).  ``load_image``
reads the image from the engine here (``GET /images/NAME/get``: the archive
``podman save`` / ``docker save`` write) and sends it, as it is read, to the
target engine's ``POST /images/load`` through the same socket forwarded over
SSH the container executor uses (ssh_engine.reach_engine: host key checked,
``BatchMode``).  Never whole in memory: one chunk at a time, each read and
write bounded (``Timeouts.agent_request_s``), the whole transfer bounded by
``timeout_s``.

A container start whose engine lacks the image names this command
(container.missing_image_hint).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import trio

from ..config import Config
from ..profiles import AgentProfile
from ..ssh_target import SshTarget
from .container import default_image
from .engine_api import EngineAddress, EngineClient, EngineError
from .ssh_engine import profile_engine, reach_engine

__all__ = ["Loaded", "load_image"]


@dataclass(frozen=True, slots=True)
class Loaded:
    image: str
    target: str
    #: Bytes sent.
    size: int
    #: What the target engine said ("Loaded image: ...").
    said: tuple[str, ...]


async def load_image(config: Config, target: EngineAddress, *, image: str | None = None,
                     source: EngineAddress | None = None, profile: AgentProfile | None = None,
                     keys: SshTarget | None = None, timeout_s: float = 1800.0) -> Loaded:
    """Send ``image`` (default: the profile's, else ``default_image()``) from
    ``source`` (default: ``DOCKER_HOST``'s engine, as for a local container
    profile) to ``target``; ``EngineError`` saying what failed."""
    image = image or (profile.image if profile is not None else None) or default_image()
    source = source or profile_engine(None)
    if source.kind == "ssh":
        raise EngineError(f"{source}: the image is read from an engine on this machine "
                          "(unix:// or tcp://), not over ssh")
    request_s = config.timeouts.agent_request_s
    with trio.move_on_after(timeout_s) as scope:
        async with EngineClient(source, timeout_s=request_s) as here:
            if not await here.has_image(image):
                raise EngineError(f"image {image} is not on the engine here ({source}): "
                                  "build it with scripts/build_agent_image.sh, or name "
                                  "another with --image")
            async with reach_engine(config, profile, target, keys=keys) as reached, \
                    EngineClient(reached.address, timeout_s=request_s) as there:
                await there.ping()
                sent = 0

                async def counted(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
                    nonlocal sent
                    async for chunk in chunks:
                        sent += len(chunk)
                        yield chunk

                async with here.image_archive(image) as archive:
                    said = await there.load_image(counted(archive))
                if not await there.has_image(image):
                    raise EngineError(f"{target} took the archive but does not list "
                                      f"{image}: {'; '.join(said) or 'it said nothing'}")
                return Loaded(image, str(target), sent, said)
    assert scope.cancelled_caught
    raise EngineError(f"sending {image} to {target} did not finish within {timeout_s:g}s")
