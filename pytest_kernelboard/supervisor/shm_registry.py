"""The shared-memory registry every worker talks to instead of the judge's torch_shm_manager.

Runs as a process of its own, started by the judge (shm_manager.registry_socket), with the
standard library alone (`python -I -S shm_registry.py SOCKET`). It speaks torch_shm_manager's
protocol: a client sends 68-byte records (pid, a free flag, a shared-memory name), a
registration is answered "OK", and at the end every registered name still present is unlinked,
so a worker killed while it held a tensor leaves nothing in /dev/shm once the judge exits.

Why not torch's own manager: it ends on the first client that misbehaves. A record that stops
short, or a client gone before it reads its "OK" (a worker killed while it maps a tensor, a
rank of a failed case), throws out of its loop and the manager exits; the judge's connection to
it is then broken for good ("Broken pipe" on every later CPU tensor), and torch starts no
second one. This registry reads each client apart, never waits on one, and drops a client that
errs, so nothing a worker does reaches another worker or the judge.

It ends when the judge does: the judge holds the write end of its stdin.
"""

from __future__ import annotations

import errno
import os
import resource
import selectors
import signal
import socket
import struct
import sys

RECORD = struct.Struct("=ib60s3x")  # torch's AllocInfo: pid_t pid; char free; char name[60]
MAX_CLIENTS = 4096  # a worker that floods connections is refused past this, not the registry
READY = b"ready\n"


def shm_name(field: bytes) -> str | None:
    """The shared-memory object a record names, or None where it names none that could be
    one (no leading slash, a slash inside, not NUL-terminated within its 60 bytes)."""
    raw, nul, _ = field.partition(b"\0")
    if not nul or not raw.startswith(b"/") or b"/" in raw[1:] or len(raw) < 2:
        return None
    return raw.decode("latin-1")


def shm_path(name: str) -> str:
    return "/dev/shm" + name


class Registry:
    """The names registered so far, and the clients' unread bytes."""

    def __init__(self, server: socket.socket) -> None:
        self.server = server
        self.names: set[str] = set()
        self.pending: dict[socket.socket, bytearray] = {}
        self.selector = selectors.DefaultSelector()
        self.selector.register(server, selectors.EVENT_READ, "server")
        self.accepting = True
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "judge")

    def serve(self) -> None:
        while True:
            for key, _ in self.selector.select():
                if key.data == "judge":
                    if not os.read(key.fd, 4096):  # the judge has exited
                        return
                elif key.data == "server":
                    self._accept()
                else:
                    self._read(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            client, _ = self.server.accept()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):  # until a client goes: no spinning
                self._listening(False)
            return
        if len(self.pending) >= MAX_CLIENTS:
            client.close()
            return
        client.setblocking(False)
        self.pending[client] = bytearray()
        self.selector.register(client, selectors.EVENT_READ, "client")

    def _read(self, client: socket.socket) -> None:
        try:
            data = client.recv(RECORD.size * 64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(client)
            return
        buffer = self.pending[client]
        buffer += data
        while len(buffer) >= RECORD.size:
            _, free, field = RECORD.unpack_from(buffer)
            del buffer[: RECORD.size]
            if not self._record(client, bool(free), field):
                self._drop(client)
                return

    def _record(self, client: socket.socket, free: bool, field: bytes) -> bool:
        """Keep or forget one name; a registration is answered. False: the client is gone."""
        name = shm_name(field)
        if free:
            if name is not None and not os.path.exists(shm_path(name)):
                self.names.discard(name)
            return True
        if name is not None:
            self.names.add(name)
        try:
            return client.send(b"OK") == 2
        except OSError:  # gone before its answer (or not reading): only this client goes
            return False

    def _drop(self, client: socket.socket) -> None:
        self.selector.unregister(client)
        self.pending.pop(client, None)
        client.close()
        self._listening(True)

    def _listening(self, on: bool) -> None:
        if on and not self.accepting:
            self.selector.register(self.server, selectors.EVENT_READ, "server")
        elif not on and self.accepting:
            self.selector.unregister(self.server)
        self.accepting = on

    def unlink_left(self) -> None:
        for name in self.names:
            try:
                os.unlink(shm_path(name))
            except OSError:
                pass


def main(path: str) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the judge's ^C is the judge's; its exit ends us
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    # As many clients as the system lets one process hold: a worker that floods connections
    # runs out before the registry does.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(128)
    server.setblocking(False)
    registry = Registry(server)
    os.write(sys.stdout.fileno(), READY)
    try:
        registry.serve()
    finally:
        registry.unlink_left()
        server.close()
        try:
            os.unlink(path)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
