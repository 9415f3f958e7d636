#!/usr/bin/env bash
# Decode a split with fairseq-generate (beam, length penalty and its formula, trigram blocking of
# the preset), detokenise with the data directory's tokenizer (spm.model or WordPiece vocab.txt),
# then score the hypotheses against the raw references with scripts/score.py (ROUGE-1/2/L/Lsum;
# BLEU-4 as well for the qg preset).
#
#   bash scripts/s2s/generate.sh --preset PRESET --data DATA --checkpoint CHECKPOINT \
#       --refs RAW_REFS --out-dir OUT_DIR [-- MORE FAIRSEQ-GENERATE ARGS]
#   e.g. bash scripts/s2s/generate.sh --preset xsum --data data-bin/xsum \
#            --checkpoint checkpoints/xsum/checkpoint_best.pt --refs raw/xsum/test.target \
#            --out-dir outputs/xsum -- --batch-size 32
# Writes OUT_DIR/generate-test.txt (fairseq's log), OUT_DIR/hyp.txt (one detokenised
# hypothesis a line, in input order) and OUT_DIR/scores.txt. Every test pair is decoded, empty
# sides included (an empty source is decoded from [SOS] [EOS]), so hyp.txt lines up with RAW_REFS;
# a test split and RAW_REFS of different lengths stop the recipe before decoding. Each file is
# written in a temporary directory inside OUT_DIR and moved into place once its step succeeded
# (the new generate-test.txt first replaces all three of an earlier run), so OUT_DIR never mixes
# runs nor holds a half-written file; on a failure, Ctrl-C or SIGTERM the temporary files go.
set -euo pipefail
# shellcheck source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source=presets.sh
source "$ROOT/scripts/s2s/presets.sh"
activate_venv
declare -A FLAGS=([--preset]=PRESET [--data]=DATA [--checkpoint]=CKPT [--refs]=REFS [--out-dir]=OUT)
PRESET='' DATA='' CKPT='' REFS='' OUT=''
PASS_TO=fairseq-generate
parse_flags "$@"
require_flags --preset --data --checkpoint --refs --out-dir
preset "$PRESET"
require_files "$CKPT" "$REFS"
TEST=$DATA/test.source-target.source.idx
[ -f "$TEST" ] || die "no binarized test split in $DATA (run scripts/s2s/prepare.sh with RAW/test.{source,target})"
PAIRS=$(recipe_info count-items "$TEST")
# lines of RAW_REFS as score.py counts them (a last line without a newline counts)
LINES=$(awk 'END { print NR }' "$REFS")
[ "$PAIRS" = "$LINES" ] || die "$TEST holds $PAIRS test pairs but --refs $REFS has $LINES lines"
recipe_lines BPE bpe-flags "$DATA"
SCORE=()
if [ "$PRESET" = qg ]; then SCORE=(--bleu); fi
device_flags
mkdir -p "$OUT"
TMP=$(mktemp -d "$OUT/.generate.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
forward_signals
run_step fairseq-generate "$DATA" --user-dir "$ROOT/fairseq_pmlm" --task pmlm_seq2seq --path "$CKPT" \
  --gen-subset test --max-source-positions "$SRC" --max-target-positions "$TGT" \
  --beam "$BEAM" --lenpen "$LENPEN" --lenpen-formula "$LENFORM" --max-len-a 0 --max-len-b "$MAXLEN" \
  --min-len "$MINLEN" --no-repeat-ngram-size 3 --batch-size 32 "${BPE[@]}" \
  --scoring rouge --results-path "$TMP" "${DEVICE[@]}" ${EXTRA[@]+"${EXTRA[@]}"}
rm -f "$OUT/hyp.txt" "$OUT/scores.txt"  # an earlier run's: this run's replace them or none are left
mv "$TMP/generate-test.txt" "$OUT/generate-test.txt"
# D-<id> lines hold the detokenised best hypothesis: one per test pair, put back in input order
awk -F '\t' -v n="$PAIRS" '/^D-[0-9]+\t/ { id = substr($1, 3) + 0; bad = bad || id in hyp || id >= n
    hyp[id] = $3; count++ }
  END { if (bad || count != n) exit 1; for (i = 0; i < n; i++) print hyp[i] }' \
  "$OUT/generate-test.txt" > "$TMP/hyp.txt" ||
  die "$OUT/generate-test.txt has $(grep -c '^D-[0-9]' "$OUT/generate-test.txt") hypotheses, not one for each of" \
    "the $PAIRS test pairs of $DATA (were some skipped, e.g. by --skip-invalid-size-inputs-valid-test?)"
mv "$TMP/hyp.txt" "$OUT/hyp.txt"
tail -2 "$OUT/generate-test.txt"
run_step python "$ROOT/scripts/score.py" --hyp "$OUT/hyp.txt" --ref "$REFS" ${SCORE[@]+"${SCORE[@]}"} > "$TMP/scores.txt"
mv "$TMP/scores.txt" "$OUT/scores.txt"
cat "$OUT/scores.txt"
