"""etcd's client calls as a coreio worker makes them, through grpcio's asyncio client and through
the Rust extension (storage/etcd/native.py), side by side: the rate of one key's Range at N
concurrent calls, and the CPU of the whole process (every thread) a call, from `os.times`.

    .venv/bin/python -m bench.etcdcalls [--seconds 5] [--concurrency 1,16]

It starts its own etcd (tests.support.etcd). Without the extension built in place
(`COREIO_NATIVE=1 .venv/bin/python setup.py build_rust --inplace --release`) it measures grpcio
alone and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from aetcd import rpc

from apiserver.machinery.eventloop import run as run_loop
from apiserver.storage.etcd import native
from apiserver.storage.etcd.client import Client
from tests.support.etcd import EtcdProcess


async def _measure(endpoint: str, use_native: bool, concurrency: int, seconds: float) -> str:
    client = Client(
        [endpoint], ca_file=None, cert_file=None, key_file=None, request_timeout=10, use_native=use_native
    )
    await client.open()
    try:
        await client.call("kv", "Put", rpc.PutRequest(key=b"/bench-calls", value=b"x" * 600))
        request = rpc.RangeRequest(key=b"/bench-calls")
        calls = 0
        stop = time.monotonic() + seconds

        async def caller() -> None:
            nonlocal calls
            while time.monotonic() < stop:
                await client.call("raw_kv", "Range", request)
                calls += 1

        before, began = os.times(), time.monotonic()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        after, elapsed = os.times(), time.monotonic() - began
    finally:
        await client.close()
    cpu = (after.user - before.user) + (after.system - before.system)
    name = "extension" if use_native else "grpcio"
    return (
        f"c={concurrency:<3} {name:<9} {calls / elapsed:>8,.0f} calls/s"
        f"  {cpu / calls * 1e6:6.1f} us of CPU a call  ({cpu / elapsed:.0%} of a core)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.etcdcalls", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args()
    transports = [True, False] if native.available() else [False]
    if not native.available():
        print("the Rust extension is not built: grpcio alone")
    with EtcdProcess() as etcd:
        endpoint = etcd.client_url
        for concurrency in (int(part) for part in args.concurrency.split(",")):
            for use_native in transports:
                line = run_loop(_measure(endpoint, use_native, concurrency, args.seconds))
                print(line, flush=True)


if __name__ == "__main__":
    main()
