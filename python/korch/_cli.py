"""The `korch` console script of the pip package: runs the korch command-line tool.

pip installs the native CLI at korch/bin/korch inside the package; main() replaces the Python
process with it (same arguments, exit status and output as ./build/korch). Also runnable as
``python -m korch``.
"""
import os
import sys
from pathlib import Path


def cli_path() -> Path:
    """The native korch executable installed with this package."""
    return Path(__file__).resolve().parent / "bin" / "korch"


def main() -> None:
    exe = cli_path()
    if not os.access(exe, os.X_OK):
        sys.exit(
            f"korch: the command-line tool is not installed at {exe} (it is part of the pip package; "
            "in a CMake build tree run build/korch)"
        )
    os.execv(exe, ["korch", *sys.argv[1:]])
