#!/usr/bin/env bash
# The test suite: sets .venv up if needed (idempotent), lints (ruff with the rules of
# pyproject.toml and shellcheck with those of .shellcheckrc: both must be clean), then runs pytest.
# Extra arguments go to pytest: `bash scripts/test.sh -k masking -x`, `... tests/test_model.py`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
echo "test.sh: ruff check and shellcheck"
ruff check --quiet . || { echo "test.sh: error: ruff check failed (see above)" >&2; exit 1; }
mapfile -t shell_scripts < <(find scripts .ci -type f \( -name '*.sh' -o -path .ci/run \) | sort)
shellcheck "${shell_scripts[@]}" || { echo "test.sh: error: shellcheck failed (see above)" >&2; exit 1; }
# the whole suite unless a test file or directory was named
paths=(tests)
for arg in "$@"; do [[ $arg != -* && -e ${arg%%::*} ]] && paths=(); done
set +e
python -m pytest -q ${paths[@]+"${paths[@]}"} "$@"
rc=$?
# pytest's 5 means no test was collected: for CI that is a failure, not a pass
[ $rc -eq 5 ] && echo "test.sh: error: no tests were collected" >&2
exit $rc
