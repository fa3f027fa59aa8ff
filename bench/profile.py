"""Where one coreio worker spends its time under load: py-spy records it while wrk GETs one Event,
creates Events or lists 10,000 of them (one namespace, unpaged, as the benchmark's full LIST), or
while the bench's watch fan-out runs (200 watches, Events written at 1,000/s asked: bench.watch),
on a fresh etcd 3.6 (the bench's) or on SQLite, and the hottest functions are printed, by inclusive
and by own time. The profiles the closing notes quote come from here:

    .venv/bin/python -m bench.profile get       # or: create, list, watch; --connections 16 --seconds 7
    .venv/bin/python -m bench.profile watch --storage sqlite --workers 2

Needs wrk and py-spy (`pip install -e '.[bench]'`); py-spy may need ptrace rights (root, or
CAP_SYS_PTRACE in a container).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import client, wrk
from bench.events import body_template, generated_name_template
from bench.processes import Target, start_coreio, write_token_file
from bench.watch import fan_out
from tests.support.etcd import EtcdProcess

NAMESPACE = "profile"
LISTED = 10_000  # Events stored for `list`, the benchmark's --list-objects


def summary(raw: str, top: int = 30) -> str:
    """py-spy's raw (collapsed) stacks as two tables: each function's share of the samples with
    everything it called (counted once a stack), then its own share."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = [_frame(frame) for frame in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] += samples
        own[frames[-1]] += samples
    lines = [f"{total} samples", "-- with what it calls", *_shares(inclusive, total, top), "-- own"]
    return "\n".join([*lines, *_shares(own, total, top)])


def _shares(counts: collections.Counter[str], total: int, top: int) -> list[str]:
    """The `top` largest, largest first (ties by name, so that a summary reads the same twice)."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:top]
    return [f"{100 * n / total:5.1f}%  {name}" for name, n in ranked]


def _frame(frame: str) -> str:
    """`function (path/file.py:line)` -> `function (file.py)`."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.split(':')[0].rsplit('/', 1)[-1]})" if where else name


def _load(target: Target, mode: str, scratch: Path, generate: bool) -> tuple[str, str, list[str]]:
    """(url, wrk script, its arguments) for `mode`; `generate`: creates name their Events by
    `metadata.generateName`, as the benchmark's second create row."""
    asyncio.run(client.fill(target, NAMESPACE, "profiled", LISTED if mode == "list" else 1))
    if mode == "list":
        return target.url + target.events_path(NAMESPACE), "read.lua", [target.token]
    if mode == "get":
        return target.url + target.events_path(NAMESPACE) + "/profiled-0", "read.lua", [target.token]
    body = scratch / "body.json"
    template = generated_name_template if generate else body_template
    body.write_text(template(target.group_version, NAMESPACE))
    path = target.events_path(NAMESPACE)
    return target.url + path, "create.lua", [path, target.token, f"p{secrets.token_hex(3)}", str(body)]


def _recorder(
    spy: str, target: Target, seconds: float, workers: int, raw: Path, *, gil: bool
) -> subprocess.Popen[bytes]:
    command = [spy, "record", "-p", str(target.pid), "-d", str(int(seconds)), "-r", "250"]
    if gil:
        command.append("--gil")  # only the thread holding the GIL: no thread counted while it waits
    if workers != 1:
        command.append("--subprocesses")  # the supervisor only waits; its workers serve
    return subprocess.Popen([*command, "-f", "raw", "-o", str(raw)], stdout=subprocess.DEVNULL)


def _loaded(
    target: Target, mode: str, connections: int, seconds: float, load: tuple[str, str, list[str]]
) -> str:
    """Loads `target` for `seconds` as `mode` asks (wrk's url, script and arguments in `load`);
    what the load achieved, in a line."""
    if mode == "watch":
        got = fan_out(target, 200, 1000.0, seconds)
        written = f"{got.rate:,.0f} Events/s written"
        return f"watch, 200 watches: {written}, p99 {got.p99 * 1000:.0f} ms, {got.lost} lost"
    url, script, args = load
    result = wrk.run(url, connections, seconds + 2, script, args)
    return f"{mode} c={connections}: {result.rate:,.0f}/s, {result.errors} errors"


def profile(
    mode: str,
    connections: int,
    seconds: float,
    workers: int,
    storage: str,
    *,
    generate: bool = False,
    gil: bool = False,
    keep: Path | None = None,
) -> str:
    """The summary of one profile; `keep`: where py-spy's raw stacks are copied, for a closer look."""
    # Installed beside this Python (a virtualenv not on PATH), or on PATH.
    beside = Path(sys.executable).parent / "py-spy"
    spy = str(beside) if beside.exists() else shutil.which("py-spy")
    if spy is None:
        raise SystemExit("bench.profile: py-spy is missing: pip install -e '.[bench]'")
    with tempfile.TemporaryDirectory(prefix="coreio-profile-") as directory:
        scratch = Path(directory)
        etcd = EtcdProcess() if storage == "etcd" else None
        flags = [f"--workers={workers}"]
        if etcd is not None:
            flags += ["--etcd-servers", etcd.start(), "--etcd-prefix", "/profile"]
        token_file, token = write_token_file(scratch)
        target = start_coreio(f"coreio-{storage}", scratch, token_file, token, flags)
        try:
            raw = scratch / "profile.txt"
            # The load is set up before recording.
            load = ("", "", []) if mode == "watch" else _load(target, mode, scratch, generate)
            recorder = _recorder(spy, target, seconds, workers, raw, gil=gil)
            achieved = _loaded(target, mode, connections, seconds, load)
            recorder.wait(timeout=seconds + 30)
            if keep is not None:
                shutil.copyfile(raw, keep)
            return f"{achieved} ({storage}, {workers} worker(s))\n" + summary(raw.read_text())
        finally:
            target.stop()
            if etcd is not None:
                etcd.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("get", "create", "list", "watch"))
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=7.0)
    parser.add_argument("--workers", type=int, default=1, help="coreio workers (the profile is the first's)")
    parser.add_argument("--storage", choices=("etcd", "sqlite"), default="etcd")
    parser.add_argument("--generate-name", action="store_true", help="create: Events named by generateName")
    parser.add_argument("--gil", action="store_true", help="sample only the thread that holds the GIL")
    parser.add_argument("--keep", type=Path, help="copy py-spy's raw stacks to this file")
    options = parser.parse_args(argv)
    print(
        profile(
            options.mode,
            options.connections,
            options.seconds,
            options.workers,
            options.storage,
            generate=options.generate_name,
            gil=options.gil,
            keep=options.keep,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
