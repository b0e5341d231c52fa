"""A member's view of its peers from its `/metrics` (etcd_common.etcd.peer_metrics), on text
recorded from etcd 3.6.16 and 3.4.23 (3-member clusters on loopback, a member stopped), and the
probe asking for it over HTTP (a loopback server standing in for the member's client URL)."""
from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from etcd_common.etcd.etcdctl import EtcdctlError, Unreachable
from etcd_common.etcd.peer_metrics import PeerView, parse_peer_view
from etcd_common.etcd.probe import METRICS_PATH, EtcdProbe

# etcd 3.6.16, member 352145ca8846243b, one peer (b9c7366f2affac9: 15 hex digits) stopped a second
# before: its gauge dropped to 0 (the sample stays). Neighbouring metrics with the same labels
# (known_peers, disconnected_peers_total) or peer IDs in other labels (To, From) must not count.
ETCD_3_6_ONE_PEER_STOPPED = """\
# HELP etcd_network_active_peers The current number of active peer connections.
# TYPE etcd_network_active_peers gauge
etcd_network_active_peers{Local="352145ca8846243b",Remote="454b86c871ddca27"} 1
etcd_network_active_peers{Local="352145ca8846243b",Remote="b9c7366f2affac9"} 0
# HELP etcd_network_client_grpc_received_bytes_total The total number of bytes received from grpc clients.
# TYPE etcd_network_client_grpc_received_bytes_total counter
etcd_network_client_grpc_received_bytes_total 347
# HELP etcd_network_disconnected_peers_total The total number of disconnected peers.
# TYPE etcd_network_disconnected_peers_total counter
etcd_network_disconnected_peers_total{Local="352145ca8846243b",Remote="b9c7366f2affac9"} 1
# HELP etcd_network_known_peers The current number of known peers.
# TYPE etcd_network_known_peers gauge
etcd_network_known_peers{Local="352145ca8846243b",Remote="352145ca8846243b"} 1
etcd_network_known_peers{Local="352145ca8846243b",Remote="454b86c871ddca27"} 1
etcd_network_known_peers{Local="352145ca8846243b",Remote="b9c7366f2affac9"} 1
# HELP etcd_network_peer_received_bytes_total The total number of bytes received from peers.
# TYPE etcd_network_peer_received_bytes_total counter
etcd_network_peer_received_bytes_total{From="0"} 160
etcd_network_peer_received_bytes_total{From="454b86c871ddca27"} 6092
etcd_network_peer_received_bytes_total{From="b9c7366f2affac9"} 646
# HELP etcd_network_peer_round_trip_time_seconds Round-Trip-Time histogram between peers
# TYPE etcd_network_peer_round_trip_time_seconds histogram
etcd_network_peer_round_trip_time_seconds_sum{To="454b86c871ddca27"} 0.000405263
etcd_network_peer_round_trip_time_seconds_count{To="454b86c871ddca27"} 2
# HELP etcd_network_peer_sent_bytes_total The total number of bytes sent to peers.
# TYPE etcd_network_peer_sent_bytes_total counter
etcd_network_peer_sent_bytes_total{To="454b86c871ddca27"} 6944
etcd_network_peer_sent_bytes_total{To="b9c7366f2affac9"} 2190
# HELP etcd_server_id Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.
# TYPE etcd_server_id gauge
etcd_server_id{server_id="352145ca8846243b"} 1
"""

# etcd 3.4.23, member 7de917fc106d523b of a healthy 3-member cluster (same metric, same labels).
ETCD_3_4_ALL_CONNECTED = """\
# HELP etcd_network_active_peers The current number of active peer connections.
# TYPE etcd_network_active_peers gauge
etcd_network_active_peers{Local="7de917fc106d523b",Remote="a61d67d2f260ed4d"} 1
etcd_network_active_peers{Local="7de917fc106d523b",Remote="d64d527d6b580ff6"} 1
# HELP etcd_network_peer_round_trip_time_seconds Round-Trip-Time histogram between peers
# TYPE etcd_network_peer_round_trip_time_seconds histogram
etcd_network_peer_round_trip_time_seconds_sum{To="d64d527d6b580ff6"} 0.00032674799999999997
etcd_network_peer_round_trip_time_seconds_count{To="d64d527d6b580ff6"} 2
# HELP etcd_server_has_leader Whether or not a leader exists. 1 is existence, 0 is not.
# TYPE etcd_server_has_leader gauge
etcd_server_has_leader 1
# HELP etcd_server_id Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.
# TYPE etcd_server_id gauge
etcd_server_id{server_id="7de917fc106d523b"} 1
"""

# A single-member cluster: the metric has no sample at all.
SINGLE_MEMBER = """\
# HELP etcd_network_active_peers The current number of active peer connections.
# TYPE etcd_network_active_peers gauge
# HELP etcd_server_id Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.
# TYPE etcd_server_id gauge
etcd_server_id{server_id="43335eb104df8d0e"} 1
"""


def test_a_stopped_peer_drops_out_and_only_active_streams_count() -> None:
    view = parse_peer_view(ETCD_3_6_ONE_PEER_STOPPED)
    assert view == PeerView(0x352145ca8846243b, frozenset({0x454b86c871ddca27}))


def test_etcd_3_4_reports_the_same_metric() -> None:
    view = parse_peer_view(ETCD_3_4_ALL_CONNECTED)
    assert view == PeerView(0x7de917fc106d523b, frozenset({0xa61d67d2f260ed4d, 0xd64d527d6b580ff6}))


def test_a_member_without_peers_is_connected_to_nobody_and_still_says_who_it_is() -> None:
    assert parse_peer_view(SINGLE_MEMBER) == PeerView(0x43335eb104df8d0e, frozenset())
    assert parse_peer_view("") == PeerView(0, frozenset())


def test_an_unreadable_sample_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError, match="unreadable sample"):
        parse_peer_view('etcd_network_active_peers{Local="zz",Remote="454b86c871ddca27"} 1\n')


class _MetricsHandler(http.server.BaseHTTPRequestHandler):
    body = ETCD_3_6_ONE_PEER_STOPPED

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        status = 200 if self.path == METRICS_PATH else 404
        payload = (self.body if status == 200 else "404 page not found").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture
def metrics_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _MetricsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_probe_reads_each_members_metrics_and_reports_one_that_fails(metrics_endpoint: str) -> None:
    dead = "http://127.0.49.251:23790"  # nothing listens there
    live, failed = EtcdProbe([metrics_endpoint, dead], timeout_seconds=1.0).peer_views()
    assert live == PeerView(0x352145ca8846243b, frozenset({0x454b86c871ddca27}))
    assert isinstance(failed, Unreachable) and "refused" in failed.message


def test_unreadable_metrics_are_an_error_of_that_endpoint(metrics_endpoint: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_MetricsHandler, "body", 'etcd_network_active_peers{Local="x",Remote="y"} 1\n')
    [answer] = EtcdProbe([metrics_endpoint], timeout_seconds=1.0).peer_views()
    assert isinstance(answer, EtcdctlError) and "unreadable metrics" in answer.message
