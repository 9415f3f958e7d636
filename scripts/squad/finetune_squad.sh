#!/usr/bin/env bash
# Fine-tune a unilmv2 checkpoint on SQuAD v1.1 or v2.0 (task/criterion pmlm_squad), then answer
# the dev questions (predictions.json, null_odds.json in SAVE_DIR) and print the official EM/F1.
# Defaults are the paper's (appendix, "NLU Fine-Tuning"): batch 32, lr 2e-5, linear decay,
# warmup ratio 0.1, weight decay 0.01, 4 epochs; windows of 384 tokens, stride 128. DATA is the
# pre-training data directory or a convert_checkpoint.py output (its dict.txt and tokenizer); the
# architecture and its flags are read from the checkpoint (--arch overrides).
#
#   bash scripts/squad/finetune_squad.sh --data data-bin/NAME --train-json train-v2.0.json \
#       --dev-json dev-v2.0.json --checkpoint CKPT.pt --save-dir checkpoints/squad2 [--v2] \
#       [--arch ARCH] [--lr 2e-5] [--batch-size 32] [--epochs 4] [--warmup-ratio 0.1] \
#       [--max-positions 384] [--doc-stride 128] [-- MORE FAIRSEQ-TRAIN ARGS]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck disable=SC1091
[ -f "$ROOT/.venv/bin/activate" ] && source "$ROOT/.venv/bin/activate"
die() { echo "finetune_squad.sh: error: $*" >&2; exit 2; }
DATA= TRAIN= DEV= CKPT= SAVE= V2=() ARCH= LR=2e-5 BSZ=32 EPOCHS=4 WARMUP=0.1 WD=0.01 MAXPOS=384 STRIDE=128
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    --v2) V2=(--squad-v2); shift; continue ;;
    --data) DATA=${2-} ;;
    --train-json) TRAIN=${2-} ;;
    --dev-json) DEV=${2-} ;;
    --checkpoint) CKPT=${2-} ;;
    --save-dir) SAVE=${2-} ;;
    --arch) ARCH=${2-} ;;
    --lr) LR=${2-} ;;
    --batch-size) BSZ=${2-} ;;
    --epochs) EPOCHS=${2-} ;;
    --warmup-ratio) WARMUP=${2-} ;;
    --weight-decay) WD=${2-} ;;
    --max-positions) MAXPOS=${2-} ;;
    --doc-stride) STRIDE=${2-} ;;
    *) die "unknown flag: $1 (see the header of $0)" ;;
  esac
  [ $# -ge 2 ] || die "$1 needs a value"
  shift 2
done
[ -n "$DATA" ] && [ -n "$TRAIN" ] && [ -n "$DEV" ] && [ -n "$CKPT" ] && [ -n "$SAVE" ] \
  || die "--data, --train-json, --dev-json, --checkpoint and --save-dir are required"
for f in "$TRAIN" "$DEV" "$CKPT" "$DATA/dict.txt"; do [ -f "$f" ] || die "file not found: $f"; done
python "$ROOT/scripts/recipe_info.py" bpe-flags "$DATA" > /dev/null || exit 2  # spm.model or vocab.txt
if [ -n "$ARCH" ]; then MODEL=(--arch "$ARCH")
else mapfile -t MODEL < <(python "$ROOT/scripts/recipe_info.py" model-flags "$CKPT"); [ ${#MODEL[@]} -gt 1 ] || exit 2
fi
mkdir -p "$SAVE"
# the schedule is counted in updates: windows of the training file / batch size x epochs
WINDOWS=$(python - "$DATA" "$TRAIN" "$MAXPOS" "$STRIDE" ${V2[@]+"${V2[@]}"} <<'PY'
import logging, sys
logging.disable(logging.WARNING)
from fairseq_pmlm.tasks.squad import PMLMSquadConfig, PMLMSquadTask
data, train, maxpos, stride = sys.argv[1:5]
cfg = PMLMSquadConfig(data=data, squad_v2=len(sys.argv) > 5, max_positions=int(maxpos), doc_stride=int(stride))
print(len(PMLMSquadTask.setup_task(cfg).squad_features(train, training=True)[2]))
PY
)
UPDATES=$(( (WINDOWS + BSZ - 1) / BSZ * EPOCHS ))
WARMUP_UPDATES=$(python -c "print(int($UPDATES * $WARMUP))")
echo "finetune_squad: $WINDOWS training windows, $UPDATES updates (warmup $WARMUP_UPDATES), lr $LR, batch $BSZ"
fairseq-train "$DATA" --user-dir "$ROOT/fairseq_pmlm" --task pmlm_squad --criterion pmlm_squad \
  --train-json "$TRAIN" --valid-json "$DEV" ${V2[@]+"${V2[@]}"} --max-positions "$MAXPOS" --doc-stride "$STRIDE" \
  "${MODEL[@]}" --finetune-from-model "$CKPT" \
  --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-6 --weight-decay "$WD" --clip-norm 1.0 \
  --lr "$LR" --lr-scheduler polynomial_decay --total-num-update "$UPDATES" --warmup-updates "$WARMUP_UPDATES" \
  --max-update "$UPDATES" --batch-size "$BSZ" --required-batch-size-multiple 1 \
  --save-dir "$SAVE" --no-epoch-checkpoints --log-format json --log-interval 50 "$@" 2>&1 | tee "$SAVE/train.log"
python "$ROOT/scripts/squad/predict_squad.py" --checkpoint "$SAVE/checkpoint_last.pt" --json "$DEV" \
  --out "$SAVE/predictions.json" --null-odds "$SAVE/null_odds.json"
