#!/usr/bin/env bash
# The main job: what PMLM pre-training buys, on real text every machine here has (the docstrings
# of the Python standard library), in under 15 minutes on 2 CPU cores.
#
#   released weights (all-MiniLM-L6-v2, pip-installed by the set-up; layers 0,2,4 kept)
#     -> PMLM (AE+PAR) pre-training on the docstrings: held-out AE/PAR loss and accuracy
#        before/after, curves.png
#     -> summarisation fine-tuning (docstring body -> its one-line summary), same budget, of
#        (a) the PMLM-pre-trained model, (b) the released model without the PMLM stage,
#        (c) the same architecture from random initialisation
#     -> fairseq-generate on test pairs from modules held out of every training stage; one ROUGE
#        table with lead-1, paired bootstrap intervals, three example outputs.
#
#   bash scripts/demo.sh                    # ~14 minutes on 2 CPU cores
#   START=scratch ARCH=unilmv2_base PRE_MINUTES=600 bash scripts/demo.sh   # PMLM from scratch (a GPU)
# Knobs (environment): PMLM_UPDATES, FT_UPDATES, FT_LR, LAYERS (of the released model), OUT_DIR;
# START=scratch pre-trains ARCH (default unilmv2_small) from random init for PRE_MINUTES on a
# sentencepiece vocabulary instead: on 2 CPU cores it stays in the unigram phase (README).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh

START=${START:-all-minilm-l6-v2}
OUT=${OUT_DIR:-outputs/demo}
LAYERS=${LAYERS:-0,2,4}
PMLM_UPDATES=${PMLM_UPDATES:-250}
PMLM_LR=${PMLM_LR:-5e-4}
FT_UPDATES=${FT_UPDATES:-450}
FT_LR=${FT_LR:-1e-3}
ARCH=${ARCH:-unilmv2_small}
PRE_MINUTES=${PRE_MINUTES:-6}
DATA=$OUT/data-bin
start=$SECONDS
export PYTHONUNBUFFERED=1  # fairseq's log lines as they come, not in 8 kB blocks
stage() { printf '\n== [%d:%02d] %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*"; }
if python -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  DEVICE=(--fp16)
else
  DEVICE=(--cpu --num-workers 0)
fi
# CMD... with its whole output in LOG and its progress lines (fairseq's json records) shown
logged() {
  local log=$1 rc; shift
  set +e
  "$@" 2>&1 | tee "$log" | sed -unE '/\| (train_inner|valid) \||^s2s\//{
    s/^.*\| (train_inner|valid) \| /   /; s/"//g; s/^(.{190}).*/\1/; p }'
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -eq 0 ] || { echo "demo.sh: error: step failed (exit $rc); the end of $log:" >&2; tail -20 "$log" >&2; exit "$rc"; }
}
rm -rf "$OUT"
mkdir -p "$OUT"

stage "corpus: docstrings of the installed Python standard library"
python scripts/make_stdlib_corpus.py --out "$OUT/stdlib.train.txt" --valid-out "$OUT/stdlib.valid.txt" \
  --valid-fraction 0.1 --pairs-out "$OUT/pairs"

if [ "$START" = scratch ]; then
  stage "sentencepiece + fairseq-preprocess (pre-training from scratch: $ARCH)"
  bash scripts/prepare_data.sh --train "$OUT/stdlib.train.txt" --valid "$OUT/stdlib.valid.txt" \
    --name pretrain --vocab-size 8000 --destdir "$DATA"
  MODEL_FLAGS=(--arch "$ARCH")
  PMLM_INIT=()
  PMLM_BUDGET=(--max-update $((PRE_MINUTES * 80)) --total-num-update $((PRE_MINUTES * 80))
               --stop-time-hours "$(python -c "print($PRE_MINUTES / 60)")" --lr 2e-4 --warmup-updates 50)
  TOKENIZER_DIR=$DATA/pretrain
else
  # layers 0,2,4 and the dictionary rows the training text uses (6.5k of 30.5k): each update
  # costs about half (the held-out text meets 0.8% <unk> pieces)
  stage "released weights: $START, layers $LAYERS, the pieces of the training text -> $OUT/released"
  python scripts/convert_checkpoint.py import "$START" "$OUT/released" --layers "$LAYERS" \
    --keep-pieces-of "$OUT/stdlib.train.txt" "$OUT/pairs/train.source" "$OUT/pairs/train.target"
  stage "WordPiece (the released vocab) + fairseq-preprocess"
  bash scripts/prepare_data.sh --train "$OUT/stdlib.train.txt" --valid "$OUT/stdlib.valid.txt" \
    --name pretrain --wordpiece-vocab "$OUT/released/vocab.txt" --srcdict "$OUT/released/dict.txt" \
    --destdir "$DATA"
  mapfile -t MODEL_FLAGS < <(python scripts/recipe_info.py model-flags "$OUT/released/model.pt")
  PMLM_INIT=(--finetune-from-model "$OUT/released/model.pt")
  PMLM_BUDGET=(--max-update "$PMLM_UPDATES" --total-num-update "$PMLM_UPDATES" --lr "$PMLM_LR"
               --warmup-updates $((PMLM_UPDATES / 10)))
  TOKENIZER_DIR=$OUT/released
fi

# the held-out AE/PAR numbers, the same masks before and after (fairseq-validate, one seed)
validate() {
  logged "$OUT/validate-$2.log" fairseq-validate "$DATA/pretrain" --user-dir fairseq_pmlm \
    --task pseudo_masked_lm --path "$1" --tokens-per-sample 128 --batch-size 16 --max-valid-steps 20 \
    --seed 1 --log-format json "${DEVICE[@]}"
}
if [ "$START" != scratch ]; then
  stage "held-out AE/PAR before the PMLM stage (the released model has no LM head: it starts fresh)"
  validate "$OUT/released/model.pt" before
fi

stage "PMLM pre-training (AE+PAR), ${MODEL_FLAGS[*]}"
logged "$OUT/pmlm.log" fairseq-train "$DATA/pretrain" --user-dir fairseq_pmlm \
  --task pseudo_masked_lm "${MODEL_FLAGS[@]}" --criterion pmlm --objective ae+par \
  --tokens-per-sample 128 --batch-size 16 --max-tokens 100000 \
  --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-6 --weight-decay 0.01 \
  --lr-scheduler polynomial_decay "${PMLM_BUDGET[@]}" "${PMLM_INIT[@]}" \
  --dropout 0.1 --attention-dropout 0.1 --seed 1 \
  --log-format json --log-interval 20 --validate-interval-updates 100 --max-valid-steps 10 \
  --save-dir "$OUT/pmlm" --no-epoch-checkpoints --save-interval-updates 100000 "${DEVICE[@]}"
PMLM=$OUT/pmlm/checkpoint_last.pt
stage "held-out AE/PAR after the PMLM stage"
validate "$PMLM" after
python scripts/plot_curves.py "$OUT/pmlm.log" --out "$OUT/curves.png"

stage "summarisation pairs -> WordPiece/sentencepiece of the pre-trained model"
bash scripts/s2s/prepare.sh --raw "$OUT/pairs" --name sum --pretrain-data "$TOKENIZER_DIR" --destdir "$DATA"

SYSTEMS=(pmlm)
[ "$START" != scratch ] && SYSTEMS+=(released)
SYSTEMS+=(random)
for sys in "${SYSTEMS[@]}"; do
  case $sys in
    pmlm) init=$PMLM ;;
    released) init=$OUT/released/model.pt ;;
    random) init=none ;;
  esac
  stage "fine-tuning ($sys): $FT_UPDATES updates of 16 pairs, lr $FT_LR"
  logged "$OUT/finetune-$sys.log" bash scripts/s2s/finetune.sh --preset demo --data "$DATA/sum" --checkpoint "$init" \
    --save-dir "$OUT/sum-$sys" -- "${MODEL_FLAGS[@]}" \
    --max-update "$FT_UPDATES" --total-num-update "$FT_UPDATES" --warmup-updates $((FT_UPDATES / 10)) \
    --lr "$FT_LR" --dropout 0 --attention-dropout 0 --target-mask-prob 0 \
    --disable-validation --log-interval 50 "${DEVICE[@]}"
  stage "fairseq-generate ($sys): beam 4, trigram blocking"
  logged "$OUT/generate-$sys.log" bash scripts/s2s/generate.sh --preset demo --data "$DATA/sum" \
    --checkpoint "$OUT/sum-$sys/checkpoint_last.pt" --refs "$OUT/pairs/test.target" --out-dir "$OUT/generate-$sys" \
    -- "${DEVICE[@]}"
  grep -E "^Generate" "$OUT/generate-$sys.log" | sed 's/^/   /'
done

stage "results"
echo "summarisation of docstrings, test pairs from modules held out of every training stage (ROUGE F1 %):"
args=()
for sys in "${SYSTEMS[@]}"; do
  case $sys in
    pmlm) name="$([ "$START" = scratch ] && echo "$ARCH" || echo "$START"): PMLM + fine-tuned" ;;
    released) name="$START: released, no PMLM + fine-tuned" ;;
    random) name="same arch, random init + fine-tuned" ;;
  esac
  args+=(--hyp "$OUT/generate-$sys/hyp.txt" --name "$name")
done
python scripts/score.py --ref "$OUT/pairs/test.target" "${args[@]}" \
  --hyp "$OUT/pairs/test.lead" --name "lead-1 (first body sentence)" \
  --bootstrap --examples 3 --source "$OUT/pairs/test.source" | tee "$OUT/rouge.md"
echo
echo "PMLM curves: $OUT/curves.png; checkpoints: $OUT/pmlm, $OUT/sum-*; hub: UniLMv2Model.from_pretrained('$OUT/sum-pmlm')"
echo "wall time: $((SECONDS - start)) s"
