"""`kubectl coreio ...`: the plugin this package installs (`kubectl-coreio`, beside the Python
running the tests), found by the real kubectl on PATH. kubectl takes no flag before a plugin's
name, so the kubeconfig goes in KUBECONFIG."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PLUGIN_DIR = str(Path(sys.executable).parent)
# who-can's first row everywhere: system:masters, as upstream's cluster-admin binding has it.
MASTERS_ROW = [
    "system:masters",
    "Group",
    "ClusterRoleBinding/cluster-admin",
    "ClusterRole/cluster-admin",
    "[*] *.*",
]


class Plugin:
    def __init__(self, kubectl: Path, kubeconfig: Path, env: dict[str, str] | None = None) -> None:
        self.kubectl = kubectl
        path = f"{PLUGIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"
        self.env = {**os.environ, **(env or {}), "PATH": path, "KUBECONFIG": str(kubeconfig)}

    def run(self, *args: str) -> tuple[int, str, str]:
        command = [str(self.kubectl), "coreio", *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=self.env)
        return done.returncode, done.stdout, done.stderr

    def ok(self, *args: str) -> str:
        code, out, err = self.run(*args)
        assert code == 0, err
        return out

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "-o", "json"))


def rows(out: str) -> list[list[str]]:
    """A kubectl table's rows, cells split on the padding (no cell in these tests holds three
    spaces)."""
    return [[cell.strip() for cell in line.split("   ") if cell.strip()] for line in out.splitlines()]
