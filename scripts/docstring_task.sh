#!/usr/bin/env bash
# The docstring summarisation task of the main job and of docs/RESULTS.md, from nothing but the
# set-up: the corpus (scripts/make_docstring_corpus.py), the released weights cut to LAYERS and to
# the dictionary rows the training text uses, and both data-bins tokenised with their WordPiece.
#
#   bash scripts/docstring_task.sh --out DIR [--start all-minilm-l6-v2] [--layers 0,2,4]
# writes DIR/corpus (raw text; DIR/corpus/pairs/test.target are the references),
#        DIR/released/model.pt (the start of the continued pre-training runs),
#        DIR/data-bin/pretrain (for fairseq-train --task pseudo_masked_lm) and
#        DIR/data-bin/sum (summarisation pairs, for scripts/s2s/*.sh).
# The layers 0,2,4 and the kept rows (12k of 30.5k) halve an update's cost (the output layer over
# 30k rows dominated); held-out text meets few <unk> pieces. A DIR that holds any of the three is refused.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
declare -A FLAGS=([--out]=OUT [--start]=START [--layers]=LAYERS)
OUT='' START=all-minilm-l6-v2 LAYERS=0,2,4
parse_flags "$@"
require_flags --out
activate_venv "$@"
for d in corpus released data-bin; do
  [ ! -e "$OUT/$d" ] || die "--out $OUT already holds $d/: pick another directory"
done
PAIRS=$OUT/corpus/pairs
DATA=$OUT/data-bin
mkdir -p "$OUT"
echo "docstring_task: corpus: docstrings of the standard library and the pinned packages"
python "$ROOT/scripts/make_docstring_corpus.py" --out "$OUT/corpus"
echo "docstring_task: released weights: $START, layers $LAYERS, the pieces of the training text"
python "$ROOT/scripts/convert_checkpoint.py" import "$START" "$OUT/released" --layers "$LAYERS" \
  --keep-pieces-of "$OUT/corpus/pretrain.train.txt" "$PAIRS/train.source" "$PAIRS/train.target"
echo "docstring_task: the released WordPiece tokenizer -> data-bin: pre-training text | summarisation pairs"
# one worker each, side by side: the two take about as long
bash "$ROOT/scripts/prepare_data.sh" --train "$OUT/corpus/pretrain.train.txt" \
  --valid "$OUT/corpus/pretrain.valid.txt" --name pretrain --destdir "$DATA" --workers 1 \
  --wordpiece-vocab "$OUT/released/vocab.txt" --srcdict "$OUT/released/dict.txt" &
pretrain=$!
rc=0
bash "$ROOT/scripts/s2s/prepare.sh" --raw "$PAIRS" --name sum --pretrain-data "$OUT/released" --destdir "$DATA" \
  --workers 1 || rc=$?
wait "$pretrain" || rc=$?
[ "$rc" -eq 0 ] || die "tokenising failed (see above)"
echo "docstring_task: done: $DATA/pretrain, $DATA/sum, $OUT/released/model.pt, references $PAIRS/test.target"
