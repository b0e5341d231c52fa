"""Loopback pod IPs (`<prefix>.x.y`), unique among live pods and handed out round-robin.

Round-robin rather than lowest-free so a deleted pod's address is not reused at once: etcd peers
still dialling an old member's IP should not reach a brand-new pod.
"""
from __future__ import annotations

import threading

HOSTS_PER_BLOCK = 254  # y in 1..254


class AddressesExhausted(Exception):
    pass


class IpAllocator:
    def __init__(self, prefix: str) -> None:
        parts = prefix.split(".")
        if len(parts) != 2 or parts[0] != "127" or not all(p.isdigit() and 0 <= int(p) <= 255 for p in parts):
            raise ValueError(f"pod IP prefix must look like 127.N, got {prefix!r}")
        self.prefix = prefix
        self._lock = threading.Lock()
        self._by_key: dict[str, str] = {}
        self._in_use: set[str] = set()
        self._cursor = 0  # index of the next address to try

    @staticmethod
    def _index(ip: str) -> int:
        x, y = (int(p) for p in ip.split(".")[2:])
        return x * HOSTS_PER_BLOCK + (y - 1)

    def _address(self, index: int) -> str:
        x, y = divmod(index, HOSTS_PER_BLOCK)
        return f"{self.prefix}.{x}.{y + 1}"

    @property
    def size(self) -> int:
        return 256 * HOSTS_PER_BLOCK

    def owns(self, ip: str) -> bool:
        parts = ip.split(".")
        return (len(parts) == 4 and ".".join(parts[:2]) == self.prefix
                and all(p.isdigit() for p in parts[2:]) and int(parts[2]) <= 255 and 1 <= int(parts[3]) <= 254)

    def reserve(self, key: str, ip: str) -> bool:
        """Record an address found in a pod's status (kubelet restart); False if it is taken."""
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
        raise AddressesExhausted(f"all {self.size} pod addresses under {self.prefix} are in use")

    def release(self, key: str) -> None:
        with self._lock:
            ip = self._by_key.pop(key, None)
            if ip is not None:
                self._in_use.discard(ip)

    def ip_of(self, key: str) -> str | None:
        with self._lock:
            return self._by_key.get(key)
