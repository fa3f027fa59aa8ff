"""python -m bench: one run of every measurement; see bench/README.md."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import phases, wrk
from bench.options import Options, parse
from bench.plot import plot
from bench.processes import start_stack, stop_on_signals
from bench.report import Row, markdown, to_json


def measure(options: Options, scratch: Path) -> list[Row]:
    phases.say("starting etcd, kube-apiserver, coreio on etcd and coreio on SQLite")
    stack = start_stack(scratch, options.coreio_args)
    try:
        rows = phases.ready_rows(stack)
        for target in stack.targets:
            phases.say(f"  {target.name} ready in {target.ready_seconds:.2f} s at {target.url}")
        rows += phases.reads(stack, options)
        for rate in options.watch_rates:
            phases.say(f"watch fan-out: {options.watchers} watchers, {rate:.0f} Events/s asked")
            rows += phases.watches(stack, options, rate)
        phases.say("creates")
        rows += phases.creates(stack, options, scratch)
        phases.say(f"memory with {options.rss_objects} Events stored")
        rows += phases.memory(stack, options)
        # Last: its creates would add to the Events the memory rows count.
        phases.say("GETs and creates with one coreio worker")
        rows += phases.one_worker(stack, options, scratch, rows)
    finally:
        stack.stop()
    return rows


def provenance(options: Options) -> str:
    """What was measured: the commit (and whether the tree had changes), coreio's extra flags."""
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
    )
    flags = " ".join(options.coreio_args) or "none"
    # The servers run `python -m apiserver` from here: compiled when the modules were built in place.
    compiled = importlib.util.find_spec("apiserver.apply.structure")
    modules = "compiled" if compiled and str(compiled.origin).endswith(".so") else "pure Python"
    return (
        f"coreio at {done.stdout.strip() or 'unknown'} ({modules} modules); extra coreio flags: {flags};"
        f" {os.cpu_count()} CPUs"
    )


def keep_logs(scratch: Path, logs: Path) -> None:
    """The servers' logs, kept with the results (the scratch directory goes)."""
    logs.mkdir(parents=True, exist_ok=True)
    for log in scratch.rglob("*.log"):
        shutil.copyfile(log, logs / log.name)


def write(options: Options, rows: list[Row], began: float) -> Path:
    options.out.mkdir(parents=True, exist_ok=True)
    minutes = (time.monotonic() - began) / 60
    kind = "--quick run" if options.quick else "run"
    heading = f"bench {kind} of {time.strftime('%Y-%m-%d %H:%M')} ({minutes:.0f} min)"
    table = markdown(rows, heading, provenance(options))
    (options.out / "results.md").write_text(table)
    (options.out / "results.json").write_text(to_json(rows))
    plot(rows, options.out / "results.png", heading)
    print(table)
    return options.out


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    stop_on_signals()
    try:
        wrk.wrk_binary()
    except wrk.WrkMissing as missing:
        print(f"bench: {missing}", file=sys.stderr)
        return 2
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="coreio-bench-") as scratch:
        try:
            rows = measure(options, Path(scratch))
        finally:
            keep_logs(Path(scratch), options.out / "logs")
    out = write(options, rows, began)
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
