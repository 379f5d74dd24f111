"""Shared fixtures of the Python module's tests (ctest python_tests).

ctest sets PYTHONPATH to the build's python/ folder, PHASOR_CLI to the `phasor`
executable and PHASOR_EXAMPLE_RUN to the run folder example_train_sample
trained; PHASOR_REQUIRE_ALL=1 (CI) turns a missing import into a failure.
"""
import importlib
import os
import pathlib
import subprocess

import pytest


@pytest.fixture(scope="session")
def torch():
    """PyTorch, or a skip where it is missing (a failure under PHASOR_REQUIRE_ALL)."""
    if os.environ.get("PHASOR_REQUIRE_ALL") == "1":
        return importlib.import_module("torch")
    return pytest.importorskip("torch")


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("PHASOR_CLI")
    if not path:
        pytest.fail("PHASOR_CLI is not set: run these tests through ctest (python_tests)")
    return path


@pytest.fixture(scope="session")
def run_dir():
    run = os.environ.get("PHASOR_EXAMPLE_RUN")
    if not run or not (pathlib.Path(run) / "latest").exists():
        pytest.fail("PHASOR_EXAMPLE_RUN holds no trained run: run these tests through ctest (after example_train_sample)")
    return pathlib.Path(run)


@pytest.fixture(scope="session")
def checkpoint(run_dir):
    return run_dir / (run_dir / "latest").read_text().strip() / "model.safetensors"


@pytest.fixture(scope="session")
def text_file(run_dir):
    """The held-out text train() wrote beside the checkpoints."""
    return run_dir / "validation.txt"


@pytest.fixture(scope="session")
def run_cli(cli):
    """run_cli(*args): (exit status, stdout, stderr) of `phasor ARGS`."""
    # The sanitizer run (scripts/ci_sanitize.sh, its python_tests) preloads the shared ASan
    # runtime into the interpreter; the CLI carries its own, and refuses a second.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}

    def run(*args):
        done = subprocess.run([cli, *map(str, args)], capture_output=True, text=True, check=False, env=env)
        return done.returncode, done.stdout, done.stderr
    return run
