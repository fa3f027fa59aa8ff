"""cert-manager's CRDs, for checking the chart's cert-manager recipe (docs/cert-manager.yaml)
against the real schemas. cert-manager commits them as plain YAML in its main module
(`deploy/crds/`), which the Go module proxy serves: `go mod download` fetches it into Go's module
cache on first use, and nothing is built.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tests.support import gobuild

# The newest release on the Go module proxy when this was written; pinned so that CI checks against
# what was tested.
CERT_MANAGER_VERSION = "v1.21.2"
MODULE = "github.com/cert-manager/cert-manager"
_DOWNLOAD_TIMEOUT = 600.0


def module_directory() -> Path:
    """The module's files in Go's module cache, downloaded first where missing (raises
    gobuild.GoUnavailable without Go)."""
    with tempfile.TemporaryDirectory(prefix="coreio-cert-manager-") as work:
        out = gobuild.run_go(
            ["mod", "download", "-json", f"{MODULE}@{CERT_MANAGER_VERSION}"],
            Path(work),
            timeout=_DOWNLOAD_TIMEOUT,
        )
    return Path(json.loads(out)["Dir"])


def cert_manager_crds() -> list[dict[str, Any]]:
    """Every CRD of cert-manager's release, as objects."""
    found: list[dict[str, Any]] = []
    for path in sorted((module_directory() / "deploy" / "crds").glob("*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    if not any(crd["spec"]["names"]["kind"] == "Certificate" for crd in found):
        raise RuntimeError(f"{MODULE}@{CERT_MANAGER_VERSION} holds no Certificate CRD")
    return found
