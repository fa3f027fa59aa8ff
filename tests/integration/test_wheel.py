"""What users install (issue 21, part 1): the wheel and sdist built from this tree (conftest.py),
the wheel installed into a fresh virtualenv outside the checkout, and the README's start command run
as written in a copy of the tracked files. The rest of the suite runs the source tree (an editable
install), which hides a package missing from the wheel: three were, and `pip install .` gave a server
that could not start (`No module named 'apiserver.admission'`).

Needs PyPI (the build's setuptools and the wheel's dependencies, through pip's cache)."""

from __future__ import annotations

import os
import re
import signal
import ssl
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.source_tree import MODULE_FILES, RUST_MODULES, compiled_modules
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("apiserver", "apiserver_operator", "kubectl_coreio", "coreio_export")
SCRIPTS = ("coreio-apiserver", "coreio-operator", "kubectl-coreio", "coreio-export")
README_PORT = 8443


def _tree_packages() -> set[str]:
    """Every package of the source tree, dotted."""
    found = set()
    for init in ROOT.glob("*/**/__init__.py"):
        dotted = ".".join(init.parent.relative_to(ROOT).parts)
        if dotted.split(".")[0] in PACKAGES:
            found.add(dotted)
    return found


def _tree_modules() -> set[str]:
    """Every module of the source tree but the packages themselves and `__main__`s, dotted, and the
    Rust extensions."""
    found = set()
    for module in ROOT.glob("*/**/*.py"):
        parts = module.relative_to(ROOT).with_suffix("").parts
        if parts[0] in PACKAGES and parts[-1] != "__main__":
            found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return (found | set(RUST_MODULES)) - set(PACKAGES)


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv, outside the checkout, with the wheel installed: its bin directory."""
    venv = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", venv, cwd=venv)
    (wheel,) = dist.glob("*.whl")
    _run(venv / "bin" / "pip", "install", "--quiet", wheel, cwd=venv)
    return venv / "bin"


def test_the_wheel_and_the_sdist_hold_every_package(dist: Path) -> None:
    expected = _tree_packages()
    assert {"apiserver.admission", "apiserver.cluster", "apiserver.storage.cacher"} <= expected
    (wheel,) = dist.glob("*.whl")
    in_wheel = {
        ".".join(Path(name).parent.parts)
        for name in zipfile.ZipFile(wheel).namelist()
        if name.endswith("/__init__.py")
    }
    assert in_wheel == expected, (expected - in_wheel, in_wheel - expected)
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        members = {Path(m).relative_to(Path(m).parts[0]).as_posix() for m in archive.getnames()}
    for package in expected:
        assert f"{package.replace('.', '/')}/__init__.py" in members, package


def test_every_module_imports_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    """Outside the checkout, so nothing is imported from the source tree."""
    program = (
        "import importlib, pkgutil, sys\n"
        f"for top in {PACKAGES!r}:\n"
        "    package = importlib.import_module(top)\n"
        "    assert 'site-packages' in package.__file__, package.__file__\n"
        "    for info in pkgutil.walk_packages(package.__path__, top + '.'):\n"
        "        if info.name.endswith('.__main__'):\n"
        "            continue  # `python -m`: importing it runs the program\n"
        "        importlib.import_module(info.name)\n"
        "        print(info.name)\n"
    )
    imported = set(_run(installed / "python", "-c", program, cwd=tmp_path).split())
    assert imported == _tree_modules(), (_tree_modules() - imported, imported - _tree_modules())


def test_the_wheel_carries_the_compiled_modules_and_loads_them(
    dist: Path, installed: Path, tmp_path: Path
) -> None:
    """Each module pyproject.toml names is in the wheel as an extension beside its source, and so is
    etcd's Rust extension; the installed server imports them."""
    (wheel,) = dist.glob("*.whl")
    assert f"-cp3{sys.version_info.minor}-" in wheel.name, wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    for module in compiled_modules():
        stem = module.replace(".", "/")
        assert f"{stem}.py" in names, module
        assert any(n.startswith(f"{stem}.cpython-") and n.endswith(".so") for n in names), module
    assert "apiserver/storage/etcd/_rpc.abi3.so" in names
    modules = [*compiled_modules(), *RUST_MODULES]
    loaded = _run(installed / "python", "-c", MODULE_FILES, *modules, cwd=tmp_path).split()
    assert len(loaded) == len(modules) and all(line.endswith(".so") for line in loaded), loaded


def test_without_a_compiler_the_wheel_is_pure_python(source: Path, tmp_path: Path) -> None:
    """Where no C compiler and no cargo are found, the build says so in a line each and installs the
    pure modules."""
    directories = os.environ["PATH"].split(os.pathsep)
    path = os.pathsep.join(d for d in directories if not (Path(d) / "cargo").exists())
    env = {**os.environ, "CC": "/nonexistent/cc", "PATH": path}
    env.pop("COREIO_MYPYC", None)
    env.pop("COREIO_NATIVE", None)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path, source],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr
    assert "coreio build: no C compiler (/nonexistent/cc): the pure-Python modules are installed" in said
    assert "coreio build: no cargo (Rust): etcd's calls go through grpcio" in said
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_console_script_answers_help(installed: Path, tmp_path: Path, script: str) -> None:
    assert "usage:" in _run(installed / script, "--help", cwd=tmp_path).lower()


def _readme_start_command() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Start the server", 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert block, "the README's start command"
    return block.group(1).strip()


@pytest.fixture
def readme_server(source: Path, tmp_path: Path) -> Iterator[Path]:
    """The README's start command, as written, in a copy of the tracked files, with a HOME of its own
    (where the data directory goes): the data directory it made."""
    with_port_free = subprocess.run(
        ["ss", "-Htln", f"sport = :{README_PORT}"], capture_output=True, text=True
    )
    if with_port_free.stdout.strip():
        pytest.fail(f"port {README_PORT}, the README's default, is taken on this machine")
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("XDG_DATA_HOME", None)
    env.pop("VIRTUAL_ENV", None)
    process = subprocess.Popen(
        ["bash", "-c", _readme_start_command()],
        cwd=source,
        env=env,
        stdout=(tmp_path / "out.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield tmp_path / ".local" / "share" / "coreio"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def test_the_readme_start_command_serves(readme_server: Path, tmp_path: Path) -> None:
    ca = readme_server / "pki" / "ca.crt"

    def ready() -> bool:
        if not ca.exists():
            return False
        context = ssl.create_default_context(cafile=str(ca))
        with urllib.request.urlopen(f"https://127.0.0.1:{README_PORT}/readyz", context=context) as answer:
            assert answer.status == 200
            return True

    wait_until(
        ready,
        timeout=480,  # the first pip install fetches the dependencies
        interval=0.5,
        message=lambda: "/readyz: " + (tmp_path / "out.log").read_text()[-4000:],
        ignoring=(OSError,),
    )
