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
#       [--max-positions 384] [--doc-stride 128] [--force] [-- MORE FAIRSEQ-TRAIN ARGS]
# A SAVE_DIR that already holds checkpoint_last.pt is resumed (fairseq does so by itself) only when
# that run was started from the same --checkpoint, and the recipe says so; otherwise it stops.
# --force then moves SAVE_DIR's checkpoint*.pt into SAVE_DIR/replaced-DATE-TIME/ and starts afresh.
# Flags after -- come last and win (--lr, --batch-size, --max-positions, ...); -- --max-update N
# trains N updates, the warmup and decay scaled to them. On a GPU it trains in --fp16; --cpu without one.
set -euo pipefail
# shellcheck source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
activate_venv "$@"
declare -A FLAGS=([--data]=DATA [--train-json]=TRAIN [--dev-json]=DEV [--checkpoint]=CKPT [--save-dir]=SAVE
                  [--v2]=V2:switch [--arch]=ARCH [--lr]=LR [--batch-size]=BSZ [--epochs]=EPOCHS
                  [--warmup-ratio]=WARMUP [--weight-decay]=WD [--max-positions]=MAXPOS [--doc-stride]=STRIDE
                  [--force]=FORCE:switch)
DATA='' TRAIN='' DEV='' CKPT='' SAVE='' V2='' ARCH='' LR=2e-5 BSZ=32 EPOCHS=4 WARMUP=0.1 WD=0.01 MAXPOS=384 STRIDE=128
FORCE=''
PASS_TO=fairseq-train
parse_flags "$@"
# flags after -- win in fairseq-train: the windows and schedule follow them (-- --max-update N: N
# updates, the warmup and decay scaled to them, where the lr reached 0 at the epochs' count)
take_overrides --lr --batch-size --weight-decay --max-positions --doc-stride
MAXUPD=$(extra_value --max-update '')
require_flags --data --train-json --dev-json --checkpoint --save-dir
per_update "$BSZ"
forward_signals  # from here on: the facts runs and the steps stop cleanly on Ctrl-C and SIGTERM
device_flags  # (before anything is written: -- --fp16 without a GPU is refused here)
require_files "$TRAIN" "$DEV" "$CKPT" "$DATA/dict.txt"
resume_or_start "$SAVE" "$(abs_path "$CKPT")" pmlm_squad
SQUAD=(--max-positions "$MAXPOS" --doc-stride "$STRIDE")
if [ -n "$V2" ]; then SQUAD+=(--squad-v2); fi
# the tokenizer (spm.model or vocab.txt) must be there; the schedule is counted in updates: windows
# of the training file / batch size x epochs
FACTS=(BPE bpe-flags "$DATA" + WINDOWS squad-windows --data "$DATA" --train-json "$TRAIN" "${SQUAD[@]}")
if [ -n "$ARCH" ]; then MODEL=(--arch "$ARCH")
else FACTS+=(+ MODEL model-flags "$CKPT")
fi
recipe_facts "${FACTS[@]}"
mkdir -p "$SAVE"
SCHEDULE=$(recipe_info schedule --examples "$WINDOWS" --batch "$PER_UPDATE" --epochs "$EPOCHS" --warmup-ratio "$WARMUP" \
  ${MAXUPD:+--updates "$MAXUPD"})
read -r UPDATES WARMUP_UPDATES <<< "$SCHEDULE"
WARMUP_UPDATES=$(extra_value --warmup-updates "$WARMUP_UPDATES")  # (its line says what runs)
echo "finetune_squad: $WINDOWS training windows, $UPDATES updates (warmup $WARMUP_UPDATES), lr $LR, batch $PER_UPDATE"
run_step_logged "$SAVE/train.log" fairseq-train "$DATA" --user-dir "$ROOT/fairseq_pmlm" --task pmlm_squad \
  --criterion pmlm_squad --train-json "$TRAIN" --valid-json "$DEV" "${SQUAD[@]}" \
  "${MODEL[@]}" --finetune-from-model "$(abs_path "$CKPT")" \
  --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-6 --weight-decay "$WD" --clip-norm 1.0 \
  --lr "$LR" --lr-scheduler polynomial_decay --total-num-update "$UPDATES" --warmup-updates "$WARMUP_UPDATES" \
  --max-update "$UPDATES" --batch-size "$BSZ" --required-batch-size-multiple 1 \
  --save-dir "$SAVE" --no-epoch-checkpoints --log-format json --log-interval 50 "${DEVICE[@]}" ${EXTRA[@]+"${EXTRA[@]}"}
python "$ROOT/scripts/squad/predict_squad.py" --checkpoint "$SAVE/checkpoint_last.pt" --json "$DEV" \
  --out "$SAVE/predictions.json" --null-odds "$SAVE/null_odds.json"
