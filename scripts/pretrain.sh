#!/usr/bin/env bash
# Pre-training with the pseudo_masked_lm task: PMLM (--objective ae+par), or MLM (ae), AR, PAR,
# AE+AR. The one pre-training recipe: the main job (scripts/demo.sh) and the objective ablation
# (scripts/ablate_objectives.sh) both run it, so they run one experiment unless a flag says otherwise.
#
#   bash scripts/pretrain.sh --data DIR --save-dir DIR --init CKPT|random [--objective ae+par]
#       [--updates 250] [--lr 3e-4] [--tokens-per-sample 128] [--batch-size 16] [--seed 1]
#       [-- MORE FAIRSEQ-TRAIN ARGS]
#   e.g. bash scripts/pretrain.sh --data data-bin/wiki --save-dir checkpoints/pmlm --init random \
#            --updates 125000 --lr 6e-4 --tokens-per-sample 512 --batch-size 32 -- --arch unilmv2_base --fp16
#
# --data: a data-bin of scripts/prepare_data.sh, or its shards joined by ':'. --init: a checkpoint
# to continue (released weights imported by scripts/convert_checkpoint.py: its architecture comes
# with it), or random (then --arch after --). --updates (or --max-update after --) updates of
# --batch-size sequences of --tokens-per-sample tokens; Adam (betas 0.9, 0.98, eps 1e-6, weight
# decay 0.01), lr --lr with linear warmup over the first tenth and linear decay, dropout 0.1;
# held-out loss every tenth of the updates, a checkpoint every quarter (checkpoint_last.pt: the
# same command resumes a stopped run). A start whose LM head is untrained trains the head alone
# first (the task's --head-warmup-updates). Flags after -- go to fairseq-train last, so they
# override these (--fp16 on a GPU; --cpu is added without one).
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
activate_venv "$@"
declare -A FLAGS=([--data]=DATA [--save-dir]=SAVE [--init]=INIT [--objective]=OBJECTIVE [--updates]=UPDATES
                  [--lr]=LR [--tokens-per-sample]=TPS [--batch-size]=BSZ [--seed]=SEED)
DATA='' SAVE='' INIT='' OBJECTIVE=ae+par UPDATES=250 LR=3e-4 TPS=128 BSZ=16 SEED=1
PASS_TO=fairseq-train
parse_flags "$@"
require_flags --data --save-dir --init
# fairseq-train takes a flag's last value, so one after -- wins: the checks, the line below and the
# schedule read it too. --max-update there is the run's length as --updates is (the warmup, decay
# and intervals stayed on --updates': the lr reached 0 there and the updates after it trained nothing)
UPDATES=$(extra_value --max-update "$UPDATES")
take_overrides --objective --lr --tokens-per-sample --batch-size --seed
for flag in --updates --tokens-per-sample --batch-size; do
  var=${FLAGS[$flag]}
  [ "$flag" != --updates ] || [ -z "$(extra_value --max-update '')" ] || flag="--max-update (after --)"
  [[ ${!var} =~ ^[1-9][0-9]*$ ]] || die "$flag must be a positive integer: ${!var}"
done
[[ $SEED =~ ^[0-9]+$ ]] || die "--seed must be a non-negative integer: $SEED"
forward_signals  # from here on: the facts runs and the step stop cleanly on Ctrl-C and SIGTERM
# --data is fairseq-train's: one data-bin, or shards joined by ':' (prepare_data.sh --shards K)
SPLIT=$(extra_value --train-subset train)
IFS=: read -ra SHARDS <<< "$DATA"
for shard in "${SHARDS[@]}"; do
  [ -f "$shard/$SPLIT.idx" ] && continue
  [ ! -d "$shard/shard0" ] || die "no binarized $SPLIT split in $shard, but shards: give them as --data" \
    "$shard/shard0:$shard/shard1:... (what prepare_data.sh printed)"
  die "no binarized $SPLIT split in $shard (run scripts/prepare_data.sh)"
done
MODEL=()
if [ "$INIT" = random ]; then
  [ -n "$(extra_value --arch '')" ] || die "--init random needs --arch after --"
  resume_or_start "$SAVE" none pseudo_masked_lm
else
  require_files "$INIT"
  INIT=$(abs_path "$INIT")
  resume_or_start "$SAVE" "$INIT" pseudo_masked_lm
  recipe_facts MODEL model-flags "$INIT"
  MODEL+=(--finetune-from-model "$INIT")
fi
device_flags
tenth=$(((UPDATES + 9) / 10)) quarter=$(((UPDATES + 3) / 4))
echo "pretrain: --objective $OBJECTIVE on $DATA from $INIT: $UPDATES updates of $BSZ x $TPS tokens, lr $LR," \
  "seed $SEED"
mkdir -p "$SAVE"
run_step fairseq-train "$DATA" --user-dir "$ROOT/fairseq_pmlm" \
  --task pseudo_masked_lm --criterion pmlm --objective "$OBJECTIVE" ${MODEL[@]+"${MODEL[@]}"} \
  --tokens-per-sample "$TPS" --batch-size "$BSZ" \
  --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-6 --weight-decay 0.01 \
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$tenth" \
  --total-num-update "$UPDATES" --max-update "$UPDATES" --dropout 0.1 --attention-dropout 0.1 --seed "$SEED" \
  --log-format json --log-interval "$tenth" --validate-interval-updates "$tenth" --max-valid-steps 10 \
  --save-dir "$SAVE" --no-epoch-checkpoints --save-interval-updates "$quarter" --keep-interval-updates 1 \
  "${DEVICE[@]}" ${EXTRA[@]+"${EXTRA[@]}"}
