#!/usr/bin/env bash
# Data recipe: raw text (one sentence per line, blank line between documents)
#   -> sentencepiece (trained here, or --spm-model) -> fairseq-preprocess --only-source
#   -> DESTDIR/NAME (dict.txt, train.{bin,idx}, valid.{bin,idx}, spm.model).
# [MASK] and [P] are not written into dict.txt: the task adds them.
#
#   bash scripts/prepare_data.sh --train train.txt --valid valid.txt --name NAME \
#        [--vocab-size 8000 | --spm-model M.model [--srcdict dict.txt]] [--destdir data-bin] [--workers 2]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f .venv/bin/activate ] && source .venv/bin/activate

die() { echo "prepare_data.sh: error: $*" >&2; exit 2; }
TRAIN= VALID= NAME= SPM= SRCDICT= VOCAB=8000 DEST=data-bin WORKERS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --train) TRAIN=$2; shift 2 ;;
    --valid) VALID=$2; shift 2 ;;
    --name) NAME=$2; shift 2 ;;
    --spm-model) SPM=$2; shift 2 ;;
    --srcdict) SRCDICT=$2; shift 2 ;;
    --vocab-size) VOCAB=$2; shift 2 ;;
    --destdir) DEST=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    *) die "unknown flag: $1" ;;
  esac
done
[ -n "$TRAIN" ] && [ -n "$VALID" ] && [ -n "$NAME" ] || die "--train, --valid and --name are required"
for f in "$TRAIN" "$VALID" ${SPM:+"$SPM"} ${SRCDICT:+"$SRCDICT"}; do
  [ -f "$f" ] || die "file not found: $f"
done
grep -q '[^[:space:]]' "$TRAIN" || die "training file has no text: $TRAIN"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/prepare_data.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
if [ -n "$SPM" ]; then
  cp "$SPM" "$TMP/spm.model"
  python scripts/spm_encode.py --model "$TMP/spm.model" \
    --inputs "$TRAIN" "$VALID" --outputs "$TMP/train.bpe" "$TMP/valid.bpe"
else
  echo "prepare_data: training sentencepiece (bpe, vocab $VOCAB) on $TRAIN"
  python scripts/spm_encode.py --model "$TMP/spm.model" --train-from "$TRAIN" --vocab-size "$VOCAB" \
    --inputs "$TRAIN" "$VALID" --outputs "$TMP/train.bpe" "$TMP/valid.bpe"
fi
echo "prepare_data: fairseq-preprocess -> $DEST/$NAME"
fairseq-preprocess --only-source --trainpref "$TMP/train.bpe" --validpref "$TMP/valid.bpe" \
  --destdir "$TMP/bin" --workers "$WORKERS" ${SRCDICT:+--srcdict "$SRCDICT"} \
  > "$TMP/preprocess.log" 2>&1 || { tail -5 "$TMP/preprocess.log" >&2; die "fairseq-preprocess failed"; }
grep -E "tokens" "$TMP/preprocess.log" | sed 's/.*\] /prepare_data: /' || true
cp "$TMP/spm.model" "$TMP/bin/spm.model"
mkdir -p "$DEST"
rm -rf "${DEST:?}/$NAME"
mv "$TMP/bin" "$DEST/$NAME"  # only a finished directory appears
echo "prepare_data: wrote $DEST/$NAME"
