#!/usr/bin/env bash
# The main job: what PMLM pre-training buys, on real text every machine here has (the docstrings
# of Python's standard library and of the pinned packages: scripts/make_docstring_corpus.py),
# in 9-17 minutes on 2 CPU cores with AVX-512, 15-24 without (README.md's machine table).
#
#   released weights (all-MiniLM-L6-v2, pip-installed by the set-up; layers 0,2,4 kept)
#     -> PMLM (AE+PAR) pre-training on the docstrings of the training modules: held-out AE/PAR
#        loss and accuracy before and after, curves.png; and beside it MLM (AE only, fairseq
#        RoBERTa's objective) pre-training with the same updates, batch, lr and data
#     -> summarisation fine-tuning (an object's heading and docstring body -> its one-line
#        summary), the same updates for (a) the PMLM-pre-trained model, (b) the MLM-pre-trained
#        model, (c) the released model without a pre-training stage, (d) the same architecture
#        from random initialisation
#     -> fairseq-generate on test pairs from modules held out of every training stage; one ROUGE
#        table with lead-1, the PMLM row's paired bootstrap intervals against every other row
#        (PMLM minus MLM, minus released, ...) and their reading, three example outputs.
#
#   bash scripts/demo.sh                                                    # 9-24 minutes, 2 CPU cores
#   START=scratch ARCH=unilmv2_base PRE_MINUTES=600 bash scripts/demo.sh   # PMLM from scratch (a GPU)
#
# Knobs (environment variables): PMLM_UPDATES (default 250; the MLM stage's too), PMLM_LR (3e-4), FT_UPDATES (500),
# FT_LR (the demo preset's, 5e-4), LAYERS (of the released model, 0,2,4), SEED (1), JOBS (2 on a
# CPU, 1 on a GPU), OUT_DIR (outputs/demo). START=scratch pre-trains ARCH (default unilmv2_small)
# from random initialisation for PRE_MINUTES (6) on a sentencepiece vocabulary instead, without
# the released and MLM rows: on 2 CPU cores that stays in the unigram phase (docs/MAIN_JOB.md).
#
# Two cores: a small model trains ~1.5x faster as two single-threaded runs side by side than as
# one two-threaded run, so with JOBS=2 the work goes in two lanes that do not need each other:
# PMLM stage -> its fine-tuning and decoding -> random initialisation's | MLM stage -> its
# fine-tuning and decoding -> the released model's -> held-out AE/PAR after the PMLM stage. Progress lines carry their run's name. On a
# GPU (JOBS=1) the lanes run one after the other.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
declare -A FLAGS=()
parse_flags "$@"  # --help
cd "$ROOT"
source scripts/setup_env.sh

START=${START:-all-minilm-l6-v2}
OUT=${OUT_DIR:-outputs/demo}
LAYERS=${LAYERS:-0,2,4}
PMLM_UPDATES=${PMLM_UPDATES:-250}
FT_UPDATES=${FT_UPDATES:-500}
PMLM_LR=${PMLM_LR:-3e-4}
SEED=${SEED:-1}
ARCH=${ARCH:-unilmv2_small}
PRE_MINUTES=${PRE_MINUTES:-6}
DATA=$OUT/data-bin
PAIRS=$OUT/corpus/pairs
start=$SECONDS
export PYTHONUNBUFFERED=1  # fairseq's log lines as they come, not in 8 kB blocks
stage() { printf '\n== [%d:%02d] %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*"; }

device_flags
if [ "$PMLM_GPUS" -gt 0 ]; then
  JOBS=${JOBS:-1}
else
  JOBS=${JOBS:-2}
  cpu_speed_flags
fi
[[ $JOBS == [12] ]] || die "JOBS must be 1 or 2, not $JOBS"
# fine-tuning: the demo preset (scripts/s2s/presets.sh) for FT_UPDATES updates
FT=()
if [ -n "${FT_LR-}" ]; then FT+=(--lr "$FT_LR"); fi

# run NAME LOG CMD...: CMD's whole output goes to LOG; its progress lines (fairseq's json
# records, the recipes' own lines) are shown, prefixed with NAME. A failure shows LOG's end.
run() {
  local name=$1 log=$2 rc
  shift 2
  set +e
  "$@" 2>&1 | tee "$log" | sed -unE "/\| (train_inner|valid) \||^(s2s|prepare_data|docstring_task|pretrain)|^Generate/{
    s/^.*\| (train_inner|valid) \| /$name: /; s/^(s2s|prepare_data|docstring_task|pretrain|Generate)/$name: \\1/; s/\"//g
    s/^(.{170}).*/\\1/; p }"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "demo.sh: error: $name failed (exit $rc); the end of $log:" >&2
    tail -20 "$log" >&2
  fi
  return "$rc"
}
# both FUNC1 FUNC2: side by side with a thread each (JOBS=2), else one after the other
both() {
  local a b rc=0
  if [ "$JOBS" = 1 ]; then
    "$1" && "$2"
    return
  fi
  OMP_NUM_THREADS=1 "$1" &
  a=$!
  OMP_NUM_THREADS=1 "$2" &
  b=$!
  wait "$a" || rc=$?
  wait "$b" || rc=$?
  return "$rc"
}
# command lines, into CMD
validate_cmd() {  # CHECKPOINT: held-out AE/PAR, the same masks every time (fairseq-validate, one seed)
  CMD=(fairseq-validate "$DATA/pretrain" --user-dir fairseq_pmlm --task pseudo_masked_lm --path "$1"
       --tokens-per-sample 128 --batch-size 16 --max-valid-steps 20 --seed 1 --log-format json "${DEVICE[@]}")
}
finetune_cmd() {  # SYSTEM INIT: the same updates and settings for every system
  CMD=(bash scripts/s2s/finetune.sh --preset demo --data "$DATA/sum" --checkpoint "$2" --save-dir "$OUT/sum-$1"
       --updates "$FT_UPDATES" -- "${MODEL_FLAGS[@]}" --dropout 0 --attention-dropout 0 --seed "$SEED"
       --disable-validation --log-interval 100 "${DEVICE[@]}" ${FT[@]+"${FT[@]}"})
}
generate_cmd() {  # SYSTEM: beam 4, trigram blocking, on the held-out test pairs
  CMD=(bash scripts/s2s/generate.sh --preset demo --data "$DATA/sum" --checkpoint "$OUT/sum-$1/checkpoint_last.pt"
       --refs "$PAIRS/test.target" --out-dir "$OUT/generate-$1" -- "${DEVICE[@]}")
}
rm -rf "$OUT"
mkdir -p "$OUT"

if [ "$START" = scratch ]; then
  stage "corpus: docstrings of the standard library and the pinned packages"
  python scripts/make_docstring_corpus.py --out "$OUT/corpus"
  MODEL_FLAGS=(--arch "$ARCH")
  PMLM_INIT=random
  PMLM_BUDGET=(--updates $((PRE_MINUTES * 80)) --lr 2e-4)
  PMLM_MORE=(--arch "$ARCH" --stop-time-hours "$(awk "BEGIN { print $PRE_MINUTES / 60 }")" --warmup-updates 50)
  TOKENIZER_DIR=$DATA/pretrain
  stage "sentencepiece vocabulary -> data-bin (pre-training $ARCH from scratch)"
  run prepare "$OUT/prepare-pretrain.log" bash scripts/prepare_data.sh --train "$OUT/corpus/pretrain.train.txt" \
    --valid "$OUT/corpus/pretrain.valid.txt" --name pretrain --destdir "$DATA" --vocab-size 8000
  stage "summarisation pairs -> sentencepiece -> data-bin"
  run sum "$OUT/prepare-sum.log" bash scripts/s2s/prepare.sh --raw "$PAIRS" --name sum \
    --pretrain-data "$TOKENIZER_DIR" --destdir "$DATA"
else
  stage "the task (scripts/docstring_task.sh): corpus, released weights ($START, layers $LAYERS), data-bins"
  run task "$OUT/task.log" bash scripts/docstring_task.sh --out "$OUT" --start "$START" --layers "$LAYERS"
  recipe_facts MODEL_FLAGS model-flags "$OUT/released/model.pt"
  PMLM_INIT=$OUT/released/model.pt
  PMLM_BUDGET=(--updates "$PMLM_UPDATES" --lr "$PMLM_LR")
  PMLM_MORE=()
fi

pretrain_cmd() {  # OBJECTIVE SAVE_DIR: the PMLM stage (ae+par) and the MLM stage (ae), alike but for --objective
  CMD=(bash scripts/pretrain.sh --data "$DATA/pretrain" --save-dir "$2" --objective "$1" --init "$PMLM_INIT"
       --seed "$SEED" "${PMLM_BUDGET[@]}" -- "${DEVICE[@]}" ${PMLM_MORE[@]+"${PMLM_MORE[@]}"})
}
# two lanes of work that do not need each other, side by side (JOBS=2) or in turn (JOBS=1), each
# system fine-tuned and decoded with the same settings:
# PMLM stage -> PMLM system -> random initialisation;
# held-out AE/PAR before -> MLM stage (same updates, batch, lr, data) -> MLM system -> released
# model without a stage -> held-out AE/PAR after the PMLM stage, curves (START=scratch: random
# initialisation only; the held-out after stays in the PMLM lane)
lane_pmlm() {
  if [ "$START" != scratch ]; then
    stage "PMLM pre-training (AE+PAR) of the released model, $PMLM_UPDATES updates of 16 x 128 tokens"
  else
    stage "PMLM pre-training (AE+PAR) from scratch: ${MODEL_FLAGS[*]}, $PRE_MINUTES minutes"
  fi
  pretrain_cmd ae+par "$OUT/pmlm"
  run pmlm "$OUT/pmlm.log" "${CMD[@]}" || { touch "$OUT/pmlm.failed"; return 1; }
  touch "$OUT/pmlm.done"
  if [ "$START" = scratch ]; then heldout_after; fi
  system pmlm "$OUT/pmlm/checkpoint_last.pt"
  if [ "$START" != scratch ]; then system random none; fi
}
# in the lane that ends first (the MLM lane, ~1 minute before the other): not on the longest path
heldout_after() {
  while [ ! -e "$OUT/pmlm.done" ]; do
    if [ -e "$OUT/pmlm.failed" ]; then return 1; fi
    sleep 2
  done
  stage "held-out AE/PAR after the PMLM stage"
  validate_cmd "$OUT/pmlm/checkpoint_last.pt"
  run "held-out after" "$OUT/validate-after.log" "${CMD[@]}"
  python scripts/plot_curves.py "$OUT/pmlm.log" --out "$OUT/curves.png" | sed -u 's/^/curves: /'
}
lane_mlm() {
  if [ "$START" = scratch ]; then
    system random none
    return
  fi
  stage "held-out AE/PAR before the PMLM stage (the released model has no LM head: it starts fresh)"
  validate_cmd "$OUT/released/model.pt"
  run "held-out before" "$OUT/validate-before.log" "${CMD[@]}"
  stage "MLM pre-training (AE only) of the released model, the PMLM stage's updates, batch, lr and data"
  pretrain_cmd ae "$OUT/mlm"
  run mlm "$OUT/mlm.log" "${CMD[@]}"
  system mlm "$OUT/mlm/checkpoint_last.pt"
  system released "$OUT/released/model.pt"
  heldout_after
}
system() {  # NAME INIT: fine-tune, then decode the test pairs
  stage "summarisation fine-tuning ($1): $FT_UPDATES updates of 16 pairs"
  finetune_cmd "$1" "$2"
  run "finetune-$1" "$OUT/finetune-$1.log" "${CMD[@]}"
  stage "fairseq-generate ($1): beam 4, trigram blocking, the test pairs"
  generate_cmd "$1"
  run "generate-$1" "$OUT/generate-$1.log" "${CMD[@]}"
}
both lane_pmlm lane_mlm

stage "results"
echo "summarisation of docstrings, test pairs from modules held out of every training stage (ROUGE F1 %):"
args=()
SYSTEMS=(pmlm mlm released random)
if [ "$START" = scratch ]; then SYSTEMS=(pmlm random); fi
for sys in "${SYSTEMS[@]}"; do
  case $sys in
    pmlm) name="$([ "$START" = scratch ] && echo "$ARCH" || echo "$START"): PMLM (AE+PAR) stage + fine-tuned" ;;
    mlm) name="$START: MLM (AE-only) stage + fine-tuned" ;;
    released) name="$START: released, no stage + fine-tuned" ;;
    random) name="same arch, random init + fine-tuned" ;;
  esac
  args+=(--hyp "$OUT/generate-$sys/hyp.txt" --name "$name")
done
python scripts/score.py --ref "$PAIRS/test.target" "${args[@]}" \
  --hyp "$PAIRS/test.lead" --name "lead-1 (first sentence of the source)" \
  --bootstrap --examples 3 --source "$PAIRS/test.source" | tee "$OUT/rouge.md"
echo
echo "PMLM curves: $OUT/curves.png; checkpoints: $OUT/pmlm, $OUT/mlm, $OUT/sum-*"
echo "hub: UniLMv2Model.from_pretrained('$OUT/sum-pmlm').sample([...])"
echo "wall time: $((SECONDS - start)) s"
