"""The wheel carries the files the code reads at run time, and the service runs from it
without the crawler, plotting or benchmark stacks (issue 26, item 7).

Built from a copy of the checkout (git's files), so the checkout gets no build/ folder;
unpacked, not installed, and run with the unpacked folder first on sys.path.
"""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Import names of the stacks the service must not need (redis is the serve extra's: the limits
# and the result cache replicas share)
NOT_FOR_SERVING = ("scrapy", "scrapy_redis", "matplotlib", "datasketch", "sacrebleu", "httpx")

CHECK = """
import importlib, importlib.abc, pkgutil, sys
from pathlib import Path
blocked = set(sys.argv[2].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"{name} is not part of the serve install")
sys.meta_path.insert(0, Block())
site = Path(sys.argv[1]).resolve()
TRAINING = {  # the entry modules, and the modules under them that read BLEU (sacrebleu)
    *("model.train", "model.evaluate", "model.blind", "model.ship", "model.card"),
    *("model.training.run", "model.training.pack"),
    *("model.release.evaluate", "model.release.card", "model.release.blind", "model.release.finish"),
    *("model.release.metrics", "model.release.eval_files", "model.release.eval_tables"),
    *("model.release.card_sections", "model.release.card_header"),
}
import data, model, serve
for package in (data, model, serve):
    assert Path(package.__file__).resolve().is_relative_to(site), package.__file__
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        # Training and evaluation (BLEU, the plot) are the train extra's, not the service's.
        if info.name not in TRAINING:
            importlib.import_module(info.name)
from data.normalize import Normalizer
assert Normalizer()("春風") == "春风"
presets = sorted(p.stem for p in (site / "model" / "training" / "presets").glob("*.json"))
assert {"tiny", "cpu", "gpu"} <= set(presets), presets
from serve.settings import Settings
settings = Settings()
assert (settings.web_dir / "index.html").is_file(), settings.web_dir
from data.paths import default_model_dir
bundle = default_model_dir()
assert bundle.resolve().is_relative_to(site) and (bundle / "MODEL_CARD.md").is_file(), bundle
print("ok", len(presets), "presets")
"""


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return [p for p in out.split("\0") if p and (ROOT / p).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is needed to copy the checkout")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in tracked_files():
        if name.startswith(("tests/", "docs/")):
            continue
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp / "out"),
            ".",
        ],
        cwd=src,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (found,) = (tmp / "out").glob("duilian-*.whl")
    return found


@pytest.mark.slow
def test_wheel_carries_the_run_time_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    page = (ROOT / "web" / "index.html").read_text(encoding="utf-8")
    scripts = [f"web/{s}" for s in re.findall(r'<script src="/static/([^"]+)"', page)]  # the page's parts
    assert "web/app.js" in scripts
    for name in (
        "data/variants.txt",
        "data/sensitive_allow.txt",
        "web/index.html",
        *scripts,
        "web/style.css",
    ):
        assert name in names
    presets = {n for n in names if n.startswith("model/training/presets/") and n.endswith(".json")}
    assert {"model/training/presets/tiny.json", "model/training/presets/cpu.json"} <= presets
    assert "models/default/MODEL_CARD.md" in names
    assert not [n for n in names if n.startswith(("tests/", "work/"))]


@pytest.mark.slow
def test_serving_needs_neither_crawler_nor_plotting_nor_benchmarks(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        metadata = email.message_from_bytes(whl.read("duilian-0.1.0.dist-info/METADATA"))
    requires = metadata.get_all("Requires-Dist") or []
    core = [r for r in requires if "extra ==" not in r]
    serve = [r for r in requires if 'extra == "serve"' in r]
    for name in ("scrapy", "matplotlib", "datasketch", "torch"):
        assert not [r for r in core if r.lower().startswith(name)], core
    for name in ("scrapy", "matplotlib", "datasketch"):
        assert not [r for r in serve if r.lower().startswith(name)], serve
    pinned = [r for r in requires if "==" in r.split(";")[0]]
    assert [r for r in serve if r.startswith("torch")] and not pinned, pinned


@pytest.mark.slow
def test_the_unpacked_wheel_runs_without_the_other_stacks(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    result = subprocess.run(
        [sys.executable, "-c", CHECK, str(site), ",".join(NOT_FOR_SERVING)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("ok")
