"""Loopback pod IPs (`<prefix>.x.y`): each node owns a range of x, addresses unique among live pods
and handed out round-robin.

Round-robin rather than lowest-free so a deleted pod's address is not reused at once: etcd peers
still dialling an old member's IP should not reach a brand-new pod.

Node i (0-based) owns x in 64i..64i+63 (its `Node.spec.podCIDR` is `<prefix>.<64i>.0/18`); the
first node leaves out x=0 so `<prefix>.0.0`, the cluster DNS server, is never near a pod.
"""
from __future__ import annotations

import threading

HOSTS_PER_BLOCK = 254  # y in 1..254
BLOCKS_PER_NODE = 64  # values of x per node: a /18 of the /16 under the prefix
MAX_NODES = 256 // BLOCKS_PER_NODE


class AddressesExhausted(Exception):
    pass


def node_blocks(index: int) -> range:
    """The third octets (x) of node `index`'s pod IPs."""
    if not 0 <= index < MAX_NODES:
        raise ValueError(f"node index {index} is outside 0..{MAX_NODES - 1}")
    first = index * BLOCKS_PER_NODE
    return range(max(first, 1), first + BLOCKS_PER_NODE)


def node_pod_cidr(prefix: str, index: int) -> str:
    """The CIDR holding node `index`'s pod IPs, for `Node.spec.podCIDR`."""
    node_blocks(index)
    return f"{prefix}.{index * BLOCKS_PER_NODE}.0/18"


class IpAllocator:
    def __init__(self, prefix: str, blocks: range = range(0, 256)) -> None:
        parts = prefix.split(".")
        if len(parts) != 2 or parts[0] != "127" or not all(p.isdigit() and 0 <= int(p) <= 255 for p in parts):
            raise ValueError(f"pod IP prefix must look like 127.N, got {prefix!r}")
        if not blocks or blocks.start < 0 or blocks.stop > 256:
            raise ValueError(f"third octets {blocks} must lie in 0..255")
        self.prefix = prefix
        self.blocks = blocks
        self._lock = threading.Lock()
        self._by_key: dict[str, str] = {}
        self._in_use: set[str] = set()
        self._cursor = 0  # index of the next address to try

    def _index(self, ip: str) -> int:
        x, y = (int(p) for p in ip.split(".")[2:])
        return self.blocks.index(x) * HOSTS_PER_BLOCK + (y - 1)

    def _address(self, index: int) -> str:
        block, y = divmod(index, HOSTS_PER_BLOCK)
        return f"{self.prefix}.{self.blocks[block]}.{y + 1}"

    @property
    def size(self) -> int:
        return len(self.blocks) * HOSTS_PER_BLOCK

    def owns(self, ip: str) -> bool:
        parts = ip.split(".")
        return (len(parts) == 4 and ".".join(parts[:2]) == self.prefix
                and all(p.isdigit() for p in parts[2:]) and int(parts[2]) in self.blocks
                and 1 <= int(parts[3]) <= 254)

    def reserve(self, key: str, ip: str) -> bool:
        """Record an address found in a pod's status (kubelet restart); False if it is not ours or taken."""
        with self._lock:
            if not self.owns(ip) or (ip in self._in_use and self._by_key.get(key) != ip):
                return False
            self._by_key[key] = ip
            self._in_use.add(ip)
            self._cursor = max(self._cursor, self._index(ip) + 1) % self.size
            return True

    def allocate(self, key: str) -> str:
        with self._lock:
            if key in self._by_key:
                return self._by_key[key]
            for offset in range(self.size):
                index = (self._cursor + offset) % self.size
                ip = self._address(index)
                if ip not in self._in_use:
                    self._cursor = (index + 1) % self.size
                    self._by_key[key] = ip
                    self._in_use.add(ip)
                    return ip
        raise AddressesExhausted(f"all {self.size} pod addresses of {self.prefix}.{self.blocks.start}-"
                                 f"{self.blocks.stop - 1}.* are in use")

    def release(self, key: str) -> None:
        with self._lock:
            ip = self._by_key.pop(key, None)
            if ip is not None:
                self._in_use.discard(ip)

    def ip_of(self, key: str) -> str | None:
        with self._lock:
            return self._by_key.get(key)
