"""The Python examples of docs/examples/ run as they are documented: each
checks its own result and exits non-zero (printing MISMATCH) when it is wrong."""
import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "docs" / "examples"


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs_and_checks_itself(name):
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, env=dict(os.environ),
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MISMATCH" not in done.stdout
    assert done.stdout.strip(), "the example printed nothing"
