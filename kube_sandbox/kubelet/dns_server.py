"""The sandbox's cluster DNS: a minimal UDP DNS server answering A queries from the hosts records.

Why a server next to the hosts file: Go programs (etcd, etcdctl) cache /etc/hosts for up to 5 s,
so a member started just now would not resolve in its peers for that long. On a hosts-file miss
Go asks the nameserver in /etc/resolv.conf (bind-mounted to point here), which answers from the
kubelet's current records at once, as CoreDNS does in a real cluster. Names it does not know get
NXDOMAIN: nothing in the sandbox may ask a resolver outside loopback.

Only what resolvers send for A/AAAA lookups is understood: one question, standard query, UDP.
"""
from __future__ import annotations

import logging
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

DNS_PORT = 53
TTL_SECONDS = 5  # what CoreDNS's kubernetes plugin answers with
MAX_MESSAGE_BYTES = 512
RECEIVE_TIMEOUT_SECONDS = 0.5  # how often the serving loop checks for stop

TYPE_A = 1
TYPE_ANY = 255
CLASS_IN = 1
FLAG_RESPONSE = 0x8000
FLAG_AUTHORITATIVE = 0x0400
FLAG_RECURSION_DESIRED = 0x0100
FLAG_RECURSION_AVAILABLE = 0x0080
OPCODE_MASK = 0x7800
RCODE_NOERROR = 0
RCODE_FORMERR = 1
RCODE_NXDOMAIN = 3
RCODE_NOTIMP = 4

Lookup = Callable[[str], Sequence[str]]  # lowercase name without trailing dot -> IPv4 addresses


@dataclass(frozen=True)
class Query:
    ident: int
    flags: int
    name: str  # lowercase, no trailing dot
    qtype: int
    qclass: int
    question: bytes  # the question section as received, echoed in the answer


def parse_query(data: bytes) -> Query | None:
    """The one question of a standard query, or None when `data` is not one we can answer."""
    if len(data) < 12:
        return None
    ident, flags, qdcount = struct.unpack("!HHH", data[:6])
    if flags & FLAG_RESPONSE or qdcount != 1:
        return None
    labels: list[str] = []
    offset = 12
    while True:
        if offset >= len(data):
            return None
        length = data[offset]
        offset += 1
        if length == 0:
            break
        if length & 0xC0 or offset + length > len(data):  # compression pointers never start a question
            return None
        labels.append(data[offset:offset + length].decode("ascii", errors="replace"))
        offset += length
    if offset + 4 > len(data):
        return None
    qtype, qclass = struct.unpack("!HH", data[offset:offset + 4])
    return Query(ident, flags, ".".join(labels).lower(), qtype, qclass, data[12:offset + 4])


def build_response(query: Query, addresses: Sequence[str]) -> bytes:
    """The answer to `query`: its A records when the name is known (no records for other types),
    NXDOMAIN when it is not, NOTIMP for anything but a standard query."""
    if query.flags & OPCODE_MASK:
        rcode = RCODE_NOTIMP
    else:
        rcode = RCODE_NOERROR if addresses else RCODE_NXDOMAIN
    answers = []
    if rcode == RCODE_NOERROR and query.qtype in (TYPE_A, TYPE_ANY) and query.qclass == CLASS_IN:
        for address in addresses:
            # 0xC00C: a pointer to the name in the question, which starts at offset 12.
            answers.append(struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, TTL_SECONDS, 4) + socket.inet_aton(address))
    flags = (FLAG_RESPONSE | FLAG_AUTHORITATIVE | FLAG_RECURSION_AVAILABLE
             | (query.flags & (OPCODE_MASK | FLAG_RECURSION_DESIRED)) | rcode)
    header = struct.pack("!HHHHHH", query.ident, flags, 1, len(answers), 0, 0)
    return header + query.question + b"".join(answers)


def format_error(data: bytes) -> bytes | None:
    """FORMERR for a query we cannot parse but whose id we can echo."""
    if len(data) < 12 or struct.unpack("!H", data[2:4])[0] & FLAG_RESPONSE:
        return None
    return struct.pack("!HHHHHH", struct.unpack("!H", data[:2])[0], FLAG_RESPONSE | RCODE_FORMERR, 0, 0, 0, 0)


def answer(data: bytes, lookup: Lookup) -> bytes | None:
    query = parse_query(data)
    if query is None:
        return format_error(data)
    return build_response(query, lookup(query.name.rstrip(".")))


class DnsServer:
    """Serves `lookup` on UDP `address`:`port` from a daemon thread until `stop()`."""

    def __init__(self, lookup: Lookup, address: str, port: int = DNS_PORT) -> None:
        self.lookup = lookup
        self.address = address
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind((address, port))
        self._socket.settimeout(RECEIVE_TIMEOUT_SECONDS)
        self.port: int = self._socket.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kubelet-dns-server", daemon=True)

    def start(self) -> None:
        self._thread.start()
        log.info("cluster DNS serving on %s:%d/udp", self.address, self.port)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(RECEIVE_TIMEOUT_SECONDS * 4)
        self._socket.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, client = self._socket.recvfrom(MAX_MESSAGE_BYTES)
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                raise
            try:
                response = answer(data, self.lookup)
                if response is not None:
                    self._socket.sendto(response, client)
            except Exception:  # one bad query must not end the server
                log.exception("DNS query from %s failed", client)
