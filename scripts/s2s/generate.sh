#!/usr/bin/env bash
# Decode a split with fairseq-generate (beam, length penalty and its formula, trigram blocking of
# the preset), detokenise with the data directory's tokenizer (spm.model or WordPiece vocab.txt),
# then score the hypotheses against the raw references with scripts/score.py (ROUGE-1/2/L/Lsum;
# BLEU-4 as well with --bleu).
#
#   bash scripts/s2s/generate.sh PRESET DATA CHECKPOINT RAW_REFS OUT_DIR [fairseq-generate flags...]
#   e.g. bash scripts/s2s/generate.sh xsum data-bin/xsum checkpoints/xsum/checkpoint_best.pt \
#            raw/xsum/test.target outputs/xsum --batch-size 32
# Writes OUT_DIR/generate-test.txt (fairseq's log), OUT_DIR/hyp.txt (one detokenised
# hypothesis a line, in input order) and OUT_DIR/scores.txt.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
# shellcheck disable=SC1091
[ -f "$ROOT/.venv/bin/activate" ] && source "$ROOT/.venv/bin/activate"
source "$ROOT/scripts/s2s/presets.sh"
die() { echo "s2s/generate.sh: error: $*" >&2; exit 2; }
[ $# -ge 5 ] || die "usage: generate.sh PRESET DATA CHECKPOINT RAW_REFS OUT_DIR [fairseq-generate flags]"
PRESET=$1 DATA=$2 CKPT=$3 REFS=$4 OUT=$5; shift 5
preset "$PRESET" || exit 2
for f in "$CKPT" "$REFS"; do [ -f "$f" ] || die "file not found: $f"; done
BPE=$(python "$ROOT/scripts/recipe_info.py" bpe-flags "$DATA") || exit 2
mapfile -t BPE <<< "$BPE"
SCORE=(); [ "$PRESET" = qg ] && SCORE=(--bleu)
DEVICE=(--cpu); python -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" && DEVICE=(--fp16)
mkdir -p "$OUT"
fairseq-generate "$DATA" --user-dir "$ROOT/fairseq_pmlm" --task pmlm_seq2seq --path "$CKPT" \
  --gen-subset test --max-source-positions "$SRC" --max-target-positions "$TGT" \
  --beam "$BEAM" --lenpen "$LENPEN" --lenpen-formula "$LENFORM" --max-len-a 0 --max-len-b "$MAXLEN" \
  --min-len "$MINLEN" --no-repeat-ngram-size 3 --batch-size 32 "${BPE[@]}" \
  --scoring rouge --results-path "$OUT" "${DEVICE[@]}" "$@"
# D-<id> lines hold the detokenised best hypothesis; restore input order
grep -P '^D-\d+\t' "$OUT/generate-test.txt" | sed 's/^D-//' | sort -n -k1,1 | cut -f3 > "$OUT/hyp.txt"
tail -2 "$OUT/generate-test.txt"
python "$ROOT/scripts/score.py" --hyp "$OUT/hyp.txt" --ref "$REFS" "${SCORE[@]}" | tee "$OUT/scores.txt"
