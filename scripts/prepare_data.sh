#!/usr/bin/env bash
# Data recipe: raw text (one sentence per line, a blank line between documents) -> a fairseq
# data-bin for pre-training, streamed and in parallel (fairseq_pmlm/data/databin/):
#   sentencepiece BPE (trained here on a sample of the training text, or --spm-model) or, for
#   imported BERT/UniLMv2 weights, --wordpiece-vocab vocab.txt (transformers' BertTokenizer pieces,
#   as the rows of the dictionary convert_checkpoint.py makes from that vocab)
#   -> DESTDIR/NAME: dict.txt, {train,valid}.{bin,idx}, and the tokenizer (spm.model, or vocab.txt)
#   or, with --shards K: DESTDIR/NAME/shard0..K-1 (the training text cut at document boundaries
#   into K parts of about equal size; one dictionary, copied into each; valid only in shard0),
#   read round-robin by fairseq-train, one shard per epoch (it prints the colon-separated path).
# Blank lines become items of size 1 (just </s>): the task reads them as document boundaries; the
# end of each --train file ends a document too (one such item where the file has no blank line last).
# [MASK] and [P] are not written into dict.txt: the task adds them. Lines end at \n only (a \r
# before it is dropped, any other \r is a space); text must be UTF-8 (else FILE:LINE: error).
#
#   bash scripts/prepare_data.sh --train TRAIN.txt[,MORE.txt...] --valid VALID.txt --name NAME \
#       [--vocab-size 8000 | --spm-model M.model [--srcdict dict.txt]
#        | --wordpiece-vocab vocab.txt [--srcdict dict.txt] [--wordpiece-case auto|cased|uncased]]
#       [--shards K] [--workers 2] [--destdir data-bin] [--force]
# --workers N tokenises in N processes (memory: 40-90 MB a worker, whatever the input size).
# An existing DESTDIR/NAME is replaced only with --force, and never when it holds an input.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
activate_venv "$@"
declare -A FLAGS=([--train]=TRAIN [--valid]=VALID [--name]=NAME [--spm-model]=SPM [--srcdict]=SRCDICT
                  [--wordpiece-vocab]=WP [--wordpiece-case]=WPCASE [--vocab-size]=VOCAB [--destdir]=DEST
                  [--workers]=WORKERS [--shards]=SHARDS [--force]=FORCE:switch)
TRAIN='' VALID='' NAME='' SPM='' SRCDICT='' WP='' WPCASE=auto VOCAB=8000 DEST="$ROOT/data-bin" WORKERS=2
SHARDS=1 FORCE=''
parse_flags "$@"
require_flags --train --valid --name
[[ "$NAME" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "--name must be a plain directory name: $NAME"
[ -z "$SRCDICT" ] || [ -n "$SPM" ] || [ -n "$WP" ] || die "--srcdict needs the --spm-model it was made with"
[ -z "$WP" ] || [ -z "$SPM" ] || die "--wordpiece-vocab and --spm-model exclude each other"
[[ "$WPCASE" =~ ^(auto|cased|uncased)$ ]] || die "--wordpiece-case must be auto, cased or uncased"
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || die "--workers must be a positive integer: $WORKERS"
[[ "$SHARDS" =~ ^[1-9][0-9]*$ ]] || die "--shards must be a positive integer: $SHARDS"
[[ "$VOCAB" =~ ^[1-9][0-9]*$ ]] || die "--vocab-size must be a positive integer: $VOCAB"
IFS=, read -r -a TRAIN_FILES <<< "$TRAIN"
for f in "${TRAIN_FILES[@]}"; do [ -n "$f" ] || die "--train lists an empty file name (two commas, or one first): $TRAIN"; done
require_files "${TRAIN_FILES[@]}" "$VALID" ${SPM:+"$SPM"} ${SRCDICT:+"$SRCDICT"} ${WP:+"$WP"}

TOKENIZER=(--vocab-size "$VOCAB")
[ -z "$SPM" ] || TOKENIZER=(--spm-model "$SPM")
[ -z "$WP" ] || TOKENIZER=(--wordpiece-vocab "$WP" --wordpiece-case "$WPCASE")
exec python "$ROOT/scripts/text_to_databin.py" --prog "$PROG" --out "$DEST/$NAME" --workers "$WORKERS" \
  ${FORCE:+--force} corpus --train "${TRAIN_FILES[@]}" --valid "$VALID" "${TOKENIZER[@]}" \
  ${SRCDICT:+--srcdict "$SRCDICT"} --shards "$SHARDS"
