"""`scripts/dev-cluster` as a person runs it (its Python part, in this venv): the cluster comes up
and says how to use it, kubectl reaches the node with the kubeconfig it printed, and Ctrl-C stops
and removes everything it made (processes, network namespace, mounts, files)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.support.controlplane import skip_without_control_plane
from tests.support.node import NODE_NAME
from tests.support.node_install import unavailable_reason
from tests.support.tools import kubectl_path

pytestmark = [pytest.mark.e2e, pytest.mark.node]
ROOT = Path(__file__).resolve().parents[2]


def _read_until_up(process: subprocess.Popen[str], timeout: float = 600) -> list[str]:
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if line.startswith("Logs of each component"):
            return lines
    raise AssertionError("dev-cluster never came up:\n" + "\n".join(lines))


def _nodes(kubeconfig: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`kubectl get nodes` as the person would run it, with the printed kubeconfig."""
    return subprocess.run(
        [str(kubectl_path()), "get", "nodes", "-o", "name"],
        env={**os.environ, "KUBECONFIG": kubeconfig, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_dev_cluster_comes_up_and_ctrl_c_removes_it() -> None:
    skip_without_control_plane()
    if reason := unavailable_reason():
        pytest.skip(reason)
    directory = Path(tempfile.mkdtemp(prefix="coreio-dev-cluster-")) / "cluster"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.dev_cluster", "--dir", str(directory), "--tag", "dev-test"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = _read_until_up(process)
        exported = next(line.split("=", 1)[1] for line in lines if "export KUBECONFIG=" in line)
        assert exported == str(directory / "admin.kubeconfig")
        assert any(
            "--set image.repository=coreio.invalid/coreio --set image.tag=dev-test" in x for x in lines
        )
        nodes = _nodes(exported, directory.parent)
        assert nodes.stdout.strip() == f"node/{NODE_NAME}", nodes.stderr
        # A second one on the same machine: one line, and the running one untouched.
        second = subprocess.run(
            [sys.executable, "-m", "tests.support.dev_cluster", "--dir", str(directory.parent / "second")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert second.returncode == 1
        assert second.stderr.strip().splitlines() == [
            "dev-cluster: 10.213.0.1 is taken by link cnodedev: another node runs here"
            " (if it was killed, `ip link del cnodedev` frees it)"
        ]
        again = _nodes(exported, directory.parent)
        assert again.returncode == 0, again.stderr
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, rest
    assert "stopped and removed" in rest
    assert not directory.exists()
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "coreio-node-dev" not in namespaces
    assert str(directory) not in Path("/proc/self/mounts").read_text()
    shutil.rmtree(directory.parent, ignore_errors=True)
