"""`terminationMessagePolicy: FallbackToLogsOnError`: a failed container's termination message is
the tail of its log (at most 80 lines and 2048 bytes), as the kubelet reports it."""
from __future__ import annotations

from pathlib import Path

from kube_sandbox.kubelet.pods import TERMINATION_MESSAGE_MAX_BYTES, termination_message_from_log


def test_the_last_lines_of_the_log_are_the_message(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text("".join(f"line {i}\n" for i in range(200)))
    message = termination_message_from_log(log)
    assert message.splitlines() == [f"line {i}" for i in range(120, 200)]


def test_the_message_is_at_most_2048_bytes(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_text("x" * 5000 + "\nthe reason\n")
    message = termination_message_from_log(log)
    assert len(message.encode()) <= TERMINATION_MESSAGE_MAX_BYTES and message.endswith("the reason")


def test_no_log_no_message(tmp_path: Path) -> None:
    assert termination_message_from_log(tmp_path / "missing.log") == ""
