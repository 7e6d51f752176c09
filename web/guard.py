"""Two fences in front of authentication: the Host allow-list and the
per-peer throttle of failed authentication (issue 27).

Host: a page on ``evil.example`` whose name is re-pointed at 127.0.0.1 (DNS
rebinding) reaches this server as the same origin as itself, so its requests
carry ``Host: evil.example``; only the names this server is known by are
answered.  An IP literal is never a rebinding (no DNS involved), so on a
wildcard bind (``0.0.0.0``, ``::``) any IP literal is accepted as well.

Throttle: tokens are long enough that guessing is hopeless; the throttle keeps
a peer that tries anyway from costing more than a few comparisons and log
lines per window.  Sans-IO: the caller passes the time.
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["FailureThrottle", "HostCheck", "host_name"]

#: Names every server answers to, whatever it is bound to.
LOOPBACK_NAMES: Final = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS: Final = frozenset({"0.0.0.0", "::", ""})


def host_name(host: str | None) -> str | None:
    """The name in a Host header, lower-case, without its port or IPv6 brackets."""
    if not host:
        return None
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else None
    name, _, port = host.rpartition(":")
    if name and port.isdigit():
        host = name
    return host.rstrip(".") or None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostCheck:
    def __init__(self, bound: str, extra: Iterable[str] = ()) -> None:
        bound = bound.strip("[]").lower()
        self._wildcard = bound in WILDCARD_BINDS
        self._names = frozenset(LOOPBACK_NAMES | {bound} | {
            n for n in (host_name(e) for e in extra) if n is not None})

    def refusal(self, host: str | None) -> str | None:
        """Why a request with this Host header is refused, or None."""
        name = host_name(host)
        if name is not None and (name in self._names or (self._wildcard and _is_ip(name))):
            return None
        shown = (host or "")[:100]
        return (f"this server does not answer to Host {shown!r} (add the name to [server] "
                "allowed_hosts in turnvisor.toml if it is really this server)")


@dataclass
class _Peer:
    window_start: float
    failures: int = 0


class FailureThrottle:
    """At most ``limit`` failed authentications per peer per ``window_s``; then
    the peer is refused (429) until its window ends.  At most ``max_peers``
    peers are remembered (the least recently failing one is forgotten first)."""

    def __init__(self, *, limit: int = 20, window_s: float = 60.0,
                 max_peers: int = 4096) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_peers = max_peers
        self._peers: OrderedDict[str, _Peer] = OrderedDict()

    def retry_after(self, peer: str, now: float) -> float | None:
        """Seconds until ``peer`` may try again, or None if it may now."""
        state = self._peers.get(peer)
        if state is None:
            return None
        left = state.window_start + self.window_s - now
        if left <= 0:
            del self._peers[peer]
            return None
        return left if state.failures >= self.limit else None

    def failed(self, peer: str, now: float) -> bool:
        """Count a failure; True when it is the one that blocks the peer."""
        state = self._peers.get(peer)
        if state is None or now - state.window_start >= self.window_s:
            state = _Peer(now)
        self._peers[peer] = state
        self._peers.move_to_end(peer)
        while len(self._peers) > self.max_peers:
            self._peers.popitem(last=False)
        state.failures += 1
        return state.failures == self.limit

    def __len__(self) -> int:
        return len(self._peers)
