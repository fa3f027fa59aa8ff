"""Entry point of `coreio-operator` (filled in by the operator issue)."""

import sys


def main() -> None:
    sys.stderr.write("coreio-operator: not built yet; see the operator issue\n")
    raise SystemExit(2)
