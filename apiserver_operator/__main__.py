"""`python -m apiserver_operator`: the same as `coreio-operator`."""

from apiserver_operator.main import main

main()
