#!/usr/bin/env bash
# Idempotent set-up of .venv (repo root) with the pinned stack of requirements.txt.
# Run it, or `source` it to also get the venv activated (test.sh and demo.sh do).
# Installs only when the stamp (a hash of the requirement lines + setup.py) is stale, so
# an edit to either triggers a reinstall and an unchanged checkout costs nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "${BASH_SOURCE[0]}" = "$0" ] && [ $# -gt 0 ]; then  # run, not sourced: it takes no arguments
  # shellcheck source=lib/common.sh
  source "$ROOT/scripts/lib/common.sh"
  case $1 in
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $1 (it takes none; see --help)" ;;
  esac
fi
VENV="$ROOT/.venv"
REQ="$ROOT/requirements.txt"
STAMP="$VENV/.pmlm-installed"
TORCH=$(grep -E '^torch==' "$REQ")
# packages whose declared dependencies must not be installed (see requirements.txt)
mapfile -t NODEPS < <(grep -E '^[^#]+#\s*no-deps' "$REQ" | cut -d' ' -f1)
want=$( (grep -vE '^\s*(#|$)' "$REQ"; cat "$ROOT/setup.py") | sha1sum | cut -d' ' -f1)

if [ -n "${PMLM_WHEELS-}" ]; then
  # A machine without a package index (a GPU machine with its own CUDA torch): its python and
  # torch stay, and only what it lacks of requirements.txt (dev lines aside) comes from the
  # folder of wheels (scripts/fetch_wheels.sh fills one), into a .venv that sees its packages.
  wheel_error() { echo "setup_env: error: $*" >&2; exit 2; }
  [ -d "$PMLM_WHEELS" ] || wheel_error "PMLM_WHEELS=$PMLM_WHEELS: no such directory"
  PY=${PMLM_PYTHON:-python3}
  "$PY" -c "import torch" 2> /dev/null ||
    wheel_error "$PY cannot import torch (PMLM_WHEELS keeps the machine's torch; PMLM_PYTHON names another python)"
  want=$( (grep -vE '^\s*(#|$)' "$REQ"; cat "$ROOT/setup.py"
           "$PY" -c "import sys, torch; print(sys.executable, torch.__version__)") | sha1sum | cut -d' ' -f1)
  if [ "$(cat "$STAMP" 2> /dev/null)" != "$want" ]; then
    echo "setup_env: installing what $PY lacks from $PMLM_WHEELS (its torch stays)"
    # a venv of that python that sees its packages: its site directories in a .pth, after the
    # venv's own (--system-site-packages would show the base interpreter's, and the machine's
    # python is often a venv itself)
    rm -rf "$VENV"
    "$PY" -m venv --without-pip "$VENV"
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
    "$PY" -c "import site, sys; print('\n'.join(p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))))" \
      > "$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/machine-packages.pth"
    rm -f "$STAMP"
    # "NAME==VERSION deps|nodeps" of each requirement not installed at any version
    mapfile -t missing < <(python "$ROOT/scripts/lib/missing_requirements.py" "$REQ")
    deps=() nodeps=()
    for m in ${missing[@]+"${missing[@]}"}; do
      if [ "${m#* }" = nodeps ]; then nodeps+=("${m% *}"); else deps+=("${m% *}"); fi
    done
    echo "setup_env:   missing: ${deps[*]-} ${nodeps[*]-}"
    wheels() {  # pip's failure as one line naming what the folder lacks
      local log
      python -m pip --version > /dev/null 2>&1 ||
        wheel_error "$PY has no pip to install from $PMLM_WHEELS with: install it (python3 -m ensurepip, or" \
          "the python3-pip package) and rerun"
      log=$(python -m pip install -q --no-index --find-links "$PMLM_WHEELS" "$@" 2>&1) || {
        lacks=$(echo "$log" | sed -n 's/.*No matching distribution found for //p' | head -1)
        [ -n "$lacks" ] || { echo "$log" | tail -5 >&2; lacks="one of: $*"; }
        wheel_error "$PMLM_WHEELS has no wheel of $lacks (fill it with scripts/fetch_wheels.py)"
      }
    }
    if [ ${#deps[@]} -gt 0 ]; then wheels "${deps[@]}"; fi
    if [ ${#nodeps[@]} -gt 0 ]; then wheels --no-deps "${nodeps[@]}"; fi
    # the repository itself on the path, as an editable install puts it (nothing to build)
    echo "$ROOT" > "$(python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/fairseq-pmlm.pth"
    out=$(python -c "import torch, fairseq, fairseq_pmlm" 2>&1) || {
      echo "$out" | tail -3 >&2
      wheel_error "after installing from $PMLM_WHEELS, .venv cannot import fairseq_pmlm (see above: a wheel missing from the folder?)"
    }
    echo "$want" > "$STAMP"
    echo "setup_env: done"
  else
    # shellcheck disable=SC1091
    source "$VENV/bin/activate"
  fi
else  # a machine with a package index: the pinned stack, torch included

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_env: creating $VENV"
  python3 -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
# quiet pip, errors still shown; this machine's pip config names file:// indexes that pip
# warns about for every package it looks up: drop that noise only
pipq() { pip install -q "$@" 2>&1 | { grep -vE "^WARNING: Location 'file:" || true; }; }

# the stamp alone would miss a torch swapped by hand later, so check its version too (no import: fast)
have_torch=$(python -c "import importlib.metadata as m; print(m.version('torch'))" 2>/dev/null || true)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ] || [ "${have_torch%%+*}" != "${TORCH#torch==}" ]; then
  echo "setup_env: installing the pinned stack into .venv (1-2 minutes the first time)"
  rm -f "$STAMP"
  # everything but ve-fairseq in one resolve; the constraint keeps any dependency from
  # bringing another torch build (a CPU torch 2.13.0 is what this machine serves)
  grep -vE '^\s*(#|$)|#\s*no-deps' "$REQ" > "$VENV/.pmlm-requirements.txt"
  echo "$TORCH" > "$VENV/.pmlm-constraints.txt"
  echo "setup_env:   torch + requirements"
  pipq -r "$VENV/.pmlm-requirements.txt" -c "$VENV/.pmlm-constraints.txt"
  echo "setup_env:   ${NODEPS[*]} (--no-deps)"
  pipq --no-deps "${NODEPS[@]}"
  echo "setup_env:   fairseq-pmlm (editable)"
  # newer setuptools print a multi-line notice about editable installs: keep it for failures only
  pipq --no-deps -e "$ROOT" > "$VENV/.pmlm-editable.log" || { cat "$VENV/.pmlm-editable.log" >&2; exit 1; }
  # show the import's output only when the check fails
  if ! out=$(python -c "import torch, fairseq; assert torch.__version__.startswith('${TORCH#torch==}'), \
      'torch ' + torch.__version__ + ' is installed, not ${TORCH#torch==}'" 2>&1); then
    echo "$out" | tail -3 >&2
    echo "setup_env: error: .venv must import torch ${TORCH#torch==} and fairseq (see above)" >&2
    exit 1
  fi
  echo "$want" > "$STAMP"
  echo "setup_env: done"
fi
fi
