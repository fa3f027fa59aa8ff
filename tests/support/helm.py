"""The real `helm` binary, run with its config, cache and data in a private place (nothing read
from or written to the user's), against no cluster or against the kubeconfig given."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


class Helm:
    def __init__(
        self, binary: Path, home: Path, *, kubeconfig: Path | None = None, timeout: float = 120
    ) -> None:
        self.binary = binary
        self.timeout = timeout
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_DATA_HOME": str(home / "data"),
            "KUBECONFIG": str(kubeconfig) if kubeconfig is not None else os.devnull,
        }

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(self.binary), *args], env=self.env, capture_output=True, text=True, timeout=self.timeout
        )
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result
