"""--log-level=DEBUG never prints object-store credentials: the SDKs' own DEBUG lines (botocore's
signed request headers, its session token) stay out of the log whatever the operator's level."""
from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from operator_runtime.logs import CREDENTIAL_LOGGERS, configure_logging

SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY"
SESSION_TOKEN = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


@pytest.fixture
def debug_log() -> Iterator[Captured]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level,
             {name: logging.getLogger(name).level for name in ("kubernetes", *CREDENTIAL_LOGGERS)})
    configure_logging("text", "DEBUG")
    captured = Captured()
    root.addHandler(captured)
    try:
        yield captured
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, level in saved[2].items():
            logging.getLogger(name).setLevel(level)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_signed_s3_request_at_debug_level_logs_no_credentials(debug_log: Captured) -> None:
    logging.getLogger("etcd_operator").debug("our own DEBUG lines still show")
    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{_closed_port()}", region_name="us-east-1",
                          aws_access_key_id="AKIAEXAMPLEACCESSKEY", aws_secret_access_key=SECRET_KEY,
                          aws_session_token=SESSION_TOKEN,
                          config=Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=1))
    with pytest.raises(EndpointConnectionError):
        client.list_objects_v2(Bucket="bucket")
    text = "\n".join(debug_log.lines)
    assert "our own DEBUG lines still show" in text
    assert SESSION_TOKEN not in text and "Authorization" not in text and "Signature=" not in text
    assert SECRET_KEY not in text


@pytest.mark.parametrize("name", ["botocore.endpoint", "botocore.auth", "urllib3.connectionpool", "boto3.resources"])
def test_the_sdk_loggers_stay_at_info_under_debug(debug_log: Captured, name: str) -> None:
    assert not logging.getLogger(name).isEnabledFor(logging.DEBUG)
