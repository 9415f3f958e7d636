#!/usr/bin/env bash
# Idempotent set-up of .venv (repo root) with the stack of requirements.txt, from one of two
# sources: the package index (the pinned stack, torch included), or, with PMLM_WHEELS=DIR, a
# folder of wheels on a machine without an index that has its own torch (a GPU machine): there
# the .venv sees that python's packages and gets from DIR only what they lack (lines marked
# optional when DIR has them). Fill DIR with scripts/fetch_wheels.py.
# Run it, or `source` it to also get the venv activated (recipes do). It installs only when the
# stamp (the source, requirements.txt and setup.py) is stale. The python it builds on is
# PMLM_PYTHON, else python3 as PATH finds it outside this .venv (on a GPU image that is itself a
# virtualenv's python).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
setup_error() { echo "setup_env.sh: error: $*" >&2; exit 2; }
if [ "${BASH_SOURCE[0]}" = "$0" ] && [ $# -gt 0 ]; then  # run, not sourced: it takes no arguments
  case $1 in
    -h | --help) sed -n '2,${/^#/!q; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
    *) setup_error "unknown argument: $1 (it takes none; see --help)" ;;
  esac
fi
VENV="$ROOT/.venv"
REQ="$ROOT/requirements.txt"
STAMP="$VENV/.pmlm-installed"

# the base python, looked up with this .venv off PATH: once .venv is active, python3 is its own
path_outside_venv=$(tr ':' '\n' <<< "$PATH" | grep -vxF "$VENV/bin" | paste -sd: -)
BASE=$(PATH=$path_outside_venv command -v "${PMLM_PYTHON:-python3}") ||
  setup_error "${PMLM_PYTHON:-python3}: not found (PMLM_PYTHON names the python to build .venv on)"
if [ -n "${PMLM_WHEELS-}" ]; then
  [ -d "$PMLM_WHEELS" ] || setup_error "PMLM_WHEELS=$PMLM_WHEELS: no such directory"
  PMLM_WHEELS=$(cd "$PMLM_WHEELS" && pwd)
  machine=$("$BASE" -c "import sys, torch; print(sys.executable, torch.__version__)" 2> /dev/null) ||
    setup_error "$BASE cannot import torch (PMLM_WHEELS keeps the machine's torch; PMLM_PYTHON names another python)"
  "$BASE" -m pip --version > /dev/null 2>&1 ||
    setup_error "$BASE has no pip (PMLM_WHEELS installs the folder's wheels with it; PMLM_PYTHON names another python)"
  origin="wheels $machine"
else
  origin=index
fi
want=$( (echo "$origin"; cat "$REQ" "$ROOT/setup.py") | sha1sum | cut -d' ' -f1)
# "deps|nodeps|skip SPEC" lines to install (scripts/lib/requirements_txt.py); python: the one to ask
setup_plan() { "$1" "$ROOT/scripts/lib/requirements_txt.py" "$REQ" ${PMLM_WHEELS:+--wheels "$PMLM_WHEELS"}; }
lines=() torch_pin=''
if [ -z "${PMLM_WHEELS-}" ]; then  # from an index: the pinned torch (a folder's plan is made below, once)
  mapfile -t lines < <(setup_plan "$BASE")
  torch_pin=$(printf '%s\n' "${lines[@]}" | sed -n 's/^deps \(torch==.*\)/\1/p')
fi

stale=1
if [ "$(cat "$STAMP" 2> /dev/null)" = "$want" ]; then
  stale=''
  # the stamp alone would miss a torch swapped by hand later (no import: fast)
  if [ -n "$torch_pin" ]; then
    have=$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('torch'))" 2> /dev/null || true)
    [ "${have%%+*}" = "${torch_pin#torch==}" ] || stale=1
  fi
fi
if [ -n "$stale" ]; then
  if [ -n "${PMLM_WHEELS-}" ] || [ -f "$VENV/.pmlm-machine" ]; then rm -rf "$VENV"; fi  # a venv per source
  if [ -n "${PMLM_WHEELS-}" ]; then
    echo "setup_env: installing into .venv what $BASE lacks, from $PMLM_WHEELS (its torch stays)"
    # a venv that sees the machine's packages through a .pth, after its own: --system-site-packages
    # would show the base interpreter's, and the machine's python is often a venv itself
    "$BASE" -m venv --without-pip "$VENV"
    touch "$VENV/.pmlm-machine"
    "$BASE" -c "import sys; print('\n'.join(p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))))" \
      > "$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/machine-packages.pth"
    mapfile -t lines < <(setup_plan "$VENV/bin/python")  # what the machine lacks, asked of the new venv
    pip_args=(--no-index --find-links "$PMLM_WHEELS")
  else
    echo "setup_env: installing the pinned stack into .venv (1-2 minutes the first time)"
    [ -x "$VENV/bin/python" ] || "$BASE" -m venv "$VENV"
    pip_args=(-c /dev/stdin)  # the torch pin as a constraint: no dependency brings another torch build
  fi
  deps=() nodeps=() skipped=()
  for line in ${lines[@]+"${lines[@]}"}; do
    case ${line%% *} in
      deps) deps+=("${line#* }") ;;
      nodeps) nodeps+=("${line#* }") ;;
      skip) skipped+=("${line#* }") ;;
    esac
  done
  setup_install() {  # pip's failure as one line; quiet, less this machine's file:// index warnings
    local log lacks
    log=$(echo "$torch_pin" | "$VENV/bin/python" -m pip install -q --no-compile "${pip_args[@]}" "$@" 2>&1) || {
      lacks=$(sed -n 's/.*No matching distribution found for //p' <<< "$log" | head -1)
      if [ -n "${PMLM_WHEELS-}" ] && [ -n "$lacks" ]; then
        setup_error "$PMLM_WHEELS has no wheel of $lacks (fill it with scripts/fetch_wheels.py)"
      fi
      tail -5 <<< "$log" >&2
      setup_error "pip could not install: $* (see above)"
    }
  }
  echo "setup_env:   ${deps[*]-}"
  rm -f "$STAMP"
  if [ ${#deps[@]} -gt 0 ]; then setup_install "${deps[@]}"; fi
  echo "setup_env:   ${nodeps[*]-} (--no-deps)"
  if [ ${#nodeps[@]} -gt 0 ]; then setup_install --no-deps "${nodeps[@]}"; fi
  if [ ${#skipped[@]} -gt 0 ]; then
    echo "setup_env:   not in the folder, so left out (optional: the main job's or the suite's): ${skipped[*]}"
  fi
  site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  # the bytecode pip would have written file after file (half of its time), on every core at once
  # (its errors, a few files written for newer Pythons, are ignored as pip ignores them)
  "$VENV/bin/python" -m compileall -q -q -j 0 "$site" > /dev/null 2>&1 || true
  # the repository itself on the path, as an editable install puts it (nothing to build)
  echo "$ROOT" > "$site/fairseq-pmlm.pth"
  out=$("$VENV/bin/python" -c "import torch, fairseq, fairseq_pmlm
pin = '${torch_pin#torch==}'
assert torch.__version__.startswith(pin), f'torch {torch.__version__} is installed, not {pin}'" 2>&1) || {
    tail -3 <<< "$out" >&2
    setup_error ".venv cannot import torch, fairseq and fairseq_pmlm after the set-up (see above)"
  }
  echo "$want" > "$STAMP"
  echo "setup_env: done"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
