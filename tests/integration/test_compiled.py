"""The same tests against the compiled modules (issue 24): the wheels and the image carry the modules
pyproject.toml names compiled with mypyc, while the rest of the suite runs the source tree. Here a
copy of the tracked files gets the wheel's beside their sources (an extension module is imported
before the source beside it) and the unit suite and the API's own integration tests run there (on
SQLite: the one storage module compiled, etcd's wire.py, is proven by its unit test against
protobuf's own parse), with the servers they start importing the same compiled modules.

mypyc compiles what type-checks and can still answer differently at run time: a native class takes
no attribute it does not declare, a dataclass cannot be an exception, and a call between compiled
functions ignores a monkeypatch. Those differences fail here, not in a user's cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.source_tree import MODULE_FILES, compiled_modules, tracked_copy

# The API tests that drive the compiled modules hardest: managed fields and apply (apiserver.apply),
# decoding and field validation (schema), writes and lists (strategy, stored, objectmeta).
INTEGRATION = (
    "tests/integration/test_server_side_apply.py",
    "tests/integration/test_api_writes.py",
    "tests/integration/test_field_validation.py",
    "tests/integration/test_decode_errors.py",
    "tests/integration/test_api_list_watch.py",
)

# Unit tests that reach no compiled module (the benchmark's parts, the documents, the code's
# shape, the operator's command line): the same with either build, so not run twice.
NOT_COMPILED = (
    "tests/unit/test_bench.py",
    "tests/unit/test_docs.py",
    "tests/unit/test_code_shape.py",
    "tests/unit/test_operator_cli.py",
)


def _run(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COREIO_MYPYC": "1", "PYTHONPATH": str(cwd), "COREIO_TEST_BACKENDS": "sqlite"}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def compiled_tree(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tracked files with the wheel's compiled modules (conftest.py builds it once a
    run, for test_wheel.py too) beside their sources, where a build in place would put them."""
    tree = tracked_copy(tmp_path_factory.mktemp("compiled"))
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        extensions = [name for name in archive.namelist() if name.endswith(".so")]
        assert extensions, archive.namelist()
        for name in extensions:
            archive.extract(name, tree)
    return tree


def test_the_copy_imports_every_named_module_compiled(compiled_tree: Path) -> None:
    done = _run([sys.executable, "-c", MODULE_FILES, *compiled_modules()], compiled_tree, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    files = done.stdout.split()
    assert len(files) == len(compiled_modules())
    assert all(f.startswith(str(compiled_tree)) and f.endswith(".so") for f in files), files


def test_the_unit_and_api_tests_pass_against_the_compiled_modules(compiled_tree: Path) -> None:
    done = _run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "tests/unit"),
            *INTEGRATION,
            *(f"--ignore={path}" for path in NOT_COMPILED),
        ],
        compiled_tree,
        timeout=900,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in summary and " failed" not in summary, summary


def test_a_module_mypyc_refuses_falls_back_to_pure_python_unless_required(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A compiled module that no longer type-checks (a newer pydantic's types, say) leaves an `auto`
    build pure, with one line, and fails a COREIO_MYPYC=1 build (the image's) outright."""
    tree = tracked_copy(tmp_path_factory.mktemp("refused"))
    with (tree / "apiserver" / "machinery" / "gotime.py").open("a") as module:
        module.write('\n_REFUSED: int = "not an int"\n')
    command = [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"]
    env = {**os.environ, "PYTHONPATH": str(tree), "COREIO_NATIVE": "0"}  # mypyc's alone
    env.pop("COREIO_MYPYC", None)
    fallback = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    assert fallback.returncode == 0, fallback.stderr[-3000:]
    assert "coreio build: mypyc could not compile" in fallback.stderr
    assert not list(tree.rglob("*.so"))
    required = subprocess.run(
        command, cwd=tree, env={**env, "COREIO_MYPYC": "1"}, capture_output=True, text=True, timeout=300
    )
    assert required.returncode != 0
