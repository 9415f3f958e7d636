#!/usr/bin/env bash
# The GPU comparison in one call: PMLM vs stock fairseq roberta_base pre-training, PMLM vs the
# naive one-instance-per-step way, fp16 vs the plugin's bf16, decoding vs bart_base; prints one
# markdown table (device, commit, ratios) for docs/BENCHMARKS.md. The work is scripts/bench_gpu.py.
#
#   bash scripts/bench_gpu.sh [--wheels DIR] [--smoke] [--peak-tflops N] [--profile FILE] [--attention A] [--compile]
#                             [--ceiling] [--rounds N] [--log FILE]
#
# Environment: the python on PATH if it imports torch and fairseq_pmlm; else .venv is set up by
# scripts/setup_env.sh (needs a package index), or, with --wheels DIR, on a machine without one
# that has its own (CUDA) torch: that python and torch stay, and only what it lacks comes from DIR
# (PMLM_WHEELS=DIR, which every recipe's set-up honours). Fill DIR on a connected machine:
#   python scripts/fetch_wheels.py DIR --python-version 3.12 [--have TARGET_PIP_FREEZE]
# --smoke: tiny sizes on the CPU in well under a minute (the tests run it). --profile FILE: also
# the kernels of one PMLM update as shares of the measured update, with named totals (attention,
# relative bias, optimizer, copies), into FILE. --attention auto|sdpa|flex|triton|both|auto+triton:
# PMLM's attention path (both: the default rows plus flex rows; auto+triton: the default rows plus
# the Triton kernel's, in the same rounds). --compile: also the PMLM rows with --compile-layers
# (torch.compile of each layer). --rounds N: the compared rows (roberta, AE+PAR fp16/bf16, AE) measured N
# times in turn, medians and the ratios' range. --log FILE: keep the full log (fairseq's and torch's
# lines, a flex fallback's reason) there; by default it is shown only if the run fails.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
declare -A FLAGS=([--wheels]=WHEELS [--smoke]=SMOKE:switch [--peak-tflops]=PEAK [--profile]=PROFILE
                  [--attention]=ATTENTION [--compile]=COMPILE:switch [--ceiling]=CEILING:switch [--rounds]=ROUNDS
                  [--log]=LOG)
WHEELS='' SMOKE='' PEAK='' PROFILE='' ATTENTION='' COMPILE='' CEILING='' ROUNDS='' LOG=''
parse_flags "$@"
args=()
if [ -n "$SMOKE" ]; then args+=(--smoke); fi
if [ -n "$PEAK" ]; then args+=(--peak-tflops "$PEAK"); fi
if [ -n "$PROFILE" ]; then args+=(--profile "$(abs_path "$PROFILE")"); fi
if [ -n "$ATTENTION" ]; then args+=(--attention "$ATTENTION"); fi
if [ -n "$COMPILE" ]; then args+=(--compile); fi
if [ -n "$CEILING" ]; then args+=(--ceiling); fi
if [ -n "$ROUNDS" ]; then
  [[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer: $ROUNDS"
  args+=(--rounds "$ROUNDS")
fi
if [ -n "$LOG" ]; then
  [ -d "$(dirname "$LOG")" ] || die "--log $LOG: no such directory $(dirname "$LOG")"
  log=$(abs_path "$LOG")
  (: > "$log") 2> /dev/null || die "--log $LOG: cannot write there"
fi
if [ -n "$WHEELS" ]; then
  [ -d "$WHEELS" ] || die "--wheels $WHEELS: no such directory"
  export PMLM_WHEELS
  PMLM_WHEELS="$(cd "$WHEELS" && pwd)"
fi
cd "$ROOT"
if [ -n "$WHEELS" ] || ! python -c "import torch, fairseq, fairseq_pmlm" > /dev/null 2>&1; then
  # shellcheck source=setup_env.sh
  source scripts/setup_env.sh
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# fairseq logs every step to stdout: keep it out of the table, but show it if the run fails; the
# script's own progress lines (one per measured row) show live on stderr
if [ -z "$LOG" ]; then
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
fi
# Ctrl-C and SIGTERM reach the whole group: tee and grep outlive them (signals ignored) so that the
# bench can clean up and say it was interrupted into a pipe that is still there
set +e
python scripts/bench_gpu.py ${args[@]+"${args[@]}"} 2>&1 | (trap '' INT TERM; tee "$log") |
  (trap '' INT TERM; grep --line-buffered '^bench_gpu: ' >&2 || true)
status=${PIPESTATUS[0]}
set -e
if [ "$status" -eq 130 ]; then
  echo "bench_gpu.sh: interrupted (no table)" >&2
  exit 130
elif [ "$status" -ne 0 ]; then
  tail -40 "$log" >&2
  echo "bench_gpu.sh: error: scripts/bench_gpu.py failed (log above)" >&2
  exit 1
fi
sed -n '/^device: /,$p' "$log"
