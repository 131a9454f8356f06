"""Shared fixtures: a way to run the real CLI in a subprocess, and small data files."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest


def run_cli(*args, input=None, cwd=None, env=None):
    """Run ``python -m dynid ARGS`` and return the CompletedProcess (bytes stdout/stderr)."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "dynid", *map(str, args)],
        input=input,
        capture_output=True,
        cwd=cwd,
        env=full_env,
        timeout=300,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def linear_csv(tmp_path):
    """A noise-free 2-D damped rotation sampled at dt=0.1 (uniform), 300 samples."""
    theta, decay = 0.2, 0.99
    a = decay * np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    x = np.zeros((300, 2))
    x[0] = [1.0, 0.0]
    for k in range(299):
        x[k + 1] = a @ x[k]
    path = tmp_path / "linear.csv"
    pd.DataFrame({"t": np.arange(300) * 0.1, "p": x[:, 0], "q": x[:, 1]}).to_csv(path, index=False)
    return path
