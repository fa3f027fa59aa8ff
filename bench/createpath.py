"""The Python of a create on its own (issue 24): decoding the body, the kind's decode and field
validation, managed fields, the create strategy and the stored encoding, in µs per create, in this
process with no server, for the modules of the tree it runs in (compiled in place or not):

    .venv/bin/python -m bench.createpath           # the source tree as it is
    COREIO_MYPYC=1 .venv/bin/python setup.py build_ext --inplace && .venv/bin/python -m bench.createpath

It says which it ran. The body is the bench's Event (bench/events.py); the best of three rounds of
18,000 creates counts, after 2,000 to warm up.
"""

from __future__ import annotations

import argparse
import json
import time

from apiserver.apply import structure
from apiserver.apply.fieldmanager import FieldManager
from apiserver.http.codec import decode_json
from apiserver.machinery.options import WriteOptions
from apiserver.registry import decode, strategy
from apiserver.registry.stored import StoredObjects
from apiserver.resources.event import EventKind
from bench.events import event_body

WARM_UP = 2_000
ROUND = 18_000


def per_create(rounds: int) -> float:
    """The best round's µs per create."""
    kind, options = EventKind(), WriteOptions(field_manager="bench")
    manager = FieldManager(kind)
    bodies = [
        json.dumps(event_body("events.core.io/v1", "default", f"e{i}")).encode()
        for i in range(WARM_UP + ROUND)
    ]

    def create(raw: bytes) -> bytes:
        obj = decode.decode_body(kind, decode_json(raw).value, options, [], ())
        obj = manager.create(obj, "bench", reset=False)
        strategy.prepare_and_validate_create(kind, obj)
        return StoredObjects.encode(obj)

    for body in bodies[:WARM_UP]:
        create(body)
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        for body in bodies[WARM_UP:]:
            create(body)
        best = min(best, (time.perf_counter() - began) / ROUND * 1e6)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.createpath", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args(argv)
    compiled = "compiled" if str(structure.__file__).endswith(".so") else "pure Python"
    print(f"the Python of a create ({compiled} modules): {per_create(options.rounds):.1f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
