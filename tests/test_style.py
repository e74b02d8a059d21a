"""The code base stays ruff clean (configuration in pyproject.toml)."""

import subprocess
import sys

from tests.conftest import ROOT


def test_ruff_clean() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]
