#!/usr/bin/env bash
# Data recipe: raw text (one sentence per line, a blank line between documents)
#   -> sentencepiece BPE (trained here, or --spm-model) -> pieces, blank lines kept blank
#   -> fairseq-preprocess --only-source -> DESTDIR/NAME (dict.txt, {train,valid}.{bin,idx}, spm.model)
# or, for imported BERT/UniLMv2 weights, a BERT vocab.txt instead of sentencepiece:
#   --wordpiece-vocab vocab.txt -> transformers' BertTokenizer pieces, written as the symbols of
#   the dictionary convert_checkpoint.py makes from that vocab (so the ids are the tokenizer's,
#   in the converted row order) -> DESTDIR/NAME (dict.txt, vocab.txt, {train,valid}.{bin,idx}).
# Blank lines become items of size 1 (just </s>): the task reads them as document boundaries.
# [MASK] and [P] are not written into dict.txt: the task adds them.
#
#   bash scripts/prepare_data.sh --train TRAIN.txt --valid VALID.txt --name NAME \
#       [--vocab-size 8000 | --spm-model M.model [--srcdict dict.txt]
#        | --wordpiece-vocab vocab.txt [--srcdict dict.txt] [--wordpiece-case auto|cased|uncased]]
#       [--destdir data-bin] [--workers 2]
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
activate_venv
declare -A FLAGS=([--train]=TRAIN [--valid]=VALID [--name]=NAME [--spm-model]=SPM [--srcdict]=SRCDICT
                  [--wordpiece-vocab]=WP [--wordpiece-case]=WPCASE [--vocab-size]=VOCAB [--destdir]=DEST
                  [--workers]=WORKERS)
TRAIN='' VALID='' NAME='' SPM='' SRCDICT='' WP='' WPCASE=auto VOCAB=8000 DEST="$ROOT/data-bin" WORKERS=2
parse_flags "$@"
require_flags --train --valid --name
[[ "$NAME" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "--name must be a plain directory name: $NAME"
[ -z "$SRCDICT" ] || [ -n "$SPM" ] || [ -n "$WP" ] || die "--srcdict needs the --spm-model it was made with"
[ -z "$WP" ] || [ -z "$SPM" ] || die "--wordpiece-vocab and --spm-model exclude each other"
[[ "$WPCASE" =~ ^(auto|cased|uncased)$ ]] || die "--wordpiece-case must be auto, cased or uncased"
require_files "$TRAIN" "$VALID" ${SPM:+"$SPM"} ${SRCDICT:+"$SRCDICT"} ${WP:+"$WP"}
grep -q '[^[:space:]]' "$TRAIN" || die "training file has no text (only blank lines or empty): $TRAIN"
command -v fairseq-preprocess >/dev/null || die "fairseq-preprocess not found: run scripts/setup_env.sh first"

# everything is built in a temp dir; only a finished DESTDIR/NAME is moved into place
mkdir -p "$DEST"
TMP=$(mktemp -d "$DEST/.prepare_data.XXXXXX")  # same filesystem as DEST, so the final mv is a rename
trap 'rm -rf "$TMP"' EXIT
mkdir "$TMP/bin"
if [ -n "$WP" ]; then
  echo "prepare_data: WordPiece-encoding $TRAIN and $VALID with $WP"
  cp "$WP" "$TMP/bin/vocab.txt"  # for fairseq-generate --bpe bert --bpe-vocab-file
  python "$ROOT/scripts/wordpiece_encode.py" --vocab "$WP" --case "$WPCASE" --dict-out "$TMP/wp.dict.txt" \
    --inputs "$TRAIN" "$VALID" --outputs "$TMP/train.bpe" "$TMP/valid.bpe"
  # the dictionary is the vocab's (the converter's), or a cut of it (convert_checkpoint.py
  # --keep-pieces-of: pieces outside it become <unk>); a given --srcdict must be one of those
  if [ -n "$SRCDICT" ]; then
    [ "$(grep -cvxFf "$TMP/wp.dict.txt" "$SRCDICT")" = 0 ] ||
      die "--srcdict $SRCDICT is not the dictionary of $WP (use the dict.txt convert_checkpoint.py wrote beside it)"
  else
    SRCDICT="$TMP/wp.dict.txt"
  fi
else
  if [ -n "$SPM" ]; then
    cp "$SPM" "$TMP/bin/spm.model"
  else
    echo "prepare_data: training sentencepiece (bpe, vocab $VOCAB) on $TRAIN"
    TRAIN_SPM=(--train-from "$TRAIN" --vocab-size "$VOCAB")
  fi
  echo "prepare_data: encoding $TRAIN and $VALID"
  python "$ROOT/scripts/spm_encode.py" --model "$TMP/bin/spm.model" ${TRAIN_SPM[@]+"${TRAIN_SPM[@]}"} \
    --inputs "$TRAIN" "$VALID" --outputs "$TMP/train.bpe" "$TMP/valid.bpe"
fi

echo "prepare_data: fairseq-preprocess --only-source"
# the dictionary is built from the training pieces (--thresholdsrc 0: keep every piece), or given
if [ -n "$SRCDICT" ]; then DICT=(--srcdict "$SRCDICT"); else DICT=(--thresholdsrc 0); fi
fairseq-preprocess --only-source --trainpref "$TMP/train.bpe" --validpref "$TMP/valid.bpe" \
  --destdir "$TMP/bin" --workers "$WORKERS" "${DICT[@]}" \
  > "$TMP/preprocess.log" 2>&1 || { tail -5 "$TMP/preprocess.log" >&2; die "fairseq-preprocess failed"; }
grep -E "\[None\] .*tokens" "$TMP/preprocess.log" | sed "s#.*\] $TMP/#prepare_data:   #" || true
# a text piece spelled like the task's symbols would silently become them
if grep -qE '^\[(MASK|P)\] ' "$TMP/bin/dict.txt"; then die "dict.txt already holds [MASK] or [P]"; fi

rm -rf "${DEST:?}/$NAME"
mv "$TMP/bin" "$DEST/$NAME"
echo "prepare_data: wrote $DEST/$NAME ($(wc -l < "$DEST/$NAME/dict.txt") dictionary entries)"
