#!/usr/bin/env bash
# Fine-tune a unilmv2 checkpoint on one GLUE task (binarized by prepare_glue.py) through
# fairseq's own sentence_prediction task and criterion, then print the dev metric(s).
# Defaults are the paper's (appendix, "NLU Fine-Tuning"): batch 32, lr 2e-5 (grid
# {5e-6,1e-5,1.5e-5,2e-5,3e-5}), linear decay, warmup ratio 0.1 ({0.1,0.2}), weight decay 0.01
# ({0.01,0.1}), 10 epochs ({10,15}); the paper picks each task's values on dev.
#
#   bash scripts/glue/finetune_glue.sh --data data-bin/glue/RTE --checkpoint CKPT.pt \
#       --save-dir checkpoints/glue/RTE [--arch ARCH] [--lr 2e-5] [--batch-size 32] \
#       [--epochs 10] [--warmup-ratio 0.1] [--weight-decay 0.01] [-- MORE FAIRSEQ-TRAIN ARGS]
# The architecture and its flags are read from the checkpoint (any converted or pre-trained one);
# --arch overrides. --checkpoint none: random weights of --arch (default unilmv2_base; checks only).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck disable=SC1091
[ -f "$ROOT/.venv/bin/activate" ] && source "$ROOT/.venv/bin/activate"
die() { echo "finetune_glue.sh: error: $*" >&2; exit 2; }
DATA= CKPT= SAVE= ARCH= LR=2e-5 BSZ=32 EPOCHS=10 WARMUP=0.1 WD=0.01
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    --data) DATA=${2-} ;;
    --checkpoint) CKPT=${2-} ;;
    --save-dir) SAVE=${2-} ;;
    --arch) ARCH=${2-} ;;
    --lr) LR=${2-} ;;
    --batch-size) BSZ=${2-} ;;
    --epochs) EPOCHS=${2-} ;;
    --warmup-ratio) WARMUP=${2-} ;;
    --weight-decay) WD=${2-} ;;
    *) die "unknown flag: $1 (see the header of $0)" ;;
  esac
  [ $# -ge 2 ] || die "$1 needs a value"
  shift 2
done
[ -n "$DATA" ] && [ -n "$CKPT" ] && [ -n "$SAVE" ] || die "--data, --checkpoint and --save-dir are required"
[ -f "$DATA/meta.json" ] || die "$DATA/meta.json not found: binarize with scripts/glue/prepare_glue.py"
[ "$CKPT" = none ] || [ -f "$CKPT" ] || die "checkpoint not found: $CKPT"

read -r TASK N METRIC NCLS < <(python -c "import json,sys; m=json.load(open(sys.argv[1])); \
print(m['task'], m['train_examples'], m['metric'], m['num_classes'])" "$DATA/meta.json")
UPDATES=$(( (N + BSZ - 1) / BSZ * EPOCHS ))
WARMUP_UPDATES=$(python -c "print(int($UPDATES * $WARMUP))")
case "$METRIC" in  # what fairseq's sentence_prediction criterion must compute for this task
  mcc) REPORT=(--report-mcc) ;;
  f1) REPORT=(--report-acc-and-f1) ;;
  pearson) REPORT=(--report-pearson-and-spearman --regression-target) ;;
  *) REPORT=() ;;
esac
VALID=valid; [ -f "$DATA/input0/valid1.idx" ] && VALID=valid,valid1
FROM=(); [ "$CKPT" = none ] || FROM=(--finetune-from-model "$CKPT")
if [ -n "$ARCH" ]; then MODEL=(--arch "$ARCH")
elif [ "$CKPT" = none ]; then MODEL=(--arch unilmv2_base)
else mapfile -t MODEL < <(python "$ROOT/scripts/recipe_info.py" model-flags "$CKPT"); [ ${#MODEL[@]} -gt 1 ] || exit 2
fi
mkdir -p "$SAVE"
echo "finetune_glue: $TASK, $N examples, $UPDATES updates (warmup $WARMUP_UPDATES), lr $LR, batch $BSZ"
# [SOS] A [EOS] (B [EOS]): --init-token 0 prepends <s>; no --separator-token, input0 already
# ends in </s>; the model reads the segment ids off the first </s>
fairseq-train "$DATA" --user-dir "$ROOT/fairseq_pmlm" "${FROM[@]}" \
  --task sentence_prediction --criterion sentence_prediction "${MODEL[@]}" \
  --num-classes "$NCLS" --init-token 0 --max-positions 512 --shorten-method truncate \
  "${REPORT[@]}" --best-checkpoint-metric "$METRIC" --maximize-best-checkpoint-metric \
  --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-6 --weight-decay "$WD" --clip-norm 0.0 \
  --lr "$LR" --lr-scheduler polynomial_decay --total-num-update "$UPDATES" --warmup-updates "$WARMUP_UPDATES" \
  --max-update "$UPDATES" --max-epoch "$EPOCHS" --batch-size "$BSZ" --required-batch-size-multiple 1 \
  --valid-subset "$VALID" --save-dir "$SAVE" --no-epoch-checkpoints --no-last-checkpoints \
  --log-format json --log-interval 50 "$@" 2>&1 | tee "$SAVE/train.log"
# the dev results of the epoch with the best value of the task's metric, per dev set
python - "$SAVE/train.log" "$TASK" "$METRIC" <<'PY'
import json, re, sys
log, task, metric = sys.argv[1:]
shown = {"mcc": ["mcc", "accuracy"], "f1": ["f1", "accuracy"], "pearson": ["pearson", "spearman"]}.get(metric, [metric])
best = {}
for line in open(log):
    m = re.search(r"\| (valid\w*) \| (\{.*\})$", line.strip())
    if m:
        subset, rec = m.group(1), json.loads(m.group(2))
        values = {k: float(rec[f"{subset}_{k}"]) for k in shown if f"{subset}_{k}" in rec}
        if metric in values and values[metric] > best.get(subset, {}).get(metric, float("-inf")):
            best[subset] = dict(values, epoch=int(rec["epoch"]))
if not best:
    sys.exit(f"finetune_glue.sh: error: no dev {metric} in {log}")
for subset, v in best.items():
    print(f"finetune_glue: {task} {subset} (best epoch {v.pop('epoch')}): " + ", ".join(f"{k} {x:.2f}" for k, x in v.items()))
PY
