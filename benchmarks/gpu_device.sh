#!/usr/bin/env bash
# The GPU check on a lent GPU machine, from the repository root, with the bundle carried:
#
#   here:   python benchmarks/gpu_bundle.py            # once: writes .gpu/ (git ignores it)
#   there:  run(command="bash benchmarks/gpu_device.sh", carry=[".gpu"], timeout_s=540)
#
# Unpacks the missing packages (stormpy, cvxpy, ...) into /tmp/site, points the reference models at
# the bundle's copy, checks the imports, then runs benchmarks/gpu_check.py; the CSV and the log go to
# $OUT (they come back), else to benchmarks/results; then the torch engine's tests
# (tests/engine/test_torch_engine.py, its CUDA cases included) into $OUT/pytest_cuda.log, within
# 200 s (the Triton tests too); when gpu_check fails with the default (Triton) kernels, it runs
# again with MOPMC_TORCH_KERNELS=torch. With MOPMC_GPU_PREP=1 it also runs benchmarks/prep.py on
# Model A n=200 (0 and 15 workers, three rounds, within 150 s) into $OUT/prep_cuda.md: the engine's
# preprocessing and the torch engine's set-up on the device, with the machine's 16 CPUs. Extra
# arguments go to gpu_check.py. Exits with gpu_check.py's status, else pytest's.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ ! -f .gpu/site.tar.xz ]; then
  echo "gpu_device.sh: .gpu/site.tar.xz is missing: run python benchmarks/gpu_bundle.py here and carry .gpu" >&2
  exit 2
fi
mkdir -p /tmp/site
if ! tar xJf .gpu/site.tar.xz -C /tmp/site 2>/dev/null; then  # no xz program: Python's lzma
  python3 -c "import tarfile; tarfile.open('.gpu/site.tar.xz').extractall('/tmp/site')" || exit 2
fi
export PYTHONPATH="/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export MOPMC_SHARED="$PWD/.gpu/shared/benchmarks" PYTHONUNBUFFERED=1
out="${OUT:-benchmarks/results}"
mkdir -p "$out"
nvidia-smi -L 2>&1 | head -2
python3 - <<'EOF' || exit 2
import sys, numpy, numba, scipy, torch, stormpy, cvxpy, clarabel, highspy
print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}, scipy {scipy.__version__}, numba {numba.__version__}, "
      f"torch {torch.__version__} (cuda {torch.cuda.is_available()}), stormpy {stormpy.__version__}, cvxpy {cvxpy.__version__}")
EOF
python3 benchmarks/gpu_check.py --out "$out/gpu_check_cuda.csv" "$@" 2>&1 | tee "$out/gpu_check.log"
check=$?
if [ "$check" -ne 0 ] && [ -z "${MOPMC_TORCH_KERNELS:-}" ]; then  # the timings with torch operations at least
  echo "# gpu_check failed with the default kernels; again with MOPMC_TORCH_KERNELS=torch"
  MOPMC_TORCH_KERNELS=torch python3 benchmarks/gpu_check.py --skip-table --out "$out/gpu_check_cuda_torchops.csv" "$@" 2>&1 |
    tee "$out/gpu_check_torchops.log" | tail -n 40
fi
if [ -n "${MOPMC_GPU_PREP:-}" ]; then
  echo "# benchmarks/prep.py: preprocessing and the torch engine's set-up, 0 and 15 workers"
  timeout 150 python3 benchmarks/prep.py --cases A200 --threads 0,15 --repeat 3 --device cuda --out "$out/prep_cuda.md" 2>&1 | tail -n 6
fi
echo "# tests/engine/test_torch_engine.py and test_triton_levels.py (CPU and CUDA cases)"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_torch_engine.py tests/engine/test_triton_levels.py 2>&1 | tee "$out/pytest_cuda.log" | tail -n 25
tests=$?
[ "$check" -ne 0 ] && exit "$check"
exit "$tests"
