# shellcheck shell=bash
# What every recipe shares, sourced first thing: the repository root, the project's .venv,
# one-line errors, named flags with --help, and the device.
#
#   source "$(dirname "$0")/lib/common.sh"        # ../lib/common.sh from scripts/*/
#   activate_venv "$@"                                   # "$@": --help needs no set-up
#   declare -A FLAGS=([--data]=DATA [--v2]=V2:switch)   # flag -> variable; :switch takes no value
#   DATA='' V2=''                                         # the defaults
#   PASS_TO=fairseq-train                                 # who gets the arguments after -- (none: refused)
#   parse_flags "$@"                                      # what followed -- is in EXTRA
#
# Conventions of every recipe: named flags only (--flag VALUE or --flag=VALUE), --help prints the
# script's header comment, arguments after -- go to the fairseq command it runs, and a bad
# command line stops with one line "PROG: error: ..." and exit status 2.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROG=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
PROG=${PROG#"$ROOT"/scripts/}  # prepare_data.sh, s2s/finetune.sh, ...

die() {
  echo "$PROG: error: $*" >&2
  exit 2
}

usage() {  # the header comment: from line 2 to the first line that is not a comment
  sed -n '2,${/^#/!q; s/^# \{0,1\}//; p}' "$0"
}

activate_venv() {  # "$@": the recipe's. The set-up's .venv (setup_env.sh), made first from PMLM_WHEELS=DIR if set
  if [ -n "${PMLM_WHEELS-}" ]; then
    # shellcheck source=../setup_env.sh
    source "$ROOT/scripts/setup_env.sh"
  elif [ -f "$ROOT/.venv/bin/activate" ]; then
    # shellcheck disable=SC1091
    source "$ROOT/.venv/bin/activate"
  fi
  # without .venv the recipe runs on the python PATH finds (a user's own environment): one with
  # neither torch nor fairseq would fail later in a message about something else. --help needs neither
  case " $* " in *" -h "* | *" --help "*) return 0 ;; esac
  python -c 'import importlib.util as u, sys; sys.exit(not all(map(u.find_spec, ("torch", "fairseq"))))' \
    2> /dev/null || die "no set-up: $(command -v python || echo 'python (none on PATH)') lacks torch or fairseq" \
    "($ROOT/.venv: $([ -d "$ROOT/.venv" ] && echo 'incomplete' || echo 'none')): run 'bash scripts/setup_env.sh'" \
    "once (PMLM_WHEELS=DIR: from a folder of wheels)"
}

# shellcheck disable=SC2034  # EXTRA is for the recipe that sources this
parse_flags() {  # "$@" by the FLAGS table; sets the variables, EXTRA=(what follows --, for $PASS_TO)
  EXTRA=()
  local hint="see --help"
  if [ -n "${PASS_TO-}" ]; then hint+="; the flags of $PASS_TO go after --"; fi
  while [ $# -gt 0 ]; do
    local flag=$1 var value
    case $flag in
      -h | --help) usage; exit 0 ;;
      --)
        shift
        [ -n "${PASS_TO-}" ] || [ $# -eq 0 ] || die "unexpected arguments after --: $*"
        EXTRA=("$@")
        return 0
        ;;
    esac
    flag=${flag%%=*}
    var=${FLAGS[$flag]-}
    [ -n "$var" ] || die "unknown argument: $1 ($hint)"
    if [[ $var == *:switch ]]; then
      [ "$flag" = "$1" ] || die "$flag takes no value"
      printf -v "${var%:switch}" 1
      shift
      continue
    fi
    if [ "$flag" != "$1" ]; then  # --flag=value
      value=${1#*=}
      shift
    else
      [ $# -ge 2 ] && [[ $2 != --* ]] || die "$flag needs a value"
      value=$2
      shift 2
    fi
    printf -v "$var" '%s' "$value"
  done
}

extra_value() {  # extra_value FLAG DEFAULT: FLAG's last value after -- (fairseq takes the last), else DEFAULT
  local value=$2 i
  for ((i = 0; i < ${#EXTRA[@]}; i++)); do
    case ${EXTRA[i]} in
      "$1") value=${EXTRA[i + 1]-} ;;
      "$1"=*) value=${EXTRA[i]#*=} ;;
    esac
  done
  printf '%s\n' "$value"
}

take_overrides() {  # take_overrides FLAG...: a recipe flag given again after -- takes that value there
  # (fairseq-train takes a flag's last value), so the recipe's checks, schedule and line read what runs
  local flag var
  for flag in "$@"; do
    var=${FLAGS[$flag]}
    printf -v "$var" '%s' "$(extra_value "$flag" "${!var}")"
  done
}

per_update() {  # per_update BATCH: PER_UPDATE, the sequences one update takes: BATCH x the --update-freq
  # after -- (fairseq sums that many batches into an update) x its processes (--distributed-world-size,
  # by default one a GPU), so a schedule of epochs and the recipe's line count what runs (presets.sh:
  # BATCH = the product). It sets a variable (no subshell): the GPUs are found once a recipe run.
  local freq world
  freq=$(extra_value --update-freq 1)
  [[ $freq =~ ^[1-9][0-9]*$ ]] || die "--update-freq $freq: the recipe counts its schedule in updates of one size:" \
    "give one whole number"
  detect_gpus
  world=$(extra_value --distributed-world-size "$((PMLM_GPUS > 0 ? PMLM_GPUS : 1))")
  [[ $world =~ ^[1-9][0-9]*$ ]] || die "--distributed-world-size must be a positive integer: $world"
  # shellcheck disable=SC2034  # PER_UPDATE is for the recipe that sources this
  PER_UPDATE=$(($1 * freq * world))
}

require_flags() {  # each named flag was given a value
  local flag var missing=() list i
  for flag in "$@"; do
    var=${FLAGS[$flag]%:switch}
    [ -n "${!var}" ] || missing+=("$flag")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  list=${missing[0]}
  for ((i = 1; i < ${#missing[@]}; i++)); do
    if ((i == ${#missing[@]} - 1)); then list+=" and ${missing[i]}"; else list+=", ${missing[i]}"; fi
  done
  if [ ${#missing[@]} -eq 1 ]; then die "$list is required (see --help)"; fi
  die "$list are required (see --help)"
}

require_files() {
  local f
  for f in "$@"; do
    [ -f "$f" ] || die "file not found: $f"
  done
}

python_fact() {  # python_fact ARGS...: python ARGS, a run that only works out a recipe's facts. It
  # may import torch (a checkpoint's facts, ~1 s): under forward_signals' traps it ignores SIGINT, so
  # Ctrl-C prints no traceback of that import and the recipe exits 130 once the run ends (SIGTERM: at once)
  if [ -n "$(trap -p INT)" ]; then (trap '' INT; exec python "$@"); else python "$@"; fi
}

recipe_info() {  # facts the recipes need (scripts/recipe_info.py); its errors are one line already
  python_fact "$ROOT/scripts/recipe_info.py" "$@" || exit 2
}

recipe_facts() {  # recipe_facts NAME SUBCOMMAND ARGS [+ NAME SUBCOMMAND ARGS ...]: each query's lines
  # into the array NAME, all from one Python run (one interpreter start, one torch import at most)
  local out
  out=$(recipe_info --shell "$@") || exit 2
  eval "$out"
}

detect_gpus() {  # PMLM_GPUS: the GPUs torch can use; once per recipe run (nested recipes inherit it)
  if [ -z "${PMLM_GPUS-}" ]; then
    PMLM_GPUS=0
    # torch is imported only where nvidia-smi shows a GPU: a CPU machine answers at once
    if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then
      PMLM_GPUS=$(recipe_info gpus)
    fi
    export PMLM_GPUS
  fi
}

# shellcheck disable=SC2034  # DEVICE is for the recipe that sources this
device_flags() {  # DEVICE: fairseq's flags for this machine, --fp16 on a GPU, --cpu without one
  detect_gpus
  if [ "$PMLM_GPUS" -gt 0 ]; then DEVICE=(--fp16); else DEVICE=(--cpu); fi
  # fairseq-train's --fp16 optimizer asks CUDA for a device: without one, a traceback after set-up
  local a
  if [ "$PMLM_GPUS" -eq 0 ] && [ "${PASS_TO-}" = fairseq-train ]; then
    for a in ${EXTRA[@]+"${EXTRA[@]}"}; do
      [ "$a" != --fp16 ] || die "--fp16 needs a CUDA GPU and this machine has none: leave it out" \
        "(on a CPU with bf16: --bf16-autocast)"
    done
  fi
}

# shellcheck disable=SC2034  # DEVICE is for the recipe that sources this
cpu_speed_flags() {  # DEVICE += what makes small models train fastest on this CPU (after device_flags)
  DEVICE+=(--num-workers 0)
  # bf16 matmuls where the CPU has them (AVX512-BF16, AMX): ~1.2x per update on a 2-core EPYC; not
  # when torch is held to AVX2 (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2: an older CPU's times)
  if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2> /dev/null &&
    [[ ${ATEN_CPU_CAPABILITY:-avx512} != avx2 && ${ATEN_CPU_CAPABILITY:-avx512} != default ]]; then
    DEVICE+=(--bf16-autocast)
  fi
}

resume_or_start() {  # resume_or_start SAVE_DIR INIT TASK: before fine-tuning INIT (a checkpoint or none) into SAVE_DIR
  # fairseq resumes SAVE_DIR/checkpoint_last.pt whenever it exists, whatever --finetune-from-model
  # says: allow that only for a run of TASK started from INIT (and say so); else refuse, or with
  # --force (FORCE) move SAVE_DIR's checkpoint*.pt aside and start afresh
  local save=$1 init=$2 task=$3 last=$1/checkpoint_last.pt info aside f
  [ -f "$last" ] || return 0
  if [ -n "${FORCE-}" ]; then
    aside=$save/replaced-$(date +%Y%m%d-%H%M%S)
    for f in "$save"/checkpoint*.pt; do
      [ "$(abs_path "$f")" != "$init" ] || die "--checkpoint $init is in --save-dir $save, which --force would empty"
    done
    mkdir -p "$aside"
    mv "$save"/checkpoint*.pt "$aside"/
    echo "$PROG: --force: moved the checkpoints of $save to $aside; starting afresh from $init"
    return 0
  fi
  # the cfg fairseq saved in the checkpoint: its task, --finetune-from-model and updates so far
  info=$(python_fact "$ROOT/scripts/recipe_info.py" run-of "$last" 2>&1) ||
    die "${info#recipe_info.py: error: } (--force moves it aside)"
  local was_task updates was_init
  read -r was_task updates was_init <<< "$info"
  if [ "$was_task" != "$task" ] || [ "$was_init" != "$init" ]; then
    die "$last (task $was_task, from $was_init) is not a run from --checkpoint $init, but fairseq would resume" \
      "it: pick another --save-dir, or pass --force to move its checkpoints aside and start afresh"
  fi
  echo "$PROG: resuming $last (update $updates of a run from $init)"
}

abs_path() {  # an absolute path of $1 (symlinks kept, so the name is the one the user gave); none stays none
  if [ "$1" = none ]; then echo none; else echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; fi
}

# A recipe's long steps run in the background so that a signal to the script (Slurm's and
# Kubernetes' SIGTERM or SIGUSR1, a kill of the script alone) reaches them at once: fairseq-train
# then saves checkpoint_last.pt at the next update and stops, and the script exits after it.
# bash starts a non-interactive shell's background jobs with SIGINT ignored, for good (Python keeps
# an ignored SIGINT): Ctrl-C reaches the step as SIGTERM instead, so training saves and stops.
CHILD=''
run_step() {  # run_step CMD...: CMD as the current step; its exit status
  local rc=0
  "$@" &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=''
  return "$rc"
}

run_step_logged() {  # run_step_logged LOG CMD...: run_step CMD, its output also copied into LOG
  # not `run_step CMD | tee LOG`: the pipeline's subshell would hide CMD from on_signal. tee
  # ignores the signals and ends with CMD's output, so the lines of a stopping step are kept.
  local log=$1 rc=0 out tee
  shift
  exec {out}> >(trap '' INT TERM USR1; exec tee "$log")
  tee=$!
  "$@" >&"$out" 2>&1 &
  CHILD=$!
  exec {out}>&-
  wait "$CHILD" || rc=$?
  CHILD=''
  wait "$tee" || true  # LOG is whole before the recipe reads it
  return "$rc"
}

descendants() {  # descendants PID: the pids of PID's children, theirs, ... (none without pgrep)
  local kid
  for kid in $(pgrep -P "$1" 2> /dev/null); do
    echo "$kid"
    descendants "$kid"
  done
}

on_signal() {  # on_signal SIG STATUS: pass SIG to the running step (INT as TERM), let it finish, exit STATUS
  if [ -n "$CHILD" ]; then
    local pids pid i
    pids=$(descendants "$CHILD")  # before it ends: its children are then re-parented
    kill -s "${1/#INT/TERM}" "$CHILD" 2> /dev/null || true
    wait "$CHILD" 2> /dev/null || true
    # a step's own children (a DataLoader's worker processes) notice their parent went only at
    # their next check, seconds later: the recipe ends after them, not before (10 s at most)
    for pid in $pids; do
      for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.1
      done
    done
  fi
  exit "$2"
}

forward_signals() {  # call once, before the first recipe_info and run_step (an EXIT trap still runs after these)
  trap 'on_signal INT 130' INT
  trap 'on_signal TERM 143' TERM
  trap 'on_signal USR1 138' USR1
}
