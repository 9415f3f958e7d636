#!/usr/bin/env bash
# The test suite: sets .venv up if needed (idempotent), then pytest inside it.
# Extra arguments go to pytest: `bash scripts/test.sh -k masking -x`, `... tests/test_model.py`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
# the whole suite unless a test file or directory was named
paths=(tests)
for arg in "$@"; do [[ $arg != -* && -e ${arg%%::*} ]] && paths=(); done
set +e
python -m pytest -q ${paths[@]+"${paths[@]}"} "$@"
rc=$?
# pytest's 5 means no test was collected: for CI that is a failure, not a pass
[ $rc -eq 5 ] && echo "test.sh: error: no tests were collected" >&2
exit $rc
