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
# hypothesis a line, in input order) and OUT_DIR/scores.txt.
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
recipe_lines BPE bpe-flags "$DATA"
SCORE=()
if [ "$PRESET" = qg ]; then SCORE=(--bleu); fi
device_flags
mkdir -p "$OUT"
fairseq-generate "$DATA" --user-dir "$ROOT/fairseq_pmlm" --task pmlm_seq2seq --path "$CKPT" \
  --gen-subset test --max-source-positions "$SRC" --max-target-positions "$TGT" \
  --beam "$BEAM" --lenpen "$LENPEN" --lenpen-formula "$LENFORM" --max-len-a 0 --max-len-b "$MAXLEN" \
  --min-len "$MINLEN" --no-repeat-ngram-size 3 --batch-size 32 "${BPE[@]}" \
  --scoring rouge --results-path "$OUT" "${DEVICE[@]}" ${EXTRA[@]+"${EXTRA[@]}"}
# D-<id> lines hold the detokenised best hypothesis; restore input order
grep -P '^D-\d+\t' "$OUT/generate-test.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 > "$OUT/hyp.txt"
tail -2 "$OUT/generate-test.txt"
python "$ROOT/scripts/score.py" --hyp "$OUT/hyp.txt" --ref "$REFS" ${SCORE[@]+"${SCORE[@]}"} | tee "$OUT/scores.txt"
