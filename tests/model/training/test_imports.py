"""The training layer (and the modules it stands on) imports without pypinyin,
pyahocorasick and safetensors (bundles only), as on the lent GPU machine's image, and so do the
entry modules that run there (``python -m model.train --no-eval --no-export``, ``python -m
model.ship pack``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# None in sys.modules makes `import name` raise ImportError, as a missing package does
BLOCKED = """
import importlib, pkgutil, sys
sys.modules["pypinyin"] = None
sys.modules["ahocorasick"] = None
sys.modules["safetensors"] = None
import model.net, model.training
layers = (model.net, model.training)
names = [m.name for p in layers for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")]
for name in names + ["model.train", "model.ship"]:
    importlib.import_module(name)
print(len(names), "data.tones" in sys.modules, "data.sensitive" in sys.modules)
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_training_imports_without_pypinyin_and_pyahocorasick() -> None:
    done = run(BLOCKED)
    assert done.returncode == 0, done.stderr
    count, tones, sensitive = done.stdout.split()
    assert int(count) >= 10 and tones == sensitive == "False"


def test_the_block_is_real() -> None:
    # (the tone module reads pypinyin's tables from their cache; deriving them needs pypinyin)
    code = "import data.tones; data.tones._derive_tables()\nimport model.net, model.training"
    done = run(BLOCKED.replace("import model.net, model.training", code))
    assert done.returncode != 0 and "pypinyin" in done.stderr


def test_the_bundle_format_needs_safetensors_and_the_block_hides_it() -> None:
    done = run(BLOCKED.replace("import model.net, model.training", "import model.store.weights"))
    assert done.returncode != 0 and "safetensors" in done.stderr
