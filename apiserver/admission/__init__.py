"""Admission plugins that apply to every kind, as k8s.io/apiserver's generic admission chain has them."""
