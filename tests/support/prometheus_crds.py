"""The Prometheus Operator's CRDs (ServiceMonitor, PodMonitor and the rest of monitoring.coreos.com/v1),
for checking the chart's monitors against the real schemas.

Upstream commits its CRDs as YAML in its main module, github.com/prometheus-operator/prometheus-operator,
which the Go module proxy does not serve. The Go types they are generated from are a module of their
own that it does serve, github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring, and
the generator is controller-gen (sigs.k8s.io/controller-tools), as upstream's: the recipe writes a
throwaway module requiring both at pinned versions, builds controller-gen and runs its CRD generator
over the v1 types, whose kubebuilder markers carry every type, enum, pattern and required field.

`gobuild` caches the result as `$COREIO_CONTROLPLANE_CACHE/prometheus-operator-crds-<version>/`
(`controller-gen`, and the CRDs under `crds/`); Go's module cache keeps the downloads, so a machine
with neither gets both on first use. `COREIO_PROMETHEUS_CRDS` names a directory of CRD files of one's
own instead (e.g. upstream's example/prometheus-operator-crd).

    python -m tests.support.prometheus_crds [--force]

prints controller-gen's path and how long getting it took.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.support import gobuild
from tests.support.gobuild import Build

# The newest release of the API module on the Go module proxy when this was written, and the newest
# controller-tools; pinned so that CI checks against what was tested.
PROMETHEUS_OPERATOR_VERSION = "v0.95.2"
CONTROLLER_TOOLS_VERSION = "v0.23.0"
API_MODULE = "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring"
CONTROLLER_GEN = "sigs.k8s.io/controller-tools/cmd/controller-gen"
GROUP = "monitoring.coreos.com"
OVERRIDE = "COREIO_PROMETHEUS_CRDS"
_MODULE_PATH = "coreio.invalid/prometheus-operator-crds"
_GENERATE_TIMEOUT = 600.0

Obj = dict[str, Any]


def go_mod() -> str:
    return (
        f"module {_MODULE_PATH}\n\ngo 1.26\n\nrequire (\n"
        f"\t{API_MODULE} {PROMETHEUS_OPERATOR_VERSION}\n"
        f"\tsigs.k8s.io/controller-tools {CONTROLLER_TOOLS_VERSION}\n)\n"
    )


def _build(work: Path, out: Path) -> None:
    (work / "go.mod").write_text(go_mod())
    binary = out / "controller-gen"
    gobuild.run_go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(binary), CONTROLLER_GEN], work)
    crds = out / "crds"
    # controller-gen loads the types with `go list`, in the throwaway module's environment.
    arguments = ["crd:crdVersions=v1", f"paths={API_MODULE}/v1", f"output:crd:dir={crds}"]
    done = subprocess.run(
        [str(binary), *arguments],
        cwd=work,
        env=gobuild.go_env(),
        capture_output=True,
        text=True,
        timeout=_GENERATE_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"controller-gen failed ({done.returncode}):\n{done.stderr[-4000:]}")
    written = sorted(path.name for path in crds.glob("*.yaml"))
    for plural in ("servicemonitors", "podmonitors", "prometheusrules"):
        if f"{GROUP}_{plural}.yaml" not in written:
            raise RuntimeError(f"controller-gen wrote no {plural} CRD, only {written}")


def recipe() -> gobuild.Recipe:
    return gobuild.Recipe(
        binary="controller-gen",
        version=f"{PROMETHEUS_OPERATOR_VERSION} (controller-tools {CONTROLLER_TOOLS_VERSION})",
        directory=f"prometheus-operator-crds-{PROMETHEUS_OPERATOR_VERSION}",
        build=_build,
        override=OVERRIDE,
    )


def ensure_crds(*, force: bool = False) -> Build:
    """controller-gen and the CRDs it generated, generating them first when this machine has none."""
    return gobuild.ensure(recipe(), force=force)


def crd_directory() -> Path:
    """Where the CRD files are: $COREIO_PROMETHEUS_CRDS, or the cached generation (raises
    gobuild.GoUnavailable where neither can be had)."""
    if value := os.environ.get(OVERRIDE):
        return Path(value)
    return ensure_crds().path.parent / "crds"


def monitoring_crds(plurals: tuple[str, ...] = ("servicemonitors", "podmonitors")) -> list[Obj]:
    """The CRDs of `plurals` in monitoring.coreos.com, as objects."""
    directory = crd_directory()
    found: list[Obj] = []
    for path in sorted(directory.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                spec = document["spec"]
                if spec["group"] == GROUP and spec["names"]["plural"] in plurals:
                    found.append(document)
    missing = set(plurals) - {crd["spec"]["names"]["plural"] for crd in found}
    if missing:
        raise RuntimeError(f"{directory} holds no CRD for {sorted(missing)}")
    return found


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    return gobuild.main(
        argv, prog="python -m tests.support.prometheus_crds", description=description, recipe=recipe
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
