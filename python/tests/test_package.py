"""Tests of the installed package: run with KORCH_TEST_INSTALLED=1 (as CTest's python_korch does,
after pip-installing korch into its venv), they check that `import korch` found the pip-installed
package (not a build tree or the source folder) and that the `korch` console script and
``python -m korch`` run the command-line tool. Without KORCH_TEST_INSTALLED they are skipped.
"""
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import korch

ROOT = Path(os.environ.get("KORCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
MODEL = ROOT / "examples" / "tiny_cnn" / "model.onnx"

pytestmark = pytest.mark.skipif(
    os.environ.get("KORCH_TEST_INSTALLED") != "1", reason="tests the pip-installed package (KORCH_TEST_INSTALLED=1)"
)


def test_korch_is_the_installed_package():
    site = Path(sysconfig.get_paths()["platlib"]).resolve()
    assert Path(korch.__file__).resolve().parent == site / "korch"
    assert (site / "korch" / "bin" / "korch").is_file()


def test_console_script_runs_the_cli():
    script = Path(sys.executable).parent / "korch"
    out = subprocess.run([str(script), "inspect", str(MODEL)], capture_output=True, text=True, check=True).stdout
    assert "structural hash:" in out
    bad = subprocess.run([str(script), "inspect", str(MODEL.with_name("missing.onnx"))], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr.startswith("error:")


def test_python_dash_m_korch():
    out = subprocess.run(
        [sys.executable, "-m", "korch", "inspect", str(MODEL)], capture_output=True, text=True, check=True
    ).stdout
    assert "structural hash:" in out
