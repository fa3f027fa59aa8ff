"""`python -m apiserver`: the coreio-apiserver command."""

from apiserver.cli import main

main()
