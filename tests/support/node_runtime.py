"""The real node's container runtime: containerd (Debian's) with the CNI bridge, run in the node's
network namespace with every path under the node's directory, and the images it runs.

No registry is reachable, so nothing is pulled: the sandbox image is a static `pause` compiled
from the few lines of C below and put in an image `FROM scratch`; coreio's image is the one
`tests.support.image` builds from the Dockerfile. Both go from Docker's daemon to containerd's
`k8s.io` namespace with `docker save | ctr images import`.

This machine's root lacks CAP_SYS_RESOURCE, so containerd must not lower pods' OOM score
adjustment below its own (`restrict_oom_score_adj`)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

from tests.support.netns import Daemon, NetworkNamespace

PAUSE_IMAGE = "coreio.invalid/pause:3.10"
POD_SUBNET = "10.244.0.0/24"
_PAUSE_C = r"""
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, stop);
  signal(SIGTERM, stop);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
"""


def _run(argv: list[str], *, timeout: float = 300, stdin: IO[bytes] | None = None) -> str:
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}  # BuildKit would fetch its frontend from a registry
    done = subprocess.run(argv, stdin=stdin, capture_output=True, timeout=timeout, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.decode(errors='replace').strip()[-2000:]}")
    return done.stdout.decode(errors="replace")


def containerd_config(directory: Path) -> str:
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{directory}/root"
state = "{directory}/state"
[grpc]
  address = "{directory}/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{directory}/opt"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{directory}/runc"
[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{directory}/cni"
"""


def cni_config() -> str:
    """One bridge for the pods, the node as their gateway; no masquerade (nothing leaves)."""
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "pods",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        },
        indent=2,
    )


class ContainerRuntime:
    def __init__(self, netns: NetworkNamespace, directory: Path) -> None:
        self.netns = netns
        self.directory = directory
        self.daemon: Daemon | None = None
        self._namespaces_before: set[str] = set()

    @property
    def socket(self) -> Path:
        return self.directory / "containerd.sock"

    def start(self) -> None:
        self._namespaces_before = set(_pod_namespaces())
        (self.directory / "cni").mkdir(parents=True, exist_ok=True)
        (self.directory / "cni" / "10-pods.conflist").write_text(cni_config())
        config = self.directory / "config.toml"
        config.write_text(containerd_config(self.directory))
        self.daemon = Daemon(
            self.netns, "containerd", ["containerd", "--config", str(config)], self.directory
        )
        self.daemon.start()
        deadline = time.monotonic() + 30
        while not self.socket.exists() or not self._answers():
            self.daemon.check_running()
            if time.monotonic() > deadline:
                raise TimeoutError(f"containerd did not start:\n{self.daemon.log_tail()}")
            time.sleep(0.2)

    def _answers(self) -> bool:
        done = subprocess.run(self.ctr("version"), capture_output=True, timeout=10, check=False)
        return done.returncode == 0

    def ctr(self, *args: str) -> list[str]:
        return ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args]

    def import_from_docker(self, docker: str, tag: str) -> None:
        """`docker save tag | ctr images import -`, as a pipe: the import reads the image (half a
        gigabyte) while docker writes it, rather than after."""
        with subprocess.Popen(
            [docker, "save", tag], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        ) as saving:
            assert saving.stdout is not None
            try:
                _run(self.ctr("images", "import", "--no-unpack", "-"), stdin=saving.stdout)
            finally:
                saving.stdout.close()
                _, errors = saving.communicate(timeout=300)
            if saving.returncode != 0:
                raise RuntimeError(f"{docker} save {tag}: {errors.decode(errors='replace').strip()[-2000:]}")

    def images(self) -> list[str]:
        return _run(self.ctr("images", "list", "-q")).split()

    def stop(self) -> None:
        """containerd, then every container it left (the kubelet does not stop pods on exit)."""
        if self.daemon is None:
            return  # never started: nothing of ours to remove
        runc_root = self.directory / "runc" / "k8s.io"
        if runc_root.is_dir():
            listed = subprocess.run(
                ["runc", "--root", str(runc_root), "list", "-q"], capture_output=True, text=True, check=False
            )
            for container in listed.stdout.split():
                subprocess.run(
                    ["runc", "--root", str(runc_root), "delete", "--force", container],
                    capture_output=True,
                    check=False,
                )
        if self.daemon is not None:
            self.daemon.stop()
        subprocess.run(["pkill", "-f", f"containerd-shim.*{self.socket}"], capture_output=True, check=False)
        # The pods' network namespaces, which containerd pins under /run/netns: CNI never tore
        # down the pods killed above, so their files stay until removed.
        for name in set(_pod_namespaces()) - self._namespaces_before:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def _pod_namespaces() -> list[str]:
    with contextlib.suppress(OSError):
        return [name for name in os.listdir("/run/netns") if name.startswith("cni-")]
    return []


def pause_image(docker: str) -> str:
    """The sandbox image, built once into Docker's daemon from `_PAUSE_C`."""
    if subprocess.run([docker, "image", "inspect", PAUSE_IMAGE], capture_output=True).returncode == 0:
        return PAUSE_IMAGE
    with tempfile.TemporaryDirectory(prefix="coreio-pause-") as scratch:
        work = Path(scratch)
        (work / "pause.c").write_text(_PAUSE_C)
        _run(["gcc", "-Os", "-static", "-o", str(work / "pause"), str(work / "pause.c")])
        (work / "Dockerfile").write_text(
            'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n'
        )
        _run([docker, "build", "--tag", PAUSE_IMAGE, str(work)])
    return PAUSE_IMAGE


def unmount_under(directory: Path) -> None:
    """Lazily unmounts whatever the kubelet and containerd left mounted below `directory`."""
    with contextlib.suppress(OSError):
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for target in sorted((m for m in mounts if m.startswith(f"{directory}/")), reverse=True):
            subprocess.run(["umount", "-l", target], capture_output=True, check=False)
