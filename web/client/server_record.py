"""``DATA_DIR/server.json``, trusted only when a live Turnvisor wrote it (issue 40, item 9).

The record names a URL and the token to send there, so whoever can write it
can have the command-line client send a token anywhere: an agent that planted
one (in a data dir under a home it could write) received ``TURNVISOR_TOKEN``.
The client therefore uses a record only when all of this holds:

- it is a regular file (opened without following a symbolic link), owned by
  this user, mode 0600, in a data dir owned by this user that nobody else may
  write, and it names that very data dir (same device and inode);
- the pid it records is alive, runs as this user, in this network namespace,
  and is a ``turnvisor serve`` (its command line);
- that pid holds the data dir's own lock (``serve.lock``: an exclusive
  ``flock`` on a descriptor it has open, as ``/proc/PID/fdinfo`` shows): the
  one server of this data dir, not a server of another one;
- that pid holds the port of the record's URL: a listening socket on it is
  one of the pid's descriptors, it covers the URL's address, and no other
  socket listens on that port.

``/proc/PID`` is opened once and every later look is relative to it, so a pid
that dies and is reused meanwhile fails the checks instead of passing them
for another process.  A check that passes and then goes stale (the server
killed and its port taken before the client connects) would take a process
that can signal this user's server and bind its port: one running as this
user outside every sandbox, which can read the record (and the token in it)
anyway.  And the client never pairs a token from the environment or a flag
with a URL from this file (``connection.find_server``): only the record's own
token goes to the record's own URL.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["RECORD_NAME", "ServerRecord", "UntrustedRecord", "read_trusted_record"]

RECORD_NAME = "server.json"
#: ``web.startup.LOCK_NAME`` (not imported: the client does not load the server's modules).
LOCK_NAME = "serve.lock"
#: A record is a few hundred bytes; more is not one.
MAX_RECORD_BYTES = 64 * 1024
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


class UntrustedRecord(Exception):
    """The record exists but is not to be trusted; the message says why."""


@dataclass(frozen=True, slots=True)
class ServerRecord:
    url: str
    token: str
    pid: int


def read_trusted_record(data_dir: Path) -> ServerRecord | None:
    """The record of the server running on ``data_dir``; None if there is none
    (no data dir, no record).  ``UntrustedRecord`` if one is there but fails a check."""
    try:
        dir_fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UntrustedRecord(f"the data dir cannot be opened ({exc.strerror or exc})") from None
    try:
        raw = _read_record_file(dir_fd)
        if raw is None:
            return None
        _check_data_dir(dir_fd)
        record, named_dir = _parse(raw)
        _check_names_this_dir(dir_fd, named_dir)
        _check_server(record, dir_fd)
        return record
    finally:
        os.close(dir_fd)


def _read_record_file(dir_fd: int) -> bytes | None:
    try:
        # O_NONBLOCK: a FIFO planted under the name must not hang the client.
        fd = os.open(RECORD_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UntrustedRecord("it is a symbolic link") from None
        raise UntrustedRecord(f"it cannot be opened ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UntrustedRecord("it is not a regular file")
        if st.st_uid != os.geteuid():
            raise UntrustedRecord(f"it is owned by uid {st.st_uid}, not by you ({os.geteuid()})")
        if stat.S_IMODE(st.st_mode) != 0o600:
            raise UntrustedRecord(f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0600")
        if st.st_size > MAX_RECORD_BYTES:
            raise UntrustedRecord(f"it is {st.st_size} bytes, not a server record")
        return os.read(fd, MAX_RECORD_BYTES)
    finally:
        os.close(fd)


def _check_data_dir(dir_fd: int) -> None:
    st = os.fstat(dir_fd)
    if st.st_uid != os.geteuid():
        raise UntrustedRecord(f"its data dir is owned by uid {st.st_uid}, not by you")
    if st.st_mode & 0o022:
        raise UntrustedRecord(f"its data dir is writable by others "
                              f"(mode {stat.S_IMODE(st.st_mode):04o})")


def _parse(raw: bytes) -> tuple[ServerRecord, str]:
    try:
        data = json.loads(raw)
    except ValueError:
        raise UntrustedRecord("it is not JSON") from None
    if not isinstance(data, dict):
        raise UntrustedRecord("it is not a server record")
    url, token, pid, named_dir = (data.get(k) for k in ("url", "token", "pid", "data_dir"))
    if not (isinstance(url, str) and url and isinstance(token, str) and token):
        raise UntrustedRecord("it has no url and token")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise UntrustedRecord("it has no pid")
    if not isinstance(named_dir, str) or not named_dir:
        raise UntrustedRecord("it names no data dir (written by an older Turnvisor: "
                              "restart the server)")
    return ServerRecord(url.split("?", 1)[0].rstrip("/"), token, pid), named_dir


def _check_names_this_dir(dir_fd: int, named_dir: str) -> None:
    here = os.fstat(dir_fd)
    try:
        named = os.stat(named_dir)
    except OSError:
        named = None
    if named is None or (named.st_dev, named.st_ino) != (here.st_dev, here.st_ino):
        raise UntrustedRecord(f"it names another data dir ({named_dir})")


def _endpoint(url: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    parts = urlsplit(url)
    try:
        host = ipaddress.ip_address(parts.hostname or "")
        port = parts.port
    except ValueError:
        host, port = None, None
    if parts.scheme not in ("http", "https") or host is None or not port:
        raise UntrustedRecord(f"its url {url} is not http://ADDRESS:PORT")
    return host, port


def _check_server(record: ServerRecord, dir_fd: int) -> None:
    host, port = _endpoint(record.url)
    pid = record.pid
    try:
        proc_fd = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UntrustedRecord(f"pid {pid} is not running") from None
    try:
        try:
            if os.fstat(proc_fd).st_uid != os.geteuid():
                raise UntrustedRecord(f"pid {pid} is not yours")
            if not _is_serve(_read_at(proc_fd, "cmdline").split(b"\0")):
                raise UntrustedRecord(f"pid {pid} is not a turnvisor serve")
            mine, theirs = os.stat("/proc/self/ns/net"), os.stat("ns/net", dir_fd=proc_fd)
            if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
                raise UntrustedRecord(f"pid {pid} is in another network namespace")
            sockets = _holds(proc_fd, dir_fd, pid)
            _check_port(proc_fd, sockets, host, port, pid)
        except (ProcessLookupError, FileNotFoundError):
            # Its /proc entries went away between two looks: it ended meanwhile.
            raise UntrustedRecord(f"pid {pid} is not running") from None
        except PermissionError:
            raise UntrustedRecord(f"pid {pid} cannot be inspected (not yours)") from None
    finally:
        os.close(proc_fd)


def _read_at(dir_fd: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _is_serve(argv: list[bytes]) -> bool:
    """``turnvisor [opts] serve …``, ``python …/turnvisor serve …``,
    ``python -m web[.cli] serve …`` or ``python -m web`` (which serves)."""
    args = [a.decode(errors="replace") for a in argv if a]
    for i, arg in enumerate(args):
        if os.path.basename(arg) == "turnvisor":
            return "serve" in args[i + 1:]
        if arg == "-m" and i + 1 < len(args) and args[i + 1] in ("web", "web.cli"):
            rest = args[i + 2:]
            return "serve" in rest or (args[i + 1] == "web" and not rest)
    return False


def _holds(proc_fd: int, dir_fd: int, pid: int) -> set[int]:
    """The socket inodes among the pid's descriptors; ``UntrustedRecord`` unless
    one of its descriptors is the data dir's lock file with an exclusive flock on it."""
    try:
        lock = os.stat(LOCK_NAME, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        lock = None
    fds_fd = os.open("fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=proc_fd)
    sockets: set[int] = set()
    locked = False
    try:
        for name in os.listdir(fds_fd):
            try:
                target = os.readlink(name, dir_fd=fds_fd)
            except FileNotFoundError:
                continue  # closed meanwhile
            if target.startswith("socket:["):
                sockets.add(int(target[len("socket:["):-1]))
            elif (lock is not None and not locked and stat.S_ISREG(lock.st_mode)
                  and os.path.basename(target) == LOCK_NAME):
                try:
                    held = os.stat(name, dir_fd=fds_fd)  # the open file itself
                except FileNotFoundError:
                    continue
                if (held.st_dev, held.st_ino) == (lock.st_dev, lock.st_ino):
                    locked = _flocked(proc_fd, name)
    finally:
        os.close(fds_fd)
    if not locked:
        raise UntrustedRecord(f"pid {pid} does not hold this data dir's lock "
                              "(it serves another data dir, or none)")
    return sockets


def _flocked(proc_fd: int, fd_name: str) -> bool:
    """Whether the pid's descriptor ``fd_name`` carries an exclusive flock."""
    info = _read_at(proc_fd, f"fdinfo/{fd_name}").decode(errors="replace")
    return any(line.startswith("lock:") and "FLOCK" in line and "WRITE" in line
               for line in info.splitlines())


def _listeners(proc_fd: int, port: int
               ) -> list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """(address, inode) of every TCP socket listening on ``port`` in the pid's
    network namespace (which is this one)."""
    found = []
    for table in ("net/tcp", "net/tcp6"):
        try:
            text = _read_at(proc_fd, table).decode()
        except FileNotFoundError:
            continue  # no IPv6
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            addr_hex, port_hex = fields[1].split(":")
            if int(port_hex, 16) != port:
                continue
            found.append((_address(addr_hex), int(fields[9])))
    return found


def _address(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp's address: 32-bit words printed in the host's byte order."""
    raw = bytes.fromhex(hex_addr)
    if sys.byteorder == "big":
        return ipaddress.ip_address(raw)
    packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(packed)


def _covers(listening: ipaddress.IPv4Address | ipaddress.IPv6Address,
            host: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if listening.is_unspecified:
        return listening.version == host.version or listening.version == 6
    if isinstance(listening, ipaddress.IPv6Address) and listening.ipv4_mapped is not None:
        listening = listening.ipv4_mapped
    return listening == host


def _check_port(proc_fd: int, sockets: set[int],
                host: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int,
                pid: int) -> None:
    listeners = _listeners(proc_fd, port)
    foreign = [addr for addr, inode in listeners if inode not in sockets]
    if foreign:
        raise UntrustedRecord(f"port {port} is held by another process ({foreign[0]})")
    if not any(_covers(addr, host) for addr, _ in listeners):
        raise UntrustedRecord(f"pid {pid} does not listen on {host} port {port}")
