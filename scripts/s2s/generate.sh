#!/usr/bin/env bash
# Decode a split with fairseq-generate (beam search, length penalty and its formula, trigram
# blocking and the end at the length limit of the preset), detokenise with the data directory's
# tokenizer (spm.model or WordPiece vocab.txt), then score the hypotheses against the raw references
# with scripts/score.py (ROUGE-1/2/L/Lsum; BLEU-4 as well for the qg preset). Decoding runs in fp32, also
# on a GPU and for a checkpoint trained with --bf16-autocast, unless asked for after -- (--fp16,
# --bf16-autocast), as the hub's.
#
#   bash scripts/s2s/generate.sh --preset PRESET --data DATA --checkpoint CHECKPOINT \
#       --refs RAW_REFS --out-dir OUT_DIR [-- MORE FAIRSEQ-GENERATE ARGS]
#   e.g. bash scripts/s2s/generate.sh --preset xsum --data data-bin/xsum \
#            --checkpoint checkpoints/xsum/checkpoint_best.pt --refs raw/xsum/test.target \
#            --out-dir outputs/xsum -- --batch-size 32
# DATA's pairs with other suffixes than prepare.sh's (source, target): -- --source-lang src --target-lang tgt.
# Writes OUT_DIR/generate-test.txt (fairseq's log), OUT_DIR/hyp.txt (one detokenised
# hypothesis a line, in input order: the best, also with -- --nbest N) and OUT_DIR/scores.txt
# (so -- --results-path, --quiet and a --gen-subset other than test are refused). Every test
# pair is decoded, empty sides included (an empty source is decoded from [SOS] [EOS]), so hyp.txt
# lines up with RAW_REFS; a test split and RAW_REFS of different lengths stop the recipe before
# decoding. Each file is written in a temporary directory inside OUT_DIR and moved into place
# once its step succeeded (the new generate-test.txt first replaces all three of an earlier
# run), so OUT_DIR never mixes runs nor holds a half-written file; on a failure, Ctrl-C or SIGTERM
# the temporary files go (and an OUT_DIR the run made, left empty). A full disk is one line
# naming the file.
# Presets cnndm and xsum score as the papers did (score.py --preset: ROUGE-1.5.5's tokens and
# stemmer, ROUGE-Lsum the summary-level ROUGE-L over the sentences) and add the row of s2s-ft's
# post-processing (--style both); hyp.txt keeps [X_SEP] between sentences, as s2s-ft writes its
# predictions (a WordPiece vocabulary carries the separator in an [unusedN] row: written back as [X_SEP]).
set -euo pipefail
# shellcheck source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
# shellcheck source=presets.sh
source "$ROOT/scripts/s2s/presets.sh"
activate_venv "$@"
declare -A FLAGS=([--preset]=PRESET [--data]=DATA [--checkpoint]=CKPT [--refs]=REFS [--out-dir]=OUT)
PRESET='' DATA='' CKPT='' REFS='' OUT=''
PASS_TO=fairseq-generate
parse_flags "$@"
require_flags --preset --data --checkpoint --refs --out-dir
# the recipe names fairseq-generate's split and log file and reads the hypotheses from the log
for arg in ${EXTRA[@]+"${EXTRA[@]}"}; do
  case ${arg%%=*} in
    --results-path | --quiet) die "${arg%%=*} after --: generate.sh writes fairseq-generate's log to" \
      "--out-dir itself and reads the hypotheses from it (drop ${arg%%=*})" ;;
  esac
done
[ "$(extra_value --gen-subset test)" = test ] || die "--gen-subset $(extra_value --gen-subset test) after --:" \
  "generate.sh decodes the test split, whose pairs line up with --refs (fairseq-generate decodes any split)"
forward_signals  # from here on: the facts runs and the steps stop cleanly on Ctrl-C and SIGTERM
preset "$PRESET"
require_files "$CKPT" "$REFS"
TEST=$(pair_index test)
[ -f "$TEST" ] || die "no binarized test split in $DATA: no $(basename "$TEST") (run scripts/s2s/prepare.sh with" \
  "RAW/test.{source,target}; data of fairseq-preprocess with other language suffixes: name them after --," \
  "--source-lang SRC --target-lang TGT)"
# SEP: the symbol the model emits between sentences
recipe_facts PAIRS count-items "$TEST" + BPE bpe-flags "$DATA" + \
  SEP separator "$DATA" --source-lang "$(extra_value --source-lang source)"
# lines of RAW_REFS as score.py counts them (a last line without a newline counts)
LINES=$(awk 'END { print NR }' "$REFS")
[ "$PAIRS" = "$LINES" ] || die "$TEST holds $PAIRS test pairs but --refs $REFS has $LINES lines"
SCORE=() ROUGE=()
case $PRESET in
  qg) SCORE=(--bleu) ;;
  cnndm | xsum) SCORE=(--preset "$PRESET" --style both) ROUGE=(--rouge-tokenizer rouge155) ;;
esac
if [ -n "$SEP" ]; then ROUGE+=(--rouge-separator "$SEP"); fi
device_flags
# fp32 unless asked (-- --fp16, -- --bf16-autocast), as the hub decodes: not device_flags' GPU --fp16
if [ "$PMLM_GPUS" -gt 0 ]; then DEVICE=(); fi
MADE=''
if [ ! -d "$OUT" ]; then MADE=1; fi
mkdir -p "$OUT"
TMP=$(mktemp -d "$OUT/.generate.XXXXXX")
# a failed run leaves no empty OUT_DIR it made
trap 'rm -rf "$TMP"; if [ -n "$MADE" ]; then rmdir "$OUT" 2>/dev/null || true; fi' EXIT
run_step fairseq-generate "$DATA" --user-dir "$ROOT/fairseq_pmlm" --task pmlm_seq2seq --path "$CKPT" \
  --gen-subset test --max-source-positions "$SRC" --max-target-positions "$TGT" \
  --beam "$BEAM" --lenpen "$LENPEN" --lenpen-formula "$LENFORM" --max-len-a 0 --max-len-b "$MAXLEN" \
  --min-len "$MINLEN" --no-repeat-ngram-size 3 --no-repeat-ngram-ignore "$NGIGNORE" --eos-at-limit "$EOSLIMIT" \
  --beam-search "$SEARCH" --batch-size 32 "${BPE[@]}" \
  --scoring rouge ${ROUGE[@]+"${ROUGE[@]}"} --results-path "$TMP" "${DEVICE[@]}" ${EXTRA[@]+"${EXTRA[@]}"}
rm -f "$OUT/hyp.txt" "$OUT/scores.txt"  # an earlier run's: this run's replace them or none are left
mv "$TMP/generate-test.txt" "$OUT/generate-test.txt"
# D-<id> lines hold the detokenised hypotheses, best first (--nbest N: N of them): the first of
# each test pair, put back in input order, the separator's symbol (an [unusedN] row of a
# WordPiece vocabulary) written as [X_SEP]
awk -F '\t' -v n="$PAIRS" -v sep="$SEP" 'function unalias(s,  out, i) {
    if (sep == "" || sep == "[X_SEP]") return s
    for (out = ""; (i = index(s, sep)) > 0; s = substr(s, i + length(sep))) out = out substr(s, 1, i - 1) "[X_SEP]"
    return out s }
  /^D-[0-9]+\t/ { id = substr($1, 3) + 0; if (id in hyp) next; bad = bad || id >= n
    hyp[id] = unalias($3); count++ }
  END { if (bad || count != n) exit 1; for (i = 0; i < n; i++) print hyp[i] }' \
  "$OUT/generate-test.txt" > "$TMP/hyp.txt" ||
  die "$OUT/generate-test.txt has hypotheses for $(grep -o '^D-[0-9]*' "$OUT/generate-test.txt" | sort -u | wc -l)" \
    "test pairs, not for each of" \
    "the $PAIRS test pairs of $DATA (were some skipped, e.g. by --skip-invalid-size-inputs-valid-test?)"
mv "$TMP/hyp.txt" "$OUT/hyp.txt"
# fairseq's summary line ("Generate test with beam=..."; its log lines go to stderr, not to this file):
# it scores the binarized references, where a piece the dictionary lacks is <unk>, so it can differ
# from score.py's table of --refs as written
echo "fairseq-generate's own score (of the binarized references: <unk> where the dictionary lacks a piece):"
awk '/^Generate [^ ]+ with beam=/' "$OUT/generate-test.txt"
echo "score.py on --refs as written:"
run_step python "$ROOT/scripts/score.py" --hyp "$OUT/hyp.txt" --ref "$REFS" ${SCORE[@]+"${SCORE[@]}"} > "$TMP/scores.txt"
mv "$TMP/scores.txt" "$OUT/scores.txt"
cat "$OUT/scores.txt"
