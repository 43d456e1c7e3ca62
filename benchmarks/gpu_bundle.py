"""Prepare what ``gpu_check.py`` needs on a lent GPU machine that cannot reach any package index.

The machine (``.library/device``: one H200, Python 3.12 with PyTorch, numba, scipy, typer, rich,
pyyaml, ...) lacks stormpy and cvxpy's stack, and the reference models in ``../shared/benchmarks``
do not travel with the working tree. This script, run here once, writes the folder ``.gpu/`` (git
ignores it; carry it):

* ``.gpu/site.tar.xz``: the wheels of the missing packages for CPython 3.12 on manylinux x86-64,
  unpacked and compressed with xz (stormpy's wheel alone is 49 MB zipped; the whole carried tree
  must stay under 64 MiB). Pinned to the versions installed here. ``scs`` (43 MB) and
  ``sparsediffpy`` (12 MB) are left out: cvxpy imports them only for solvers we never use (Clarabel,
  HiGHS and OSQP are in); package test folders are dropped.
* ``.gpu/shared/benchmarks``: a copy of the reference models (600 KB).

Then, on the GPU machine (``run`` with ``carry=[".gpu"]``)::

    bash benchmarks/gpu_device.sh          # unpacks, checks the imports, runs gpu_check.py into $OUT

Usage here::

    python benchmarks/gpu_bundle.py [--python-version 3.12] [--out .gpu]
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "benchmarks"
#: what the device image lacks of our dependencies' closure (numpy, scipy, numba, typer, rich,
#: pyyaml, jinja2, joblib, setuptools, wrapt are there; KINDS.md lists the image's packages)
PACKAGES = ("stormpy", "Deprecated", "cvxpy", "clarabel", "highspy", "osqp", "qdldl", "cffi", "pycparser")
LIMIT = 64 * 2**20
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
EXTRA_GLIBC = ("", "24", "31", "34", "35")


def download(name: str, version: str, py: str, dest: Path) -> Path:
    """The wheel of ``name==version`` for CPython ``py`` on x86-64 manylinux (pip matches glibc tags exactly)."""
    before = set(dest.glob("*.whl"))
    for n in EXTRA_GLIBC:
        platforms = PLATFORMS + ((f"manylinux_2_{n}_x86_64",) if n else ())
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", py,
               "--implementation", "cp", "-d", str(dest), f"{name}=={version}"]
        for p in platforms:
            cmd += ["--platform", p]
        if subprocess.run(cmd, capture_output=True, text=True).returncode == 0:
            new = set(dest.glob("*.whl")) - before
            if new:
                return new.pop()
            # already there from an earlier run
            key = name.lower().replace("-", "_")
            return next(p for p in dest.glob("*.whl") if p.name.lower().startswith(f"{key}-{version}"))
    raise SystemExit(f"gpu_bundle: pip found no CPython {py} x86-64 wheel of {name}=={version}")


def unpack(wheel: Path, site: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if "tests" in parts[:-1] or "__pycache__" in parts:
                continue
            z.extract(info, site)


def compress(site: Path, target: Path) -> None:
    """``tar | xz -9`` (multi-threaded when the xz program is here; else Python's lzma)."""
    tmp = target.with_suffix(".tmp")
    if shutil.which("xz"):
        with tmp.open("wb") as f:
            tar = subprocess.Popen(["tar", "cf", "-", "-C", str(site), "."], stdout=subprocess.PIPE)
            subprocess.run(["xz", "-9", "-T0", "-c"], stdin=tar.stdout, stdout=f, check=True)
            if tar.wait() != 0:
                raise SystemExit("gpu_bundle: tar failed")
    else:
        with tarfile.open(tmp, "w:xz", preset=9) as t:
            t.add(site, arcname=".")
    tmp.replace(target)


def tree_bytes() -> int:
    """Bytes of the working tree that travels (tracked and untracked, not ignored)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    return sum((ROOT / p).stat().st_size for p in out.decode().split("\0") if p and (ROOT / p).is_file())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python-version", default="3.12", help="the GPU machine's Python (default 3.12)")
    ap.add_argument("--out", default=str(ROOT / ".gpu"), help="bundle folder (default .gpu in the repository)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "wheels"
    cache.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        site.mkdir()
        for name in PACKAGES:
            version = md.version(name)
            wheel = download(name, version, args.python_version, cache)
            unpack(wheel, site)
            print(f"{name}=={version}: {wheel.name} ({wheel.stat().st_size / 1e6:.1f} MB)", flush=True)
        (site / "MOPMC_BUNDLE").write_text("\n".join(f"{n}=={md.version(n)}" for n in PACKAGES) + "\n")
        print("compressing (xz -9; a minute or two) ...", flush=True)
        compress(site, out / "site.tar.xz")
    shutil.rmtree(cache)  # the wheels must not travel too
    if not SHARED.is_dir():
        raise SystemExit(f"gpu_bundle: {SHARED}: the reference models are missing")
    dst = out / "shared" / "benchmarks"
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(SHARED, dst)
    bundle = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    tree = tree_bytes()
    print(f"wrote {out}: {bundle / 2**20:.1f} MiB (site.tar.xz {(out / 'site.tar.xz').stat().st_size / 2**20:.1f} MiB); "
          f"working tree {tree / 2**20:.1f} MiB; together {(bundle + tree) / 2**20:.1f} of {LIMIT / 2**20:.0f} MiB")
    if bundle + tree > LIMIT:
        print("gpu_bundle: too large to travel: drop packages or models", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
