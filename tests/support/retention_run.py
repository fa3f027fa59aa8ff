"""The operator's Event retention as the chart sets it up, one run in a process of its own.

The run's process imports what the operator's holds (`apiserver_operator.main`: kopf and all), then
calls `retention.collect_events` with a KubeClient as the operator's daemon does; its client only
also times its GETs, which in a run are the pages of the lists (the rest of the run is deleting).
Its peak memory is its own: the process's VmHWM.

    python -m tests.support.retention_run KUBECONFIG POLICY_JSON    # prints one line of JSON

The chart's settings are read from charts/coreio: the Installation's eventRetention (the CRD's
defaults under the values' spec), the API server's worker count the operator gives it, and the
operator's memory limit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from apiserver.cluster.connection import load_kubeconfig
from apiserver.machinery.types import JSON
from apiserver_operator import children, retention
from apiserver_operator.kube import KubeClient
from apiserver_operator.spec import EventRetention, InstallationSpec, parse_spec

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "coreio"
UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


# ----------------------------------------------------------------------------- the chart


def _chart_values() -> Any:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def chart_spec() -> InstallationSpec:
    """The spec of the Installation the chart creates: its values' spec, with the CRD's defaults
    for eventRetention (which the API server fills in), read as the operator reads a spec."""
    crd = yaml.safe_load((CHART / "crds" / "installations.operator.core.io.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["storage"]]
    spec_fields = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    fields = spec_fields["eventRetention"]["properties"]
    defaults = {name: field["default"] for name, field in fields.items() if "default" in field}
    spec = dict(_chart_values()["installation"]["spec"])
    spec["eventRetention"] = {**defaults, **spec.get("eventRetention", {})}
    return parse_spec(spec)


def chart_server_args() -> list[str]:
    """The API server's worker count as the operator gives it under the chart's spec."""
    resources = chart_spec().resources
    return [f"--workers={children.workers(resources.limits, resources.requests)}"]


def mebibytes(quantity: str) -> float:
    """A Kubernetes memory quantity (256Mi, 1Gi, 300M, 268435456) in MiB."""
    match = re.fullmatch(r"(\d+)(|[kMG]|[KMG]i)", quantity)
    if match is None:
        raise ValueError(f"not a memory quantity read here: {quantity!r}")
    return int(match[1]) * UNITS[match[2]] / 2**20


def chart_memory_limit_mib() -> float:
    """The operator's memory limit in the chart's values."""
    return mebibytes(str(_chart_values()["operator"]["resources"]["limits"]["memory"]))


# ----------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class RunFigures:
    """The run's report, the seconds it waited for list pages, and its process's peak memory."""

    report: retention.RetentionReport
    list_seconds: float
    peak_mib: float

    @property
    def delete_seconds(self) -> float:
        """The rest of the run: the deletes (and reading the pages, a small share)."""
        return self.report.duration_seconds - self.list_seconds


def peak_rss_mib() -> float:
    """This process's peak resident memory: its VmHWM. Not ru_maxrss, which Linux carries over
    exec from the process that started this one (a test runner's 150 MiB would be this one's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


class _TimedClient(KubeClient):
    listing = 0.0

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON:
        started = time.monotonic()
        try:
            return await super().get(path, params)
        finally:
            self.listing += time.monotonic() - started


async def _run(kubeconfig: Path, policy: EventRetention) -> JSON:
    client = _TimedClient(load_kubeconfig(kubeconfig))
    try:
        report = await retention.collect_events(client, policy)
    finally:
        await client.close()
    fields = dataclasses.asdict(report)
    fields["run_time"] = report.run_time.isoformat()
    return {"report": fields, "list_seconds": client.listing, "peak_mib": peak_rss_mib()}


def run_in_process(kubeconfig: Path, policy: EventRetention, timeout: float = 600) -> RunFigures:
    """One `collect_events` run under `policy` against the server of `kubeconfig`, in a new process."""
    argv = [sys.executable, "-m", __name__, str(kubeconfig), policy.model_dump_json(by_alias=True)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"the retention run failed ({done.returncode}):\n{done.stderr[-4000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    fields = dict(answer["report"], run_time=datetime.fromisoformat(answer["report"]["run_time"]))
    report = retention.RetentionReport(**fields)
    return RunFigures(report, float(answer["list_seconds"]), float(answer["peak_mib"]))


def main() -> None:
    # What the operator's process holds before its first run, counted in the peak as there.
    importlib.import_module("apiserver_operator.main")
    kubeconfig, policy = Path(sys.argv[1]), EventRetention.model_validate_json(sys.argv[2])
    print(json.dumps(asyncio.run(_run(kubeconfig, policy))))


if __name__ == "__main__":
    main()
