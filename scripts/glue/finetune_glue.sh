#!/usr/bin/env bash
# Fine-tune a unilmv2 checkpoint on one GLUE task (binarized by prepare_glue.py) through
# fairseq's own sentence_prediction task and criterion, then print the dev metric(s).
# Defaults are the paper's (appendix, "NLU Fine-Tuning"): batch 32, lr 2e-5 (grid
# {5e-6,1e-5,1.5e-5,2e-5,3e-5}), linear decay, warmup ratio 0.1 ({0.1,0.2}), weight decay 0.01
# ({0.01,0.1}), 10 epochs ({10,15}); the paper picks each task's values on dev.
#
#   bash scripts/glue/finetune_glue.sh --data data-bin/glue/RTE --checkpoint CKPT.pt \
#       --save-dir checkpoints/glue/RTE [--arch ARCH] [--lr 2e-5] [--batch-size 32] \
#       [--epochs 10] [--warmup-ratio 0.1] [--weight-decay 0.01] [--force] [-- MORE FAIRSEQ-TRAIN ARGS]
# The architecture and its flags are read from the checkpoint (any converted or pre-trained one);
# --arch overrides. --checkpoint none: random weights of --arch (default unilmv2_base; checks only).
# The recipe keeps no checkpoint_last.pt; one found in SAVE_DIR (which fairseq would resume) is
# used only if its run was started from the same --checkpoint; --force moves SAVE_DIR's
# checkpoint*.pt into SAVE_DIR/replaced-DATE-TIME/ and starts afresh. Flags after -- come last and
# win (--lr, --batch-size, ...); -- --max-update N trains N updates, the warmup and decay scaled to them.
# On a GPU it trains in --fp16, as RoBERTa's GLUE recipe (add its -- --fp16-init-scale 4
# --threshold-loss-scale 1 --fp16-scale-window 128 if the loss scale keeps falling); --cpu without one.
set -euo pipefail
# shellcheck source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
activate_venv "$@"
declare -A FLAGS=([--data]=DATA [--checkpoint]=CKPT [--save-dir]=SAVE [--arch]=ARCH [--lr]=LR [--batch-size]=BSZ
                  [--epochs]=EPOCHS [--warmup-ratio]=WARMUP [--weight-decay]=WD [--force]=FORCE:switch)
DATA='' CKPT='' SAVE='' ARCH='' LR=2e-5 BSZ=32 EPOCHS=10 WARMUP=0.1 WD=0.01 FORCE=''
PASS_TO=fairseq-train
parse_flags "$@"
require_flags --data --checkpoint --save-dir
forward_signals  # from here on: the facts runs and the steps stop cleanly on Ctrl-C and SIGTERM
device_flags  # (before anything is written: -- --fp16 without a GPU is refused here)
[ "$CKPT" = none ] || require_files "$CKPT"
resume_or_start "$SAVE" "$(abs_path "$CKPT")" sentence_prediction

FACTS=(META glue-meta "$DATA")  # what prepare_glue.py recorded
if [ -n "$ARCH" ]; then MODEL=(--arch "$ARCH")
elif [ "$CKPT" = none ]; then MODEL=(--arch unilmv2_base)
else FACTS+=(+ MODEL model-flags "$CKPT")
fi
recipe_facts "${FACTS[@]}"
read -r TASK N METRIC NCLS <<< "${META[0]}"
# flags after -- win in fairseq-train: the schedule follows them (-- --max-update N: N updates, the
# warmup and decay scaled to them, where they stayed on the epochs' count and the lr reached 0 early)
take_overrides --lr --batch-size --weight-decay
MAXUPD=$(extra_value --max-update '')
per_update "$BSZ"
SCHEDULE=$(recipe_info schedule --examples "$N" --batch "$PER_UPDATE" --epochs "$EPOCHS" --warmup-ratio "$WARMUP" \
  ${MAXUPD:+--updates "$MAXUPD"})
read -r UPDATES WARMUP_UPDATES <<< "$SCHEDULE"
WARMUP_UPDATES=$(extra_value --warmup-updates "$WARMUP_UPDATES")  # (its line says what runs)
case "$METRIC" in  # what fairseq's sentence_prediction criterion must compute for this task
  mcc) REPORT=(--report-mcc) ;;
  f1) REPORT=(--report-acc-and-f1) ;;
  pearson) REPORT=(--report-pearson-and-spearman --regression-target) ;;
  *) REPORT=() ;;
esac
# a --best-checkpoint-metric after -- picks checkpoint_best.pt and the epoch reported: fairseq minimises it
# unless told to maximise (the losses are minimised, the task's scores maximised, as for the task's metric)
BEST=$(extra_value --best-checkpoint-metric "$METRIC") MAXIMIZE=(--maximize-best-checkpoint-metric)
case $BEST in loss | nll_loss) MAXIMIZE=() ;; esac
for a in ${EXTRA[@]+"${EXTRA[@]}"}; do [ "$a" != --maximize-best-checkpoint-metric ] || MAXIMIZE=("$a"); done
VALID=valid; [ -f "$DATA/input0/valid1.idx" ] && VALID=valid,valid1
FROM=(); [ "$CKPT" = none ] || FROM=(--finetune-from-model "$(abs_path "$CKPT")")  # absolute: resume_or_start
mkdir -p "$SAVE"
echo "finetune_glue: $TASK, $N examples, $UPDATES updates (warmup $WARMUP_UPDATES), lr $LR, batch $PER_UPDATE"
# [SOS] A [EOS] (B [EOS]): --init-token 0 prepends <s>; no --separator-token, input0 already
# ends in </s>; the model reads the segment ids off the first </s>
run_step_logged "$SAVE/train.log" fairseq-train "$DATA" --user-dir "$ROOT/fairseq_pmlm" "${FROM[@]}" \
  --task sentence_prediction --criterion sentence_prediction "${MODEL[@]}" \
  --num-classes "$NCLS" --init-token 0 --max-positions 512 --shorten-method truncate \
  "${REPORT[@]}" --best-checkpoint-metric "$BEST" ${MAXIMIZE[@]+"${MAXIMIZE[@]}"} \
  --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-6 --weight-decay "$WD" --clip-norm 0.0 \
  --lr "$LR" --lr-scheduler polynomial_decay --total-num-update "$UPDATES" --warmup-updates "$WARMUP_UPDATES" \
  --max-update "$UPDATES" --max-epoch "$EPOCHS" --batch-size "$BSZ" --required-batch-size-multiple 1 \
  --valid-subset "$VALID" --save-dir "$SAVE" --no-epoch-checkpoints --no-last-checkpoints \
  --log-format json --log-interval 50 "${DEVICE[@]}" ${EXTRA[@]+"${EXTRA[@]}"}
# the dev results of the epoch with the best value of the task's metric, per dev set
MIN=(); [ ${#MAXIMIZE[@]} -gt 0 ] || MIN=(--minimize)
recipe_info glue-report "$SAVE/train.log" "$TASK" "$METRIC" --best "$BEST" ${MIN[@]+"${MIN[@]}"}
