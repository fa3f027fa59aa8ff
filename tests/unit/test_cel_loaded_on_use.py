"""The CEL engine loads when an expression is first compiled, not with the server (about 50 ms of
every start and restart that a cluster without policies or matchConditions never needs)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import apiserver.cel

ENGINE = ("cel_expr_python", "apiserver.cel.program", "apiserver.cel.library", "apiserver.cel.cost")


def test_the_server_starts_without_the_engine() -> None:
    program = (
        "import sys\n"
        "import apiserver.cli, apiserver.app, apiserver.admission.policy.plugin, "
        "apiserver.admission.webhook.plugins\n"
        f"print(sorted(m for m in {ENGINE!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_its_names_load_the_engine_on_first_use() -> None:
    program = apiserver.cel.compile_expression("object.x > 1", ("object",))
    assert program.run({"object": {"x": 2}}).result() is True
    assert isinstance(apiserver.cel.CompileError("x"), Exception)
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        _ = apiserver.cel.Nothing
