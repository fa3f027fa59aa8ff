"""`scripts/dev-cluster`: the real node of the tests, for a person to try the chart on.

Builds what it needs (kube-apiserver and the node's binaries from Go modules, the image from the
Dockerfile, etcd, kubectl and helm fetched as the tests fetch them), starts the cluster of
`tests.support.node` in the foreground, prints the kubeconfig and the install command, and on
Ctrl-C (or SIGTERM) stops everything and removes its directory. A missing prerequisite is one line
and exit status 1."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from tests.support import image, node_runtime
from tests.support.gobuild import GoUnavailable
from tests.support.netns import AddressTaken
from tests.support.node import NODE_IP, NodeCluster, NodeUnavailable, check_node_prerequisites
from tests.support.tools import ToolsUnavailable, helm_path, kubectl_path

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "coreio.invalid/coreio"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/dev-cluster",
        description="Start a one-node Kubernetes 1.33 cluster on this machine (root; Debian or Ubuntu), "
        "with the coreio image built from the Dockerfile loaded on the node. Runs until Ctrl-C.",
    )
    parser.add_argument(
        "--dir", type=Path, default=ROOT / ".dev-cluster", help="where its files go (default: .dev-cluster)"
    )
    parser.add_argument("--tag", default="dev", help=f"the image's tag, as {REPOSITORY}:<tag> (default: dev)")
    return parser.parse_args(argv)


def _started(args: argparse.Namespace) -> NodeCluster:
    check_node_prerequisites()
    docker = image.ensure_docker()
    print("building the image from the Dockerfile ...", flush=True)
    tag, _ = image.build(docker, f"{REPOSITORY}:{args.tag}")
    pause = node_runtime.pause_image(docker)
    print("starting the cluster (the first run builds Kubernetes from Go modules) ...", flush=True)
    shutil.rmtree(args.dir, ignore_errors=True)
    cluster = NodeCluster(args.dir, images=[(docker, pause), (docker, tag)], tag="dev")
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _instructions(cluster: NodeCluster, tag: str) -> str:
    return f"""
cluster up: one node, Kubernetes 1.33, kube-apiserver at https://{NODE_IP}:6443
  export KUBECONFIG={cluster.kubeconfig}
  alias kubectl={kubectl_path()} helm={helm_path()}
  helm install coreio {ROOT / "charts" / "coreio"} -n coreio-system --create-namespace \\
    --set image.repository={REPOSITORY} --set image.tag={tag.split(":")[-1]}
  helm test coreio -n coreio-system
Logs of each component: {cluster.directory / "logs"}. Ctrl-C stops the cluster and removes it.
"""


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cluster = _started(args)
    except (NodeUnavailable, AddressTaken, image.DockerUnavailable, GoUnavailable, ToolsUnavailable) as exc:
        print(f"dev-cluster: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    status = 0
    try:
        print(_instructions(cluster, args.tag), flush=True)
        while not stop.wait(1):
            for daemon in cluster.daemons:
                daemon.check_running()
    except RuntimeError as exc:  # a component exited: its log's tail says why
        print(f"dev-cluster: {exc}", file=sys.stderr)
        status = 1
    finally:
        print("stopping the cluster ...", flush=True)
        started = time.monotonic()
        cluster.stop()
        shutil.rmtree(args.dir, ignore_errors=True)
        print(f"stopped and removed in {time.monotonic() - started:.1f}s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
