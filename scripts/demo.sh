#!/usr/bin/env bash
# The main job on the embedded default: real text every machine here has (the docstrings of
# the Python standard library) -> sentencepiece -> fairseq-preprocess -> a few minutes of
# PMLM (AE+PAR) pre-training of a small unilmv2 -> how AE and PAR moved, plus a PNG plot;
# then summarisation fine-tuning (docstring body -> its one-line summary) of that model and
# of the same model from random initialisation, fairseq-generate, and one ROUGE table
# (pre-trained, random init, lead-1 baseline) on modules never seen in pre-training.
#
#   bash scripts/demo.sh                          # everything, ~13 minutes on 2 CPU cores
#   PRE_MINUTES=3 bash scripts/demo.sh           # shorter pre-training
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh

OUT=${OUT_DIR:-outputs/demo}
DATA=data-bin/stdlib
SUM=data-bin/stdlib-sum
ARCH=${ARCH:-unilmv2_small}
PRE_MINUTES=${PRE_MINUTES:-6}   # pre-training wall-clock budget (fairseq --stop-time-hours)
TOKENS=${TOKENS_PER_SAMPLE:-128}
BATCH=${BATCH:-16}              # sequences per update
mkdir -p "$OUT"
start=$SECONDS
hours() { python -c "print($1 / 60)"; }
# the decay schedule spans what fits in the budget (~80 updates a minute on 2 cores)
UPDATES=${PRE_UPDATES:-$((PRE_MINUTES * 80))}
if python -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  DEVICE_FLAGS=(--fp16)
else
  DEVICE_FLAGS=(--cpu --num-workers 0)
fi

if [ ! -f "$DATA/train.bin" ] || [ ! -f "$OUT/pairs/test.target" ]; then
  echo "== 1/6 corpus: docstrings of the installed Python standard library"
  python scripts/make_stdlib_corpus.py --out "$OUT/stdlib.train.txt" --valid-out "$OUT/stdlib.valid.txt" \
    --valid-fraction 0.1 --pairs-out "$OUT/pairs"
  echo "== 2/6 sentencepiece + fairseq-preprocess -> $DATA"
  bash scripts/prepare_data.sh --train "$OUT/stdlib.train.txt" --valid "$OUT/stdlib.valid.txt" \
    --name stdlib --vocab-size 8000
else
  echo "== 1-2/6 reusing $DATA and $OUT/pairs (delete them to rebuild)"
fi

echo "== 3/6 pre-training $ARCH with AE+PAR for up to $PRE_MINUTES minutes"
rm -rf "$OUT/checkpoints"
fairseq-train "$DATA" --user-dir fairseq_pmlm \
  --task pseudo_masked_lm --arch "$ARCH" --criterion pmlm --objective ae+par \
  --tokens-per-sample "$TOKENS" --batch-size "$BATCH" --max-tokens 100000 \
  --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-6 --weight-decay 0.01 \
  --lr 2e-4 --lr-scheduler polynomial_decay --warmup-updates 50 --total-num-update "$UPDATES" \
  --max-update "$UPDATES" --stop-time-hours "$(hours "$PRE_MINUTES")" \
  --dropout 0.1 --attention-dropout 0.1 --seed 1 \
  --log-format json --log-interval 20 --validate-interval-updates 200 --max-valid-steps 10 \
  --save-dir "$OUT/checkpoints" --no-epoch-checkpoints --save-interval-updates 200 \
  --keep-interval-updates 1 "${DEVICE_FLAGS[@]}" 2>&1 | tee "$OUT/train.log"
PRETRAINED="$OUT/checkpoints/checkpoint_last.pt"

echo "== 4/6 summarisation pairs -> $SUM (the pre-training sentencepiece model and dictionary)"
bash scripts/s2s/prepare.sh "$OUT/pairs" --name stdlib-sum --pretrain-data "$DATA"

for init in pretrained random; do
  echo "== 5/6 fine-tuning ($init initialisation): 3 epochs (preset demo of scripts/s2s/presets.sh)"
  rm -rf "$OUT/sum-$init"
  bash scripts/s2s/finetune.sh demo "$SUM" "$([ $init = pretrained ] && echo "$PRETRAINED" || echo none)" \
    "$OUT/sum-$init" --arch "$ARCH" \
    --dropout 0 --attention-dropout 0 --disable-validation "${DEVICE_FLAGS[@]}" \
    > "$OUT/finetune-$init.log" 2>&1 || { tail -20 "$OUT/finetune-$init.log"; exit 1; }
  grep -E '"train_loss"' "$OUT/finetune-$init.log" | tail -1 | sed 's/.*| train | /   end of training: /'
  echo "== 6/6 fairseq-generate ($init): beam 4, trigram blocking"
  bash scripts/s2s/generate.sh demo "$SUM" "$OUT/sum-$init/checkpoint_last.pt" "$OUT/pairs/test.target" \
    "$OUT/generate-$init" "${DEVICE_FLAGS[@]}" | grep -E "^Generate" | sed 's/^/   /'
done

echo "== results"
python scripts/plot_curves.py "$OUT/train.log" --out "$OUT/curves.png" | grep -v '^plot:'
# lead-1: the first sentence of the docstring body, the usual extractive baseline
python - "$OUT/pairs/test.source" "$OUT/lead.txt" <<'PY'
import re, sys
with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w", encoding="utf-8") as out:
    for line in f:
        out.write(re.split(r"(?<=[.!?])\s+(?=[A-Z\"'`])", line.strip(), maxsplit=1)[0] + "\n")
PY
echo "summarisation, test pairs from modules held out of pre-training (ROUGE F1, %):"
python scripts/score.py --ref "$OUT/pairs/test.target" \
  --hyp "$OUT/generate-pretrained/hyp.txt" --name "unilmv2 pre-trained $PRE_MINUTES min + fine-tuned" \
  --hyp "$OUT/generate-random/hyp.txt" --name "same, random init + fine-tuned" \
  --hyp "$OUT/lead.txt" --name "lead-1 (first body sentence)" | tee "$OUT/rouge.md"
echo "pre-training curves: $OUT/curves.png; checkpoints: $OUT/checkpoints, $OUT/sum-*"
echo "wall time: $((SECONDS - start)) s"
