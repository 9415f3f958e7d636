#!/usr/bin/env bash
# Idempotent set-up of .venv with the pinned stack; sourced by demo.sh and test.sh.
# ve-fairseq goes in with --no-deps: it declares torchaudio, which would pull a CUDA torch.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.pmlm-installed"
want=$(cat "$ROOT/requirements.txt" "$ROOT/setup.py" | sha1sum | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  python3 -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
# pip warns that ve-fairseq's torchaudio is missing: that is intended, hide the noise
pipq() { pip install -q "$@" 2> >(grep -vE "torchaudio|dependency (resolver|conflicts)|WARNING: Location" >&2); }
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing the pinned requirements (about 2 minutes the first time)"
  pipq --upgrade pip
  pipq "$(grep '^torch==' "$ROOT/requirements.txt")"
  pipq --no-deps "$(grep '^ve-fairseq==' "$ROOT/requirements.txt")"
  grep -vE '^(#|torch==|ve-fairseq==|$)' "$ROOT/requirements.txt" > "$VENV/.rest.txt"
  # the constraint keeps any dependency from swapping torch for another build
  echo "$(grep '^torch==' "$ROOT/requirements.txt")" > "$VENV/.constraints.txt"
  pipq -r "$VENV/.rest.txt" -c "$VENV/.constraints.txt"
  pipq --no-deps -e "$ROOT" 2>/dev/null
  python -c "import torch, fairseq, fairseq_pmlm; assert torch.__version__.startswith('2.13.0'), torch.__version__" \
    || { echo "setup: error: the installed stack does not import (see above)" >&2; exit 1; }
  echo "$want" > "$STAMP"
  echo "setup: done"
fi
