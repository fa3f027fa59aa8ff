"""`coreio-apiserver --help` and `--version`: every flag described, with its default (the Settings'
or the kind's), and the version on one line."""

from __future__ import annotations

import importlib.metadata

import pytest

import apiserver
from apiserver import cli
from apiserver.cli import FLAGS, go_duration, kind_flags, parse_args
from apiserver.config import Settings
from apiserver.resources import KINDS


def help_entries(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Each option --help lists, by its first name: its description, on one line."""
    # Wide, so that no description is wrapped (argparse breaks lines at hyphens too).
    monkeypatch.setenv("COLUMNS", "500")
    with pytest.raises(SystemExit):
        parse_args(["--help"])
    options = capsys.readouterr().out.split("\noptions:\n", 1)[1].split("\n\n", 1)[0]
    entries: dict[str, str] = {}
    name = ""
    for line in options.splitlines():
        if line.startswith("  -"):
            invocation, _, description = line.strip().partition("  ")
            name = invocation.split()[0].rstrip(",")
            entries[name] = description.strip()
        else:
            entries[name] = f"{entries[name]} {line.strip()}".strip()
    return entries


def test_every_flag_in_help_has_a_description(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = help_entries(monkeypatch, capsys)
    assert set(entries) == {"-h", "--version", *(flag.name for flag in [*FLAGS, *kind_flags(KINDS)])}
    assert [name for name, description in entries.items() if not description] == []
    assert all(not description.startswith("(default") for description in entries.values())


@pytest.mark.parametrize(
    ("name", "default"),
    [
        ("--secure-port", "8443"),
        ("--bind-address", "127.0.0.1"),
        ("--default-watch-cache-size", "10000"),
        ("--event-ttl", "1h0m0s"),
        ("--etcd-compaction-interval", "5m0s"),
        ("--request-timeout", "1m0s"),
        ("--authentication-token-webhook-cache-ttl", "10s"),
        ("--min-request-timeout", "1800"),
        ("--requestheader-username-headers", "X-Remote-User"),
        ("--watch-cache", "true"),
        ("--authorization-mode", "RBAC"),
    ],
)
def test_help_shows_the_default(
    name: str, default: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert help_entries(monkeypatch, capsys)[name].endswith(f" (default: {default})")


def test_defaults_come_from_the_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A flag whose field has a value shows it; one whose field is empty shows no default."""
    settings = Settings(secure_port=7443, requestheader_group_headers=["X-A", "X-B"], etcd_prefix="")
    monkeypatch.setattr(cli, "Settings", lambda: settings)
    entries = help_entries(monkeypatch, capsys)
    assert entries["--secure-port"].endswith("(default: 7443)")
    assert entries["--requestheader-group-headers"].endswith("(default: X-A,X-B)")
    for empty in ("--etcd-prefix", "--etcd-servers", "--etcd-cafile", "--requestheader-uid-headers"):
        assert "(default" not in entries[empty]


def test_go_duration_prints_as_go_does() -> None:
    shown = [go_duration(seconds) for seconds in (0, 0.5, 1.5, 10, 90, 300, 3600, 5400.5)]
    assert shown == ["0s", "500ms", "1.5s", "10s", "1m30s", "5m0s", "1h0m0s", "1h30m0.5s"]


def test_version_is_one_line_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"coreio-apiserver {importlib.metadata.version('coreio')}\n"


def test_version_falls_back_to_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert cli.version() == apiserver.__version__
