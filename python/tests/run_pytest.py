"""CTest entry point for the korch Python tests: runs pytest with the given arguments.

Exits 77 (reported by CTest as "skipped") when pytest or numpy is not installed for this
interpreter, so that a build without the Python test dependencies does not fail the suite.
"""
import sys

try:
    import numpy  # noqa: F401
    import pytest
except ImportError as e:  # pragma: no cover
    print(f"skipping the korch Python tests: {e} (install pytest and numpy for {sys.executable})")
    sys.exit(77)

sys.exit(pytest.main(sys.argv[1:]))
