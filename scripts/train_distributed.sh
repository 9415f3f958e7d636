#!/usr/bin/env bash
# Data-parallel fairseq-train with this plugin: one process per GPU (or per CPU slot) on one or
# more nodes, started by torchrun (`python -m torch.distributed.run`), each running
# `python -m fairseq_pmlm.runtime.distributed_train` (fairseq-train that forms ONE process group from
# torchrun's variables, on GPUs or on CPUs;
# plain fairseq-train does not, see docs/PRETRAINING.md "Distributed training").
#
#   bash scripts/train_distributed.sh [--nproc N] [--nnodes M --node-rank R --master HOST[:PORT]]
#        [--rdzv-timeout S] -- FAIRSEQ-TRAIN-ARGS
#
#   one node, 8 GPUs:
#     bash scripts/train_distributed.sh --nproc 8 -- data-bin/shard0:shard1 --user-dir fairseq_pmlm ...
#   two nodes by hand, on node R (0, 1):
#     bash scripts/train_distributed.sh --nproc 8 --nnodes 2 --node-rank R --master node0.example:29500 -- ...
#   Slurm (sbatch); nodes, node rank and master come from SLURM_NNODES, SLURM_NODEID, SLURM_JOB_NODELIST:
#     srun --ntasks-per-node 1 bash scripts/train_distributed.sh --nproc 8 -- ...
#   CPU, to try it:
#     bash scripts/train_distributed.sh --nproc 2 -- ... --cpu
#
# Defaults: --nproc = GPUs on this node (2 on a CPU-only node), one node, master 127.0.0.1:29500,
# --rdzv-timeout 300 (seconds torchrun's agents wait for every node). The effective batch is
# nodes x nproc x (--batch-size or --max-tokens) x --update-freq. FAIRSEQ-TRAIN-ARGS may add
# --pg-timeout S (default 1800): how long a rank waits for the others, at start and in any
# collective on CPU (gloo), before it stops with an error.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"
activate_venv "$@"
declare -A FLAGS=([--nproc]=NPROC [--nnodes]=NNODES [--node-rank]=NODE_RANK [--master]=MASTER
                  [--rdzv-timeout]=RDZV_TIMEOUT)
NPROC='' NNODES=1 NODE_RANK=0 MASTER=127.0.0.1:29500 RDZV_TIMEOUT=300
if [ -n "${SLURM_JOB_NODELIST:-}" ] && [ -n "${SLURM_NODEID:-}" ]; then
  # one srun task per node: every node's torchrun meets at the job's first node
  NNODES=${SLURM_NNODES:?} NODE_RANK=$SLURM_NODEID
  MASTER="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):$((20000 + ${SLURM_JOB_ID:-0} % 20000))"
fi
PASS_TO=fairseq-train
parse_flags "$@"
[ ${#EXTRA[@]} -gt 0 ] || die "no fairseq-train arguments (put them after --)"
if [ -z "$NPROC" ]; then
  detect_gpus
  NPROC=$PMLM_GPUS
  if [ "$NPROC" -eq 0 ]; then NPROC=2; fi
fi
case "$MASTER" in
  *:*) HOST=${MASTER%:*} PORT=${MASTER##*:} ;;
  *) HOST=$MASTER PORT=29500 ;;
esac

# static rendezvous: node NODE_RANK of NNODES, ranks NODE_RANK*NPROC ... +NPROC-1. torchrun run as
# `python -m`: the ranks then run on this python, the set-up's. A `torchrun` found on PATH may be
# another's (on a GPU image whose own venv holds torch, that venv's: its ranks could not import fairseq)
# Run as a step, not exec'd, so that the exit status is the signal's (130, 143, 138), not torchrun's 1.
# torchrun starts the ranks in sessions of their own: a signal to this process group reaches them only
# through it. It passes INT and TERM on (the ranks take INT as TERM: every rank saves at the same
# update), but USR1 would end it and leave the ranks training: it runs with a USR1 handler that does
# nothing (not ignored: its ranks would inherit that), and this script hands USR1 to the ranks
forward_signals
on_usr1() {  # no rank started yet: nothing to save, torchrun stops as on SIGTERM
  pkill -USR1 -P "$CHILD" 2> /dev/null || kill -TERM "$CHILD" 2> /dev/null || true
  wait "$CHILD" 2> /dev/null || true
  exit 138
}
trap on_usr1 USR1
run_step python -c 'import runpy, signal, sys
signal.signal(signal.SIGUSR1, lambda *_: None)
sys.argv[0] = "torchrun"
runpy.run_module("torch.distributed.run", run_name="__main__")' \
    --nnodes "$NNODES" --node-rank "$NODE_RANK" --nproc-per-node "$NPROC" \
    --master-addr "$HOST" --master-port "$PORT" --rdzv-conf "timeout=$RDZV_TIMEOUT" \
    -m fairseq_pmlm.runtime.distributed_train "${EXTRA[@]}"
