#!/usr/bin/env bash
# The test suite: sets .venv up if needed (idempotent), lints (ruff with the rules of
# pyproject.toml and shellcheck with those of .shellcheckrc: both must be clean), then runs pytest.
# Extra arguments go to pytest: `bash scripts/test.sh -k masking -x`, `... tests/test_model.py`.
# Test files run in PMLM_TEST_WORKERS processes (default 2, pytest-xdist, a file's tests in one
# process so that its module fixtures are built once), each with its share of the cores as torch's
# threads (OMP_NUM_THREADS, unless set); PMLM_TEST_WORKERS=0 runs them in this one, on every core.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
# the suite's packages are optional in a set-up from a folder of wheels (requirements.txt)
missing_tool() {
  echo "test.sh: error: the suite needs $1, which is not installed (requirements.txt marks it optional:" \
    "scripts/setup_env.sh installs it, from a PMLM_WHEELS folder when it has its wheel)" >&2
  exit 2
}
# Each worker's processes get their share of the cores as torch's threads: torch's default (every
# core) in each of two workers on two cores had their OpenMP threads spin against each other, and
# the suite took 452 s of pytest where it takes 402 with one thread each (13.7 -> 11.9 min of CPU)
workers=${PMLM_TEST_WORKERS:-2}
[[ $workers =~ ^[0-9]+$ ]] || { echo "test.sh: error: PMLM_TEST_WORKERS must be a whole number: $workers" >&2; exit 2; }
if [ "$workers" -gt 0 ]; then
  threads=$(( $(nproc) / workers ))
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( threads > 0 ? threads : 1 ))}"
  export MKL_NUM_THREADS="${MKL_NUM_THREADS:-$OMP_NUM_THREADS}"
fi
python -c "import pytest, xdist" 2> /dev/null || missing_tool "pytest and pytest-xdist"
for tool in ruff shellcheck; do command -v $tool > /dev/null || missing_tool $tool; done
echo "test.sh: ruff check and shellcheck"
ruff check --quiet . || { echo "test.sh: error: ruff check failed (see above)" >&2; exit 1; }
mapfile -t shell_scripts < <(find scripts .ci -type f \( -name '*.sh' -o -path .ci/run \) | sort)
shellcheck "${shell_scripts[@]}" || { echo "test.sh: error: shellcheck failed (see above)" >&2; exit 1; }
# the whole suite unless a test file or directory was named
paths=(tests)
for arg in "$@"; do [[ $arg != -* && -e ${arg%%::*} ]] && paths=(); done
# torch 2.13's compile cache leaves ATEN_CPU_CAPABILITY out of its key: code compiled natively and
# read back under the AVX2 emulation (or the reverse) gave wrong results and heap corruption. One
# cache folder per setting keeps the suite's runs on both settings apart
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-${TMPDIR:-/tmp}/torchinductor_${USER:-$(id -u)}_${ATEN_CPU_CAPABILITY:-native}}"
set +e
python -m pytest -q -n "$workers" --dist loadfile ${paths[@]+"${paths[@]}"} "$@"
rc=$?
# pytest's 5 means no test was collected: for CI that is a failure, not a pass
[ $rc -eq 5 ] && echo "test.sh: error: no tests were collected" >&2
exit $rc
