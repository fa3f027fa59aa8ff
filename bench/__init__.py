"""The benchmark of issue 11: coreio against a real kube-apiserver on one etcd, loaded with wrk.

Run `python -m bench --help` from the repository root; bench/README.md describes what it measures.
"""
