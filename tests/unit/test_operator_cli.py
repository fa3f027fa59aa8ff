"""`coreio-operator` on the command line: its defaults, and one clear line for each mistake."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from apiserver_operator.main import parse_args

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "apiserver_operator", *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_no_arguments_runs_for_every_namespace_with_leader_election(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "coreio-operator-abc")
    command, config, verbose = parse_args([])
    assert command == "run" and not verbose
    assert config.namespaces == []  # cluster-wide
    assert config.leader_election and config.identity == "coreio-operator-abc"
    assert config.reconcile_interval == 30.0


def test_namespaces_narrow_the_scope() -> None:
    _, config, _ = parse_args(["-n", "a", "--namespace", "b", "--no-leader-election"])
    assert config.namespaces == ["a", "b"] and not config.leader_election


def test_help_says_where_credentials_come_from() -> None:
    done = _run("--help", env={})
    assert done.returncode == 0
    assert "KUBECONFIG" in done.stdout and "service account" in done.stdout


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ((), {"HOME": "/nonexistent"}, "coreio-operator: no kubeconfig (KUBECONFIG, ~/.kube/config)"),
        (("check-api",), {"KUBECONFIG": "/nonexistent/kubeconfig"}, "coreio-operator: [Errno 2]"),
        (("uninstall", "-n", "x"), {"KUBECONFIG": "/nonexistent/kubeconfig"}, "coreio-operator: [Errno 2]"),
    ],
)
def test_a_missing_cluster_is_one_line(args: tuple[str, ...], env: dict[str, str], expected: str) -> None:
    done = _run(*args, env=env)
    assert done.returncode == 1
    assert done.stderr.startswith(expected), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_bad_flag_value_names_the_flag() -> None:
    done = _run("--reconcile-interval=0", env={})
    assert done.returncode == 2
    assert (
        done.stderr.strip().splitlines()[-1]
        == "coreio-operator: error: --reconcile-interval must be positive"
    )


def test_uninstall_takes_the_namespaces_its_exporters_may_be_in() -> None:
    # The first is the Installation's; the chart passes every namespace the operator manages.
    _, config, _ = parse_args(["uninstall", "-n", "coreio", "-n", "team"])
    assert config.namespaces == ["coreio", "team"]


def test_uninstall_takes_the_installation_and_a_wait() -> None:
    command, config, _ = parse_args(["uninstall", "-n", "team", "--installation=prod", "--wait=5"])
    assert (command, config.namespaces, config.installation, config.uninstall_wait) == (
        "uninstall",
        ["team"],
        "prod",
        5.0,
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("uninstall", "--wait=0"), "coreio-operator: error: --wait must be positive"),
    ],
)
def test_uninstall_mistakes_are_one_line(args: tuple[str, ...], expected: str) -> None:
    done = _run(*args, env={})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == expected
