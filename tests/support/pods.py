"""Runs the pod of a Deployment the operator wrote as a local process, where no kubelet runs.

What the kubelet and kube-proxy would do, done by hand, and no more:
- each Secret volume becomes a directory kept in sync with the Secret the way the kubelet's
  AtomicWriter keeps it: files are symlinks through `..data`, which is swapped in one rename when
  the Secret changes, so a running server sees its certificate files change in place;
- emptyDir and PersistentVolumeClaim volumes become empty directories;
- the container's command and args run as they are, with mount paths mapped to those directories;
  the pod's network is loopback: the server binds the Service's ClusterIP (the control plane's
  service CIDR lies in 127.0.0.0/8) on the Service port, standing in for kube-proxy's forwarding;
- the in-cluster credentials of the pod's ServiceAccount are handed over as a kubeconfig holding a
  token of that ServiceAccount from the TokenRequest API;
- once ready, the pod is published in the Service's Endpoints, as the endpoints controller would:
  the aggregator's availability check wants a ready address with the Service's port name. With
  `--enable-aggregator-routing=false` (the control plane's setting) traffic goes to the ClusterIP,
  so the address is never dialled: it is one of RFC 5737's documentation addresses, since
  Endpoints refuse loopback ones.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from apiserver.machinery.types import JSON
from tests.support.controlplane import ControlPlane

# RFC 5737 TEST-NET-1: valid in Endpoints, routed nowhere, and never dialled (see above).
POD_IP = "192.0.2.10"


class SecretVolume:
    """A directory that follows a Secret, as the kubelet's AtomicWriter lays it out."""

    def __init__(self, plane: ControlPlane, namespace: str, name: str, directory: Path) -> None:
        self.plane, self.namespace, self.name, self.directory = plane, namespace, name, directory
        self.version = ""
        self.updates = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)

    def _read(self) -> JSON:
        url = f"{self.plane.url}/api/v1/namespaces/{self.namespace}/secrets/{self.name}"
        with urllib.request.urlopen(url, context=self.plane.ssl_context(), timeout=10) as response:
            secret: JSON = json.load(response)
        return secret

    def sync(self) -> bool:
        """Writes the Secret's current data; True when it changed."""
        secret = self._read()
        version = str(secret["metadata"]["resourceVersion"])
        if version == self.version:
            return False
        stamp = datetime.datetime.now(datetime.UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")
        target = self.directory / stamp
        target.mkdir(parents=True)
        for key, value in (secret.get("data") or {}).items():
            (target / key).write_bytes(base64.b64decode(value))
            link = self.directory / key
            if not link.is_symlink():
                link.symlink_to(Path("..data") / key)
        swap = self.directory / "..data_tmp"
        swap.symlink_to(stamp)
        previous = (self.directory / "..data").resolve() if (self.directory / "..data").exists() else None
        os.replace(swap, self.directory / "..data")
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
        self.version = version
        self.updates += 1
        return True

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.sync()
        self._thread.start()

    def _follow(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self.sync()
            except OSError:
                continue  # the kubelet retries too

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class EmulatedPod:
    """One replica of `deployment` (a Deployment object as read from the cluster)."""

    def __init__(self, plane: ControlPlane, deployment: JSON, service: JSON, directory: Path) -> None:
        self.plane = plane
        self.deployment = deployment
        self.namespace = str(deployment["metadata"]["namespace"])
        self.address = str(service["spec"]["clusterIP"])
        self.port = int(service["spec"]["ports"][0]["port"])
        self.directory = directory
        self.secret_volumes: list[SecretVolume] = []
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pod_spec(self) -> JSON:
        spec: JSON = self.deployment["spec"]["template"]["spec"]
        return spec

    @property
    def log_file(self) -> Path:
        return self.directory / "pod.log"

    def _volume_dirs(self) -> dict[str, Path]:
        """mountPath -> local directory, populating Secret volumes."""
        volumes = {v["name"]: v for v in self.pod_spec.get("volumes", [])}
        mapped: dict[str, Path] = {}
        for mount in self.pod_spec["containers"][0].get("volumeMounts", []):
            volume = volumes[mount["name"]]
            local = self.directory / "volumes" / mount["name"]
            if "secret" in volume:
                secret = SecretVolume(self.plane, self.namespace, volume["secret"]["secretName"], local)
                secret.start()
                self.secret_volumes.append(secret)
            else:
                local.mkdir(parents=True, exist_ok=True)
            mapped[str(mount["mountPath"])] = local
        return mapped

    def _args(self, mapped: dict[str, Path]) -> list[str]:
        container = self.pod_spec["containers"][0]
        args = []
        for arg in [*container.get("command", [])[1:], *container.get("args", [])]:
            flag, _, value = str(arg).partition("=")
            for mount in sorted(mapped, key=len, reverse=True):
                if value == mount or value.startswith(mount + "/"):
                    value = str(mapped[mount]) + value[len(mount) :]
                    break
            if flag == "--bind-address":
                value = self.address
            elif flag == "--secure-port":
                value = str(self.port)
            args.append(f"{flag}={value}" if value else flag)
        return args

    def _credentials(self) -> Path:
        account = str(self.pod_spec.get("serviceAccountName", "default"))
        token = self.plane.create_token(account, self.namespace, duration="2h", create=False)
        return self.plane.user_kubeconfig(self.directory / "in-cluster.kubeconfig", token=token)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        container = self.pod_spec["containers"][0]
        assert container["command"] == ["coreio-apiserver"], container["command"]
        args = [*self._args(self._volume_dirs()), f"--kubeconfig={self._credentials()}"]
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "apiserver", *args], stdout=log, stderr=subprocess.STDOUT
            )
        self.wait_ready()
        self.publish(ready=True)

    def publish(self, *, ready: bool) -> None:
        """The Service's Endpoints with this pod as a ready (or not ready) address."""
        service = self.deployment["metadata"]["name"]
        ports = self.pod_spec["containers"][0]["ports"]
        subset: JSON = {
            "addresses" if ready else "notReadyAddresses": [{"ip": POD_IP}],
            "ports": [{"name": p["name"], "port": p["containerPort"], "protocol": "TCP"} for p in ports],
        }
        endpoints = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": service, "namespace": self.namespace},
            "subsets": [subset],
        }
        self.plane.run("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(endpoints))

    def wait_ready(self, timeout: float = 30.0) -> None:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the probe's kubelet too
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"pod exited: {self.log_file.read_text()[-3000:]}")
            try:
                url = f"https://{self.address}:{self.port}/readyz"
                with urllib.request.urlopen(url, context=context, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"pod not ready: {self.log_file.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.publish(ready=False)
        for volume in self.secret_volumes:
            volume.stop()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
