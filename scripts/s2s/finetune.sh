# Fine-tune a unilmv2 checkpoint for sequence-to-sequence with s2s-ft's pseudo-masking
# (task pmlm_seq2seq, criterion pmlm_seq2seq), with a preset of scripts/s2s/presets.sh.
# Linear warmup + linear decay over EPOCHS epochs, as in the paper's appendix.
#
#   bash scripts/s2s/finetune.sh PRESET DATA PRETRAINED.pt|none SAVE_DIR [fairseq-train flags...]
#   e.g. bash scripts/s2s/finetune.sh xsum data-bin/xsum checkpoints/unilmv2_base/checkpoint_last.pt \
#            checkpoints/xsum --batch-size 16 --update-freq 4
# The architecture and its flags are read from PRETRAINED (a fairseq-train checkpoint or the
# model.pt of convert_checkpoint.py import); PRETRAINED=none trains from random initialisation
# (a baseline) and then needs --arch (and size flags). The data directory's tokenizer is
# recorded in the checkpoint (--bpe ...), so the hub and fairseq-interactive detokenise without
# being told; SAVE_DIR also gets a copy of the data's dictionary and tokenizer, so
# `UniLMv2Model.from_pretrained(SAVE_DIR)` needs nothing else. Extra flags come last, so they override the preset (--max-update, --arch, ...).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck disable=SC1091
[ -f "$ROOT/.venv/bin/activate" ] && source "$ROOT/.venv/bin/activate"
source "$ROOT/scripts/s2s/presets.sh"
die() { echo "s2s/finetune.sh: error: $*" >&2; exit 2; }
[ $# -ge 4 ] || die "usage: finetune.sh PRESET DATA PRETRAINED.pt|none SAVE_DIR [fairseq-train flags]"
PRESET=$1 DATA=$2 PRE=$3 SAVE=$4; shift 4
preset "$PRESET" || exit 2
[ -f "$DATA/train.source-target.source.idx" ] || die "no binarized train split in $DATA (run scripts/s2s/prepare.sh)"
INIT=()
if [ "$PRE" != none ]; then
  [ -f "$PRE" ] || die "pre-trained checkpoint not found: $PRE"
  FLAGS=$(python "$ROOT/scripts/recipe_info.py" model-flags "$PRE") || exit 2
  mapfile -t INIT <<< "$FLAGS"
  INIT+=(--finetune-from-model "$PRE")
else
  [[ " $* " == *" --arch "* || " $* " == *" --arch="* ]] || die "PRETRAINED=none (random init) needs --arch"
fi
BPE=$(python "$ROOT/scripts/recipe_info.py" bpe-flags "$DATA") || exit 2
mapfile -t BPE <<< "$BPE"
# updates for EPOCHS epochs at BATCH pairs an update (the linear schedule needs the total)
PAIRS=$(python -c "from fairseq.data import MMapIndexedDataset as D; print(len(D('$DATA/train.source-target.source')))")
TOTAL=$(( EPOCHS * ( (PAIRS + BATCH - 1) / BATCH ) ))
WARM=$(python -c "print(max(1, round($WARMUP * $TOTAL)))")
DEVICE=(--cpu); python -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" && DEVICE=(--fp16)
echo "s2s/finetune: $PRESET on $DATA: $PAIRS pairs, $TOTAL updates of $BATCH, warmup $WARM, lr $LR, init ${PRE}"
fairseq-train "$DATA" --user-dir "$ROOT/fairseq_pmlm" \
  --task pmlm_seq2seq --criterion pmlm_seq2seq --label-smoothing 0.1 \
  --max-positions "$POSITIONS" "${BPE[@]}" \
  --max-source-positions "$SRC" --max-target-positions "$TGT" --target-mask-prob "$TMASK" \
  --optimizer adam --adam-betas '(0.9, 0.999)' --adam-eps 1e-8 --weight-decay 0.01 --clip-norm 1.0 \
  --lr "$LR" --lr-scheduler polynomial_decay --warmup-updates "$WARM" --total-num-update "$TOTAL" \
  --max-update "$TOTAL" --batch-size "$BATCH" --required-batch-size-multiple 1 \
  --save-dir "$SAVE" --no-epoch-checkpoints --log-format json --log-interval 10 \
  --num-workers 2 --seed 1 "${DEVICE[@]}" "${INIT[@]}" "$@"
# what the hub needs beside the checkpoint (the test split and binaries stay in DATA)
cp "$DATA"/dict.*.txt "$SAVE"/
python "$ROOT/scripts/recipe_info.py" copy-tokenizer "$DATA" "$SAVE" > /dev/null
