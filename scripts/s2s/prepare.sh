#!/usr/bin/env bash
# Sequence-to-sequence data: RAW/{train,valid,test}.{source,target} (one example a line, raw
# text) -> the pre-training tokenizer -> fairseq-preprocess with the pre-training dictionary on
# both sides -> DESTDIR/NAME (+ the tokenizer files, for detokenising and the hub).
#
#   bash scripts/s2s/prepare.sh --raw RAW_DIR --name xsum --pretrain-data DIR [--destdir data-bin]
#       [--workers 2]
# DIR holds dict.txt and one tokenizer: a pre-training data directory of scripts/prepare_data.sh
# (spm.model, or vocab.txt with --wordpiece-vocab) or a directory of convert_checkpoint.py import
# (vocab.txt + tokenizer_config.json: released BERT/UniLMv2 weights).
set -euo pipefail
# shellcheck source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
activate_venv
declare -A FLAGS=([--raw]=RAW [--name]=NAME [--pretrain-data]=PRE [--destdir]=DEST [--workers]=WORKERS)
RAW='' NAME='' PRE='' DEST="$ROOT/data-bin" WORKERS=2
parse_flags "$@"
require_flags --raw --name --pretrain-data
[ -d "$RAW" ] || die "raw directory not found: $RAW"
[ -f "$PRE/dict.txt" ] ||
  die "file not found: $PRE/dict.txt (run scripts/prepare_data.sh or convert_checkpoint.py import)"
TOKENIZER=$(recipe_info bpe-flags "$PRE")  # fairseq's --bpe flags, one a line
BPE=$(sed -n 2p <<< "$TOKENIZER")
SPLITS=()
for split in train valid test; do
  if [ -f "$RAW/$split.source" ] || [ -f "$RAW/$split.target" ]; then
    require_files "$RAW/$split.source" "$RAW/$split.target"
    ns=$(wc -l < "$RAW/$split.source"); nt=$(wc -l < "$RAW/$split.target")
    [ "$ns" = "$nt" ] || die "$RAW/$split.source has $ns lines but $RAW/$split.target has $nt"
    SPLITS+=("$split")
  fi
done
require_files "$RAW/train.source"

mkdir -p "$DEST"
TMP=$(mktemp -d "$DEST/.s2s_prepare.XXXXXX")  # only a finished DEST/NAME is moved into place
trap 'rm -rf "$TMP"' EXIT
INPUTS=() OUTPUTS=() PREFS=()
for split in "${SPLITS[@]}"; do
  for side in source target; do INPUTS+=("$RAW/$split.$side"); OUTPUTS+=("$TMP/$split.$side"); done
  PREFS+=("--${split}pref" "$TMP/$split")
done
if [ "$BPE" = sentencepiece ]; then
  echo "s2s/prepare: sentencepiece-encoding ${SPLITS[*]} with $PRE/spm.model"
  python "$ROOT/scripts/spm_encode.py" --model "$PRE/spm.model" --inputs "${INPUTS[@]}" --outputs "${OUTPUTS[@]}"
else
  echo "s2s/prepare: WordPiece-encoding ${SPLITS[*]} with $PRE/vocab.txt"
  CASE=uncased; grep -qx -- --bpe-cased <<< "$TOKENIZER" && CASE=cased
  python "$ROOT/scripts/wordpiece_encode.py" --vocab "$PRE/vocab.txt" --case "$CASE" --dict-out "$TMP/wp.dict.txt" \
    --inputs "${INPUTS[@]}" --outputs "${OUTPUTS[@]}"
  # the vocab's dictionary or a cut of it (convert_checkpoint.py --keep-pieces-of)
  [ "$(grep -cvxFf "$TMP/wp.dict.txt" "$PRE/dict.txt")" = 0 ] ||
    die "$PRE/dict.txt is not the dictionary of $PRE/vocab.txt"
fi
echo "s2s/prepare: fairseq-preprocess (the pre-training dictionary on both sides)"
mkdir "$TMP/bin"
fairseq-preprocess --source-lang source --target-lang target "${PREFS[@]}" \
  --srcdict "$PRE/dict.txt" --tgtdict "$PRE/dict.txt" --destdir "$TMP/bin" --workers "$WORKERS" \
  > "$TMP/preprocess.log" 2>&1 || { tail -5 "$TMP/preprocess.log" >&2; die "fairseq-preprocess failed"; }
grep -E "\] .*(sents|tokens)" "$TMP/preprocess.log" | sed "s#.*\] $TMP/#s2s/prepare:   #" || true
recipe_info copy-tokenizer "$PRE" "$TMP/bin" > /dev/null
rm -rf "${DEST:?}/$NAME"
mv "$TMP/bin" "$DEST/$NAME"
echo "s2s/prepare: wrote $DEST/$NAME"
