"""The Python snippets of README.md and docs/gpu.md run as written (the walkthrough found gpu.md's
using names it never defined), and give the answers the query code gives independently of them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _snippets(doc: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / doc).read_text(), flags=re.S)


def _run(code: str, cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_readme_python_snippets(tmp_path):
    snippets = _snippets("README.md")
    assert len(snippets) == 2
    out = _run(snippets[0], tmp_path).split()
    assert out[:2] == ["47", "66"] and (tmp_path / "mini_switch.umb").stat().st_size > 0
    lines = _run(snippets[1], tmp_path).splitlines()
    status, value = lines[0].split()
    assert status == "optimal"
    # min time with energy <= 4: the mixture of always-fast and always-slow meeting energy = 4
    fast, slow = (1.2 / 0.98, 5.2 / 0.98), ((3 + 1 / 0.6 * 0.5 + 1) / 0.9, (1 + 0.5 * 0.5 / 0.6 + 1) / 0.9)
    lam = (4 - slow[1]) / (fast[1] - slow[1])
    assert float(value) == pytest.approx(lam * fast[0] + (1 - lam) * slow[0], abs=1e-4)
    assert lines[1].startswith("optimal ")


def test_gpu_doc_snippet_runs_on_cpu(tmp_path):
    pytest.importorskip("torch")
    (snippet,) = _snippets("docs/gpu.md")
    _run(snippet + "\nassert r.values.shape == (2,) and res.status == 'optimal', (r, res.status)\n", tmp_path)
