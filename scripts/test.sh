#!/usr/bin/env bash
# The test suite: sets up .venv if needed, then pytest. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
set +e
python -m pytest -q tests "$@"
rc=$?
[ $rc -eq 5 ] && echo "error: no tests were collected" >&2
exit $rc
