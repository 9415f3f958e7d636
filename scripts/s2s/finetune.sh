#!/usr/bin/env bash
# Fine-tune a unilmv2 checkpoint for sequence-to-sequence with s2s-ft's pseudo-masking
# (task pmlm_seq2seq, criterion pmlm_seq2seq), with a preset of scripts/s2s/presets.sh.
# Linear warmup + linear decay over the preset's epochs, as in the paper's appendix; --updates N
# (or -- --max-update N) trains N updates instead, warmup and decay scaled to them.
#
#   bash scripts/s2s/finetune.sh --preset PRESET --data DATA --checkpoint PRETRAINED.pt|none \
#       --save-dir SAVE_DIR [--updates N] [--force] [-- MORE FAIRSEQ-TRAIN ARGS]
#   e.g. bash scripts/s2s/finetune.sh --preset xsum --data data-bin/xsum \
#            --checkpoint checkpoints/unilmv2_base/checkpoint_last.pt --save-dir checkpoints/xsum \
#            -- --batch-size 16 --update-freq 4
# The architecture and its flags are read from the checkpoint (a fairseq-train checkpoint or the
# model.pt of convert_checkpoint.py import); --checkpoint none trains from random initialisation
# (a baseline) and then needs --arch (and size flags) after --. The data directory's tokenizer is
# recorded in the checkpoint (--bpe ...), so the hub tokenises without being told (fairseq-interactive
# takes the --bpe flags, as for any fairseq model: recipe_info.py bpe-flags DATA; without them it
# says so); SAVE_DIR also gets a copy of the data's dictionary and tokenizer, so
# `UniLMv2Model.from_pretrained(SAVE_DIR)` needs nothing else. The arguments after -- come last,
# so they override the preset (--max-update, --arch, ...). DATA is prepare.sh's (suffixes source,
# target); a fairseq-preprocess output with others needs them named there: -- --source-lang src --target-lang tgt.
# A SAVE_DIR that already holds checkpoint_last.pt is resumed (fairseq does so by itself) only when
# that run was started from the same --checkpoint, and the recipe says so; otherwise it stops.
# --force then moves SAVE_DIR's checkpoint*.pt into SAVE_DIR/replaced-DATE-TIME/ and starts afresh.
set -euo pipefail
# shellcheck source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source=presets.sh
source "$ROOT/scripts/s2s/presets.sh"
activate_venv "$@"
declare -A FLAGS=([--preset]=PRESET [--data]=DATA [--checkpoint]=PRE [--save-dir]=SAVE [--updates]=UPDATES
                  [--force]=FORCE:switch)
PRESET='' DATA='' PRE='' SAVE='' UPDATES='' FORCE=''
PASS_TO=fairseq-train
parse_flags "$@"
require_flags --preset --data --checkpoint --save-dir
forward_signals  # from here on: the facts runs and the steps stop cleanly on Ctrl-C and SIGTERM
preset "$PRESET"
TRAIN=$(pair_index train)
[ -f "$TRAIN" ] || die "no binarized train split in $DATA: no $(basename "$TRAIN") (run scripts/s2s/prepare.sh;" \
  "data of fairseq-preprocess with other language suffixes: name them after --, --source-lang SRC --target-lang TGT)"
[ "$PRE" = none ] || require_files "$PRE"
resume_or_start "$SAVE" "$(abs_path "$PRE")" pmlm_seq2seq
INIT=() FACTS=() DRAW=()
[ "$PDRAW" = 0 ] || DRAW=(--pseudo-draw)
if [ "$PRE" != none ]; then
  FACTS=(INIT model-flags "$PRE" +)
else
  [ -n "$(extra_value --arch '')" ] ||
    die "--checkpoint none (random init) needs --arch after --"
fi
# the schedule and the line count the sequences an update takes: the --batch-size and --update-freq
# after -- (the preset's batch is the paper's: e.g. -- --batch-size 16 --update-freq 4 for xsum's 64)
per_update "$(extra_value --batch-size "$BATCH")"
# -- --max-update N is the run's length as --updates N is: the warmup and decay scaled to it (on the
# preset's length the lr reached 0 there and the updates after it trained nothing)
UPDATES=$(extra_value --max-update "$UPDATES")
mkdir -p "$SAVE"
# the tokenizer goes beside the checkpoints now (the hub loads it from there), in the same run
recipe_facts ${FACTS[@]+"${FACTS[@]}"} BPE bpe-flags "$DATA" + PAIRS count-items "$TRAIN" + \
  SCHEDULE schedule --items "$TRAIN" --batch "$PER_UPDATE" --epochs "$EPOCHS" --warmup-ratio "$WARMUP" \
  ${UPDATES:+--updates "$UPDATES"} + TOKENIZER copy-tokenizer "$DATA" "$SAVE"
# absolute, as fairseq records it in the checkpoints: the next run compares it (resume_or_start)
[ "$PRE" = none ] || INIT+=(--finetune-from-model "$(abs_path "$PRE")")
read -r TOTAL WARM <<< "${SCHEDULE[0]}"
device_flags
# the numbers the run will use: flags after -- override the preset's
echo "s2s/finetune: $PRESET on $DATA: $PAIRS pairs, $TOTAL updates of" \
  "$PER_UPDATE, warmup $(extra_value --warmup-updates "$WARM")," \
  "lr $(extra_value --lr "$LR"), init ${PRE}"
run_step fairseq-train "$DATA" --user-dir "$ROOT/fairseq_pmlm" \
  --task pmlm_seq2seq --criterion pmlm_seq2seq --label-smoothing 0.1 \
  --max-positions "$POSITIONS" "${BPE[@]}" \
  --max-source-positions "$SRC" --max-target-positions "$TGT" --target-mask-prob "$TMASK" \
  ${DRAW[@]+"${DRAW[@]}"} \
  --optimizer adam --adam-betas '(0.9, 0.999)' --adam-eps 1e-8 --weight-decay 0.01 --clip-norm 1.0 \
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$WARM" --total-num-update "$TOTAL" \
  --max-update "$TOTAL" --batch-size "$BATCH" --required-batch-size-multiple 1 \
  --save-dir "$SAVE" --no-epoch-checkpoints --log-format json --log-interval 10 \
  --num-workers 2 --seed 1 "${DEVICE[@]}" "${INIT[@]}" ${EXTRA[@]+"${EXTRA[@]}"}
# what the hub needs beside the checkpoint with the tokenizer (the test split and binaries stay in DATA)
cp "$DATA"/dict.*.txt "$SAVE"/
