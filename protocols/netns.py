"""The agent's own network namespace, with outbound access through passt's ``pasta``.

bwrap makes the namespace (``--unshare-net``: nothing but a loopback of its
own, no route out, none of the host's abstract unix sockets); the group
leader (protocols/leader.py) attaches ``pasta`` to it before the agent
starts.  ``pasta`` gives the namespace a tap interface whose traffic it
relays through ordinary sockets of the backend's user:

- outbound TCP/UDP to the world works (model providers);
- the host's loopback is NOT reachable: ``--no-map-gw`` keeps the gateway
  address from standing for the host, and the namespace's own 127.0.0.1 is
  its own — except the ``host_ports`` a profile names (``-T``: a connection
  to 127.0.0.1:PORT inside is made to the host's 127.0.0.1:PORT: a local model
  server, the tests' fake provider);
- nothing is forwarded into the namespace (``-t none -u none``).

What it does not stop: the host's non-loopback addresses and the rest of the
network are reachable like any outbound address (docs/security.md).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .tools import current as current_tools

__all__ = ["NetworkMode", "NetworkPlan", "helper_argv", "resolve_network"]

NetworkMode = Literal["isolated", "host"]


def resolve_network(requested: str | None) -> NetworkMode:
    """A profile's ``network``: None (not set) is ``isolated`` where passt's
    pasta is installed, else ``host`` (said at start, as a missing bwrap is);
    an explicit ``isolated`` stays so (its launch fails, saying why, without
    pasta)."""
    if requested == "host":
        return "host"
    if requested == "isolated" or current_tools().get("pasta") is not None:
        return "isolated"
    return "host"


@dataclass(frozen=True, slots=True)
class NetworkPlan:
    """An isolated namespace: the helper program and the host ports let in."""

    helper: str
    host_ports: tuple[int, ...] = ()


def helper_argv(plan: NetworkPlan, *, uid: int) -> list[str]:
    """``pasta``'s argv, ``{pid}`` standing for the sandbox's pid and
    ``{userns}`` for the user namespace owning its network (the leader fills
    them in).  A root backend's pasta keeps root's own user namespace (it owns
    the sandbox's); another joins that user namespace first."""
    ports = ",".join(str(p) for p in sorted(set(plan.host_ports))) or "none"
    join = (["--runas", "0:0", "--netns", "/proc/{pid}/ns/net"] if uid == 0 else
            ["--userns", "{userns}", "--netns", "/proc/{pid}/ns/net"])
    return [plan.helper, *join, "--config-net", "--no-map-gw", "-t", "none", "-u", "none",
            "-T", ports, "-U", "none", "-f", "-q"]


@dataclass(slots=True)
class NetworkFds:
    """The two pipes between bwrap and the leader: bwrap's ``--info-fd``
    (it writes the sandbox's pid) and ``--block-fd`` (it waits to start the
    agent until the leader writes, once the network is up)."""

    info_r: int
    info_w: int
    block_r: int
    block_w: int

    @classmethod
    def open(cls) -> NetworkFds:
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        return cls(info_r, info_w, block_r, block_w)

    def bwrap_options(self, *, unshare_net: bool) -> list[str]:
        return [*(["--unshare-net"] if unshare_net else []),
                "--info-fd", str(self.info_w), "--block-fd", str(self.block_r)]

    def leader_options(self, helper: Sequence[str] | None,
                       ports: Sequence[int] = ()) -> list[str]:
        """The leader's options (protocols/leader.py): its ends of the pipes, the
        helper to attach (None: the agent shares the host's network) and the
        ports it forwards (the agent starts once each listens)."""
        out = ["--info", str(self.info_r), "--block", str(self.block_w)]
        out += [a for p in sorted(set(ports)) for a in ("--port", str(p))]
        out += [a for arg in helper or () for a in ("--helper", arg)]
        return out

    def all(self) -> tuple[int, ...]:
        return (self.info_r, self.info_w, self.block_r, self.block_w)
