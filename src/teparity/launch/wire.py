"""The fork server's framing over a Unix socket: a length-prefixed pickle, with file descriptors passed beside
it (``socket.send_fds``); and the status word a server writes on a rank's status pipe (its pid, then its exit
code)."""

from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

STATUS = struct.Struct("!q")
_LENGTH = struct.Struct("!I")


def send(sock: socket.socket, message: Any, fds: list[int] | None = None) -> None:
    data = pickle.dumps(message)
    frame = _LENGTH.pack(len(data)) + data
    sent = socket.send_fds(sock, [frame], fds) if fds else 0
    if sent < len(frame):  # a send of nothing to a peer that read it all and closed its end raises EPIPE
        sock.sendall(frame[sent:])


def _exactly(sock: socket.socket, size: int, start: bytes = b"") -> bytes:
    data = bytearray(start)
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError("the peer closed the socket")
        data += chunk
    return bytes(data)


def recv(sock: socket.socket, max_fds: int = 0) -> tuple[Any, list[int]]:
    fds: list[int] = []
    if max_fds:
        head, fds, _flags, _address = socket.recv_fds(sock, _LENGTH.size, max_fds)
        if not head:
            raise EOFError("the peer closed the socket")
    else:
        head = b""
    (length,) = _LENGTH.unpack(_exactly(sock, _LENGTH.size, head))
    return pickle.loads(_exactly(sock, length)), fds
