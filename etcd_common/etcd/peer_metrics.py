"""A member's view of its peers, from its Prometheus `/metrics` (served on its client URL):
`etcd_network_active_peers{Local="<own id>",Remote="<peer id>"}` is 1 while the member has an
active raft stream to that peer and 0 once it lost it (etcd's rafthttp, 3.4 to 3.6; IDs in hex).
The operator asks for it only when members fail its own health check (observing.py)."""
from __future__ import annotations

import re
from dataclasses import dataclass

ACTIVE_PEERS_METRIC = "etcd_network_active_peers"
SERVER_ID_METRIC = "etcd_server_id"  # {server_id="<own id>"} 1: who answers, peers or not
# One sample line: name, labels, value (a timestamp may follow the value).
_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)')
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class PeerView:
    """Which peers one member has active raft streams to (member IDs)."""

    member_id: int  # the member that answered (0: it did not say)
    connected: frozenset[int]


def parse_peer_view(text: str) -> PeerView:
    """The `etcd_network_active_peers` samples of a `/metrics` answer (text exposition format),
    and the member that answered (`etcd_server_id`, else the samples' `Local`). A member with no
    peer has no sample: connected to nobody. Raises ValueError for an unreadable sample."""
    server_id = local_id = 0
    connected: set[int] = set()
    for line in text.splitlines():
        if not line.startswith((ACTIVE_PEERS_METRIC + "{", SERVER_ID_METRIC + "{")):
            continue
        match = _SAMPLE.match(line)
        if match is None or match["name"] not in (ACTIVE_PEERS_METRIC, SERVER_ID_METRIC):
            continue
        labels = {m["key"]: m["value"] for m in _LABEL.finditer(match["labels"])}
        try:
            if match["name"] == SERVER_ID_METRIC:
                server_id = int(labels["server_id"], 16) if float(match["value"]) >= 1 else server_id
                continue
            local_id, remote, value = int(labels["Local"], 16), int(labels["Remote"], 16), float(match["value"])
        except (KeyError, ValueError) as e:
            raise ValueError(f"unreadable sample {line!r}") from e
        if value >= 1:
            connected.add(remote)
    return PeerView(server_id or local_id, frozenset(connected))
