"""Builds the rest of a real cluster for the node tests: kubelet, kube-controller-manager,
kube-scheduler and kube-proxy, at kube-apiserver's version, from Go modules, once, and cached.

The recipe is `controlplane_build`'s (a throwaway module that requires k8s.io/kubernetes and
replaces its staging modules with their published twins); one `go build` makes the four binaries,
so they share a compile of the common packages. They land in
`$COREIO_CONTROLPLANE_CACHE/<version>-node/` beside kube-apiserver's own directory. About 15
minutes cold on 2 cores (kube-apiserver's build warms most of it); seconds when cached.

    python -m tests.support.node_build [--force]
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support import controlplane_build, gobuild
from tests.support.gobuild import Build

BINARIES = ("kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy")


def _build(version: str, work: Path, out: Path) -> None:
    (work / "go.mod").write_text("module coreio.invalid/node-build\n\ngo 1.24\n")
    staging = controlplane_build.staging_modules(version, work)
    (work / "go.mod").write_text(controlplane_build.go_mod(version, staging))
    commands = [f"k8s.io/kubernetes/cmd/{name}" for name in BINARIES]
    ldflags = controlplane_build.ldflags(version)
    gobuild.run_go(["build", "-trimpath", "-ldflags", ldflags, "-o", f"{out}/", *commands], work)
    for name in BINARIES:
        reported = gobuild.reported_version(out / name)
        if reported != f"Kubernetes {version}":
            raise RuntimeError(f"built {name} reports {reported!r}, expected Kubernetes {version}")


def recipe() -> gobuild.Recipe:
    version = controlplane_build.kubernetes_version()
    return gobuild.Recipe(
        binary="kubelet",  # the cache check looks for this one; all four are built together
        version=version,
        directory=f"{version}-node",
        build=lambda work, out: _build(version, work, out),
        override="",
    )


def ensure_node_binaries(*, force: bool = False) -> Build:
    """The cached node binaries' directory (as `Build.path.parent`), built first when missing."""
    return gobuild.ensure(recipe(), force=force)


def binary(name: str) -> Path:
    return ensure_node_binaries().path.parent / name


def main(argv: list[str] | None = None) -> int:
    description = (__doc__ or "").split("\n\n")[0]
    return gobuild.main(
        argv, prog="python -m tests.support.node_build", description=description, recipe=recipe
    )


if __name__ == "__main__":
    sys.exit(main())
