# shellcheck shell=bash
# Fine-tuning and decoding settings per dataset (the paper's appendix table for NLG), sourced
# by finetune.sh and generate.sh. Lengths are in tokens: SRC (with [SOS]/[EOS]) + TGT (with
# EOS) = POSITIONS; above 512 the pre-trained position table is extended cyclically (s2s-ft).
# Batch sizes are sequences per update: BATCH = --batch-size x --update-freq x GPUs.
# PDRAW=1: s2s-ft's pseudo-masking draw in training (task flag --pseudo-draw: each [P] is fed a draw of
# the token it predicts, 80% the pseudo token, 10% random, 10% the token, and a dropped target input the same draw).
# LENFORM: the paper's lenpen values assume s2s-ft's GNMT formula, ((5 + len) / 6) ** LENPEN;
# fairseq's own is len ** LENPEN (sequence_generator.py). MAXLEN (--max-len-b) counts the tokens
# before the EOS that fairseq's generator adds at the limit: TGT - 1 keeps the longest hypothesis
# within SRC + TGT = POSITIONS, the positions of the longest training target (s2s-ft, which adds no
# EOS, decodes up to TGT tokens there).
# NGIGNORE, EOSLIMIT, SEARCH: s2s-ft's decoding (its README's --forbid_ignore_word "."): the trigram
# ban never bans a trigram holding "." (--no-repeat-ngram-ignore), a hypothesis still open at the
# limit ends there without an EOS in its score (--eos-at-limit free; forced: fairseq's), and s2s-ft's
# beam search (--beam-search s2s-ft, whose open hypotheses reach TGT tokens: s2s-ft's limit). Back to
# fairseq's after --: --no-repeat-ngram-ignore '' --eos-at-limit forced --beam-search fairseq.
# shellcheck disable=SC2034  # the settings are read by the recipes that source this
preset() {  # preset NAME: sets SRC TGT POSITIONS LR BATCH EPOCHS WARMUP TMASK PDRAW BEAM LENPEN LENFORM MAXLEN MINLEN
  # NGIGNORE EOSLIMIT SEARCH
  case "$1" in
    cnndm) SRC=608 TGT=160 POSITIONS=768 LR=7e-5 BATCH=64 EPOCHS=14 WARMUP=0.02 TMASK=0.5 PDRAW=1
           BEAM=5 LENPEN=0.7 LENFORM=gnmt MAXLEN=159 MINLEN=1 NGIGNORE=. EOSLIMIT=free
           SEARCH=s2s-ft ;;
    xsum)  SRC=720 TGT=48 POSITIONS=768 LR=7e-5 BATCH=64 EPOCHS=14 WARMUP=0.02 TMASK=0.4 PDRAW=1
           BEAM=5 LENPEN=0.6 LENFORM=gnmt MAXLEN=47 MINLEN=1 NGIGNORE=. EOSLIMIT=free
           SEARCH=s2s-ft ;;
    qg)    SRC=464 TGT=48 POSITIONS=512 LR=2e-5 BATCH=48 EPOCHS=16 WARMUP=0.1 TMASK=0.5 PDRAW=1
           BEAM=8 LENPEN=1.3 LENFORM=gnmt MAXLEN=47 MINLEN=1 NGIGNORE=. EOSLIMIT=free
           SEARCH=s2s-ft ;;
    # the README's main job: a small model, docstrings, minutes on a CPU (48 source tokens: on the
    # validation pairs as good as 64 and an update 13% cheaper; small batches at a high lr)
    demo)  SRC=48 TGT=32 POSITIONS=512 LR=5e-4 BATCH=16 EPOCHS=1 WARMUP=0.1 TMASK=0 PDRAW=0
           BEAM=4 LENPEN=1.0 LENFORM=fairseq MAXLEN=31 MINLEN=1 NGIGNORE='' EOSLIMIT=forced
           SEARCH=fairseq ;;
    *) die "--preset $1: unknown preset (cnndm, xsum, qg, demo)" ;;
  esac
}

pair_index() {  # pair_index SPLIT: the .idx of DATA's binarized SPLIT, source side. Its language
  # suffixes are prepare.sh's (source, target) unless given after -- as fairseq-preprocess was run
  # (--source-lang src --target-lang tgt: fairseq reads them too)
  local src tgt
  src=$(extra_value --source-lang source) tgt=$(extra_value --target-lang target)
  printf '%s\n' "$DATA/$1.$src-$tgt.$src.idx"
}
