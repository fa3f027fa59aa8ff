"""The coreio chart (charts/coreio) rendered by the real Helm, for the tests that read what it renders:
the values every test renders with, `helm template` with `--set`/`--set-json`, picking objects out,
and what makes an object unfit for GitOps."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support import manifests
from tests.support.helm import Helm
from tests.support.manifests import load_yaml_documents

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "coreio"
RELEASE, NAMESPACE, KUBE_VERSION = "coreio", "coreio-system", "1.33.0"
REPOSITORY = "registry.example.com/coreio"
IMAGE = f"{REPOSITORY}:0.1.0"

Obj = dict[str, Any]


class ChartHelm(Helm):
    def template(self, *sets: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Renders with `sets`, and with image.repository (required) unless `sets` names it."""
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", KUBE_VERSION]
        if not any(value.startswith("image.repository=") for value in sets):
            sets = (f"image.repository={REPOSITORY}", *sets)
        return self.run(*args, *set_args(sets), check=check)


def set_args(sets: tuple[str, ...]) -> list[str]:
    """`--set path=value`, or `--set-json` when the value is a JSON list or object."""
    args: list[str] = []
    for value in sets:
        is_json = value.partition("=")[2][:1] in ("[", "{")
        args += ["--set-json" if is_json else "--set", value]
    return args


def render(helm: ChartHelm, *sets: str) -> list[Obj]:
    return load_yaml_documents(helm.template(*sets).stdout)


def only(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [o for o in objs if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} rendered"
    return found[0]


def is_test_hook(obj: Obj) -> bool:
    return bool(obj["metadata"].get("annotations", {}).get("helm.sh/hook") == "test")


def is_uninstall_hook(obj: Obj) -> bool:
    return bool(obj["metadata"].get("annotations", {}).get("helm.sh/hook") == "pre-delete")


def gitops_problems(obj: Obj) -> list[str]:
    """Nulls, empty maps or lists, Helm annotations outside the two hooks: what Argo CD or Flux
    would show as drift forever, or what says Helm where Helm does not apply it."""
    name = manifests.describe(obj)
    problems = [f"{name} {path}: null" for path, value in walk(obj) if value is None]
    problems += [f"{name} {path}: empty" for path, value in walk(obj) if value in ({}, [])]
    helm_annotations = [a for a in obj["metadata"].get("annotations", {}) if a.startswith("helm.sh/")]
    if helm_annotations and not (is_test_hook(obj) or is_uninstall_hook(obj)):
        problems.append(f"{name}: Helm annotations {helm_annotations}")
    return problems


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path or ".", value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, f"{path}[{index}]")
