#!/usr/bin/env bash
# The main job on the embedded default: real text every machine here has (the docstrings of
# the Python standard library) -> sentencepiece -> fairseq-preprocess -> a few minutes of
# PMLM (AE+PAR) pre-training of a small unilmv2 -> how AE and PAR moved, plus a PNG plot.
#
#   bash scripts/demo.sh                 # everything, ~10 minutes on 2 CPU cores
#   MINUTES=3 ARCH=unilmv2_tiny bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh

OUT=${OUT_DIR:-outputs/demo}
DATA=data-bin/stdlib
ARCH=${ARCH:-unilmv2_small}
MINUTES=${MINUTES:-8}           # training wall-clock budget (fairseq --stop-time-hours)
TOKENS=${TOKENS_PER_SAMPLE:-128}
BATCH=${BATCH:-32}              # sequences per update
mkdir -p "$OUT"
start=$SECONDS

if [ ! -f "$DATA/train.bin" ]; then
  echo "== 1/3 corpus: docstrings of the installed Python standard library"
  python scripts/make_stdlib_corpus.py --out "$OUT/stdlib.train.txt" --valid-out "$OUT/stdlib.valid.txt"
  echo "== 2/3 sentencepiece + fairseq-preprocess -> $DATA"
  bash scripts/prepare_data.sh --train "$OUT/stdlib.train.txt" --valid "$OUT/stdlib.valid.txt" \
    --name stdlib --vocab-size 8000
else
  echo "== 1-2/3 reusing $DATA (delete it to rebuild)"
fi

echo "== 3/3 pre-training $ARCH with AE+PAR for up to $MINUTES minutes"
rm -rf "$OUT/checkpoints"
if python -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  DEVICE_FLAGS=(--fp16)
else
  DEVICE_FLAGS=(--cpu)
fi
fairseq-train "$DATA" --user-dir fairseq_pmlm \
  --task pseudo_masked_lm --arch "$ARCH" --criterion pmlm --objective ae+par \
  --tokens-per-sample "$TOKENS" --batch-size "$BATCH" --max-tokens 100000 \
  --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-6 --weight-decay 0.01 \
  --lr 5e-4 --lr-scheduler polynomial_decay --warmup-updates 50 --total-num-update 420 \
  --max-update 420 --stop-time-hours "$(python -c "print($MINUTES / 60)")" \
  --dropout 0.1 --attention-dropout 0.1 --seed 1 \
  --log-format json --log-interval 10 --validate-interval-updates 100 \
  --save-dir "$OUT/checkpoints" --no-epoch-checkpoints --save-interval-updates 100 \
  --keep-interval-updates 1 --num-workers 0 "${DEVICE_FLAGS[@]}" 2>&1 | tee "$OUT/train.log"

echo "== results"
python scripts/plot_curves.py "$OUT/train.log" --out "$OUT/curves.png"
echo "checkpoint: $OUT/checkpoints/checkpoint_last.pt"
echo "wall time: $((SECONDS - start)) s"
