#!/usr/bin/env bash
# The paper's objective ablation (Table 6) on your data, at any scale: for every objective and
# seed, pre-train with the same updates, batch, lr and schedule, fine-tune the result with the
# same settings (scripts/s2s/finetune.sh), decode the test split (scripts/s2s/generate.sh) and
# score it; then one table of all of them.
#
#   bash scripts/ablate_objectives.sh --pretrain-data DIR --pairs DIR --refs FILE \
#       --init CKPT | --init random --arch ARCH  --out DIR \
#       [--objectives none,ae,ar,par,ae+ar,ae+par] [--updates 200] [--ft-updates 400] [--seeds 1,2,3]
#       [--lanes 2] [--preset demo] [--lr 3e-4] [--tokens-per-sample 128] [--batch-size 16]
#       [--ft-flags='--dropout 0 --attention-dropout 0'] [-- MORE FAIRSEQ-TRAIN ARGS]
#   e.g. bash scripts/docstring_task.sh --out runs/task       # the main job's task and data
#        bash scripts/ablate_objectives.sh --pretrain-data runs/task/data-bin/pretrain \
#            --pairs runs/task/data-bin/sum --refs runs/task/corpus/pairs/test.target \
#            --init runs/task/released/model.pt --out runs/ablation-continued
#
# --pretrain-data: a data-bin of scripts/prepare_data.sh; --pairs: one of scripts/s2s/prepare.sh
# with the same dictionary; --refs: the raw test references. --init: the start of every run, a
# checkpoint (e.g. released weights, scripts/convert_checkpoint.py import) or random with --arch.
# Objectives (--objective of the pseudo_masked_lm task): ae (MLM), ar, par, ae+ar, ae+par (PMLM),
# and none: no pre-training stage, the start fine-tuned as it is.
# Pre-training: --updates updates of --batch-size sequences of --tokens-per-sample tokens, Adam,
# lr --lr with 10% warmup and linear decay, dropout 0.1; a start whose LM head is untrained (an
# import of weights without one) trains the head alone for the first 50 of those updates, every
# objective alike (the task's --head-warmup-updates default); the flags after -- go to every
# pre-training run (they come last and override these: -- --head-warmup-updates 0 for none).
# Fine-tuning: --ft-updates updates of --preset (scripts/s2s/presets.sh) plus --ft-flags
# (fairseq-train flags: give them as --ft-flags='...', a value that starts with -- needs the =
# form); decoding: the preset's beam. Seed s seeds both stages.
# --lanes K runs K runs side by side, one thread each (2 on a 2-core machine; 1 on a GPU).
#
# Writes OUT/table.md (mean ROUGE-1/2/L over the seeds with their range, the ROUGE-L difference
# from ae and from none pooled over the seeds with a 95% paired bootstrap interval, pre-training
# cost per update relative to ae), OUT/results.json (the same, one value a seed), OUT/rougeL.png
# (one dot a seed) and OUT/pretrain_curves.png (held-out loss). Runs are kept in OUT/runs/: the
# same command again skips finished runs and resumes an interrupted one (SIGTERM or Ctrl-C lets
# each running step save first); other settings with the same OUT are refused.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
case ${1-} in -h | --help) usage; exit 0 ;; esac  # after a flag, --help is a missing value
activate_venv "$@"
# the flags, their defaults and every check live in ablate_objectives.py; this adds the device
device_flags
if [ "$PMLM_GPUS" -gt 0 ]; then lanes=1; else lanes=2; cpu_speed_flags; fi
exec python "$ROOT/scripts/ablate_objectives.py" --device-flags "${DEVICE[*]}" --default-lanes "$lanes" "$@"
