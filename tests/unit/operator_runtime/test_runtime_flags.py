"""The shared flags: each defaults from its environment variable, and a flag beats it."""
from __future__ import annotations

import argparse

import pytest

from operator_runtime.flags import add_program_flag, add_resync_flag, add_runtime_flags, env_bool, runtime_settings


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_runtime_flags(parser, default_lease_name="some-operator")
    return parser.parse_args(argv)


def test_defaults_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    monkeypatch.setenv("POD_NAME", "some-operator-0")
    monkeypatch.setenv("LEADER_ELECT", "true")
    monkeypatch.setenv("HTTP_PORT", "9090")
    monkeypatch.setenv("LOG_FORMAT", "json")
    monkeypatch.delenv("LEASE_NAME", raising=False)

    settings = runtime_settings(parse([]))

    assert (settings.lease_namespace, settings.lease_name, settings.identity) == ("ops", "some-operator", "some-operator-0")
    assert settings.leader_elect and settings.http_port == 9090 and settings.log_format == "json"


def test_a_flag_beats_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PORT", "9090")
    assert runtime_settings(parse(["--http-port", "8081"])).http_port == 8081


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("TRUE", True), ("on", True), ("no", False), ("", False)])
def test_boolean_variables(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    monkeypatch.setenv("SOME_FLAG", value)
    assert env_bool("SOME_FLAG", False) is expected


def test_resync_and_program_flags_default_from_their_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    add_resync_flag(parser, default_seconds=30, help_text="re-check")
    add_program_flag(parser, "etcdctl", env="ETCDCTL_BINARY")
    monkeypatch.delenv("RESYNC_SECONDS", raising=False)
    monkeypatch.delenv("ETCDCTL_BINARY", raising=False)
    assert (parser.parse_args([]).resync_seconds, parser.parse_args([]).etcdctl) == (30.0, None)
    parser = argparse.ArgumentParser()
    monkeypatch.setenv("RESYNC_SECONDS", "7")
    monkeypatch.setenv("ETCDCTL_BINARY", "/opt/etcdctl")
    add_resync_flag(parser, default_seconds=30, help_text="re-check")
    add_program_flag(parser, "etcdctl", env="ETCDCTL_BINARY")
    assert (parser.parse_args([]).resync_seconds, parser.parse_args([]).etcdctl) == (7.0, "/opt/etcdctl")
