"""Which failed handshakes the TLS renewal tests allow (tests/integration/etcd_operator/tls_certs.py):
only etcd's own race between reading a renewed certificate and its key, each failure matched by a
line of that member's etcd log; anything else, or more than the log explains, fails them."""
from __future__ import annotations

import pytest

from tests.integration.etcd_operator.tls_certs import ServedCertificates

RACE = "a-1 peer port 2380: handshake failed: SSLError(1, '[SSL: TLSV1_ALERT_INTERNAL_ERROR] tlsv1 alert internal error')"
REFUSED = "a-1 server port 2379: handshake failed: ConnectionRefusedError(111, 'Connection refused')"
EXPIRED = "a-2 peer port 2380: handshake failed: SSLCertVerificationError(1, 'certificate has expired')"


def served(failures: list[tuple[str, str]], logged: dict[str, int]) -> ServedCertificates:
    certificates = ServedCertificates.__new__(ServedCertificates)
    certificates._failed_members = [member for member, _ in failures]
    certificates.errors = [error for _, error in failures]
    certificates._reload_races_logged = lambda member: logged.get(member, 0)  # type: ignore[method-assign]
    return certificates


def test_a_race_etcd_logged_is_allowed_once_per_line() -> None:
    assert served([("a-1", RACE)], {"a-1": 1}).errors_but_etcds_reload_race() == []
    assert served([("a-1", RACE), ("a-1", RACE)], {"a-1": 1}).errors_but_etcds_reload_race() == [RACE]


@pytest.mark.parametrize("failures, logged", [
    ([("a-1", RACE)], {}),  # etcd logged no such race
    ([("a-1", RACE)], {"a-2": 1}),  # another member did
    ([("a-1", REFUSED)], {"a-1": 1}),  # not an internal error alert
    ([("a-2", EXPIRED)], {"a-2": 3}),
])
def test_anything_else_is_left(failures: list[tuple[str, str]], logged: dict[str, int]) -> None:
    assert served(failures, logged).errors_but_etcds_reload_race() == [error for _, error in failures]
