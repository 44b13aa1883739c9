"""Runs the examples of python/README.md: every ```python block right after a
`<!-- tested by python/tests/test_readme.py -->` line, in a fresh working folder, with the
README's relative `examples/` paths pointing at this source tree. Blocks that import torch are
skipped without it.
"""
import os
import re
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("KORCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
README = ROOT / "python" / "README.md"
MARK = "<!-- tested by python/tests/test_readme.py -->"


def readme_blocks():
    text = README.read_text()
    blocks = re.findall(re.escape(MARK) + r"\n```python\n(.*?)\n```", text, flags=re.S)
    assert len(blocks) == text.count(MARK), "a tested mark not followed by a ```python block"
    return blocks


@pytest.mark.parametrize("index", range(len(readme_blocks())))
def test_readme_example(index, tmp_path, monkeypatch):
    code = readme_blocks()[index]
    if re.search(r"^import torch", code, flags=re.M):
        pytest.importorskip("torch")
    if "torchvision" in code:
        pytest.importorskip("torchvision")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KORCH_CACHE_DIR", str(tmp_path / "cache"))
    code = code.replace('"examples/', f'"{ROOT}/examples/')
    exec(compile(code, f"{README}:example {index}", "exec"), {"__name__": f"readme_example_{index}"})
