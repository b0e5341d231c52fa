"""Which etcd endpoints accept a TCP connection right now, all tried at once.

Asked before etcdctl: etcdctl waits out its whole command timeout on an endpoint nobody listens
on (a member starting, or one removed a moment ago), while a refused connection answers at once.
"""
from __future__ import annotations

import errno
import selectors
import socket
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

IN_PROGRESS = (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN)


def resolve(url: str) -> tuple[int, Any]:
    """(address family, socket address) of the URL's host and port: IPv4 or IPv6, whichever the
    name resolves to first (bracketed IPv6 literals included)."""
    parts = urlsplit(url)
    info = socket.getaddrinfo(parts.hostname, parts.port, socket.AF_UNSPEC, socket.SOCK_STREAM)[0]
    return info[0], info[4]


def accepting_connections(urls: Sequence[str], timeout_seconds: float) -> set[str]:
    """The URLs among `urls` whose host:port accepted a TCP connection within `timeout_seconds`.
    A name that does not resolve counts as not accepting."""
    accepted: set[str] = set()
    pending: dict[socket.socket, str] = {}
    for url in dict.fromkeys(urls):
        try:
            family, address = resolve(url)
        except (OSError, ValueError):
            continue
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        result = sock.connect_ex(address)
        if result in IN_PROGRESS:
            pending[sock] = url
            continue
        if result == 0:
            accepted.add(url)
        sock.close()
    deadline = time.monotonic() + timeout_seconds
    with selectors.DefaultSelector() as selector:
        for sock in pending:
            selector.register(sock, selectors.EVENT_WRITE, data=sock)
        while pending and (remaining := deadline - time.monotonic()) > 0:
            for key, _ in selector.select(remaining):
                done: socket.socket = key.data
                selector.unregister(done)
                if done.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    accepted.add(pending[done])
                del pending[done]
                done.close()
    for sock in pending:
        sock.close()
    return accepted
