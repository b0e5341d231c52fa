"""Log formats: text lines and JSON lines, both carrying the cluster a line is about."""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from etcd_operator.logs import cluster_logger
from operator_runtime.logs import configure_logging


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_text_lines_name_the_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("text", "info")
    cluster_logger("team-a", "c1", logging.getLogger("etcd_operator.supervisor")).info("member %s added", "c1-abcde")
    logging.getLogger("etcd_operator.controller").debug("not shown at INFO")

    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(" INFO etcd_operator.supervisor: team-a/c1: member c1-abcde added")
    assert line[:4].isdigit() and line.split(" ")[0].endswith("Z")


def test_json_lines_carry_a_cluster_field(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "DEBUG")
    cluster_logger("team-a", "c1").warning("quorum lost", extra={"members": 3})
    logging.getLogger("etcd_operator.controller").info("no cluster here")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("etcd_operator.controller").exception("supervisor crashed")

    about_cluster, plain, crash = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert about_cluster["cluster"] == "team-a/c1" and about_cluster["message"] == "quorum lost"
    assert (about_cluster["level"], about_cluster["logger"]) == ("WARNING", "etcd_operator.cluster")
    assert set(about_cluster) >= {"ts", "level", "logger", "message"}
    assert "cluster" not in plain
    assert "RuntimeError: boom" in crash["exception"]


def test_configuring_twice_keeps_one_handler() -> None:
    configure_logging("text", "INFO")
    configure_logging("json", "INFO")
    assert len(logging.getLogger().handlers) == 1


@pytest.mark.parametrize(("fmt", "level"), [("xml", "INFO"), ("text", "LOUD")])
def test_bad_settings_are_refused(fmt: str, level: str) -> None:
    with pytest.raises(ValueError):
        configure_logging(fmt, level)
