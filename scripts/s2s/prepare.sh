# Sequence-to-sequence data: RAW_DIR/{train,valid,test}.{source,target} (one example a line,
# raw text) -> the pre-training tokenizer -> fairseq-preprocess with the pre-training dictionary
# on both sides -> DESTDIR/NAME (+ the tokenizer files, for detokenising and the hub).
#
#   bash scripts/s2s/prepare.sh RAW_DIR --name xsum --pretrain-data DIR [--destdir data-bin]
# DIR holds dict.txt and one tokenizer: a pre-training data directory of scripts/prepare_data.sh
# (spm.model, or vocab.txt with --wordpiece-vocab) or a directory of convert_checkpoint.py import
# (vocab.txt + tokenizer_config.json: released BERT/UniLMv2 weights).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck disable=SC1091
[ -f "$ROOT/.venv/bin/activate" ] && source "$ROOT/.venv/bin/activate"
die() { echo "s2s/prepare.sh: error: $*" >&2; exit 2; }

RAW=${1-}; [ -n "$RAW" ] && [ "${RAW#--}" = "$RAW" ] || die "usage: prepare.sh RAW_DIR --name NAME --pretrain-data DIR"
shift
NAME= PRE= DEST="$ROOT/data-bin"
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value"
  case "$1" in
    --name) NAME=$2 ;; --pretrain-data) PRE=$2 ;; --destdir) DEST=$2 ;;
    *) die "unknown flag: $1" ;;
  esac
  shift 2
done
[ -n "$NAME" ] && [ -n "$PRE" ] || die "--name and --pretrain-data are required"
[ -d "$RAW" ] || die "raw directory not found: $RAW"
[ -f "$PRE/dict.txt" ] || die "file not found: $PRE/dict.txt (run scripts/prepare_data.sh or convert_checkpoint.py import)"
TOKENIZER=$(python "$ROOT/scripts/recipe_info.py" bpe-flags "$PRE") || exit 2  # fairseq's --bpe flags, one a line
BPE=$(sed -n 2p <<< "$TOKENIZER")
SPLITS=()
for split in train valid test; do
  if [ -f "$RAW/$split.source" ] || [ -f "$RAW/$split.target" ]; then
    for side in source target; do [ -f "$RAW/$split.$side" ] || die "file not found: $RAW/$split.$side"; done
    ns=$(wc -l < "$RAW/$split.source"); nt=$(wc -l < "$RAW/$split.target")
    [ "$ns" = "$nt" ] || die "$RAW/$split.source has $ns lines but $RAW/$split.target has $nt"
    SPLITS+=("$split")
  fi
done
[ -f "$RAW/train.source" ] || die "file not found: $RAW/train.source"

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
  [ "$(grep -cvxFf "$TMP/wp.dict.txt" "$PRE/dict.txt")" = 0 ] || die "$PRE/dict.txt is not the dictionary of $PRE/vocab.txt"
fi
echo "s2s/prepare: fairseq-preprocess (the pre-training dictionary on both sides)"
mkdir "$TMP/bin"
fairseq-preprocess --source-lang source --target-lang target "${PREFS[@]}" \
  --srcdict "$PRE/dict.txt" --tgtdict "$PRE/dict.txt" --destdir "$TMP/bin" --workers 2 \
  > "$TMP/preprocess.log" 2>&1 || { tail -5 "$TMP/preprocess.log" >&2; die "fairseq-preprocess failed"; }
grep -E "\] .*(sents|tokens)" "$TMP/preprocess.log" | sed "s#.*\] $TMP/#s2s/prepare:   #" || true
python "$ROOT/scripts/recipe_info.py" copy-tokenizer "$PRE" "$TMP/bin" > /dev/null
rm -rf "${DEST:?}/$NAME"
mv "$TMP/bin" "$DEST/$NAME"
echo "s2s/prepare: wrote $DEST/$NAME"
