#!/usr/bin/env bash
# Sequence-to-sequence data: RAW/{train,valid,test}.{source,target} (one example a line, raw
# text; all three splits, the same number of lines on both sides) -> the pre-training tokenizer
# -> the pre-training dictionary on both sides -> DESTDIR/NAME in fairseq-preprocess's pair
# layout (+ the tokenizer files, for detokenising and the hub). Streamed and in parallel
# (fairseq_pmlm/data/databin/). An empty line stays an (empty) example, so test
# outputs line up with the references. Lines end at \n only, as wc -l counts them (a \r before
# it is dropped, any other \r is a space); text must be UTF-8 (else FILE:LINE: error). A sentence
# separator [X_SEP] in a line (CNN/DailyMail targets of s2s/get_data.py) becomes one token, the
# dictionary's [X_SEP] row or a WordPiece vocabulary's first [unusedN] row.
#
#   bash scripts/s2s/prepare.sh --raw RAW_DIR --name xsum --pretrain-data DIR [--destdir data-bin]
#       [--workers 2] [--force]
# DIR holds dict.txt and one tokenizer: a pre-training data directory of scripts/prepare_data.sh
# (spm.model, or vocab.txt with --wordpiece-vocab) or a directory of convert_checkpoint.py import
# (vocab.txt + tokenizer_config.json: released BERT/UniLMv2 weights).
# An existing DESTDIR/NAME is replaced only with --force, and never when it holds an input.
set -euo pipefail
# shellcheck source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
activate_venv "$@"
declare -A FLAGS=([--raw]=RAW [--name]=NAME [--pretrain-data]=PRE [--destdir]=DEST [--workers]=WORKERS
                  [--force]=FORCE:switch)
RAW='' NAME='' PRE='' DEST="$ROOT/data-bin" WORKERS=2 FORCE=''
parse_flags "$@"
require_flags --raw --name --pretrain-data
[[ "$NAME" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "--name must be a plain directory name: $NAME"
[[ "$WORKERS" =~ ^[1-9][0-9]*$ ]] || die "--workers must be a positive integer: $WORKERS"
exec python "$ROOT/scripts/text_to_databin.py" --prog "$PROG" --out "$DEST/$NAME" --workers "$WORKERS" \
  ${FORCE:+--force} pairs --raw "$RAW" --pretrain-data "$PRE"
