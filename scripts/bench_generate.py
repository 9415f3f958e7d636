#!/usr/bin/env python
"""Decoding speed with fairseq's SequenceGenerator on XSum-shaped inputs: unilmv2 with the
incremental key/value cache vs the same model recomputing the target prefix at every step,
vs fairseq's own ``bart_base``. Randomly initialised models (speed depends on shapes only);
``--min-len`` = ``--max-len`` so every system decodes exactly the same number of steps; the
median of ``--rounds`` that alternate the systems. Prints a markdown table for docs/BENCHMARKS.md.

``--host-bound``: the base models' layer counts (unilmv2 12, bart 6 + 6) at width 64 over a
16-token source, one sentence: what is left is each step's per-operation cost on the host, which
is what decoding at XSum shapes on a GPU is bound by (the CPU's stand-in for that regime).

    python scripts/bench_generate.py [--source-len 720 --target-len 48 --beam 5 --sentences 4]
    python scripts/bench_generate.py --host-bound --skip-recompute [--s2sft-search]
"""
import argparse
import os
import platform
import statistics
import sys
import time
from argparse import Namespace

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the imports below, one line

with interruptible():
    import torch
    from bench_pretrain import synchronize  # scripts/ is on sys.path: the script's own folder
    from fairseq.data import Dictionary
    from fairseq.sequence_generator import SequenceGenerator

    import fairseq_pmlm  # noqa: F401  (registers the model)
    from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model
    from fairseq_pmlm.modules.ngram_repeat_block import fix_repeat_ngram_blocker
    from fairseq_pmlm.sequence_generator import PMLMSequenceGenerator
    from fairseq_pmlm.symbols import MASK_SYMBOL, PSEUDO_SYMBOL


def dictionary(size):
    d = Dictionary()
    for i in range(size - len(d) - 2):
        d.add_symbol(f"w{i}")
    d.add_symbol(MASK_SYMBOL)
    d.add_symbol(PSEUDO_SYMBOL)
    return d


def unilmv2(d, a):
    cfg = UniLMv2Config(encoder_layers=a.layers, encoder_embed_dim=a.dim, encoder_ffn_embed_dim=4 * a.dim,
                        encoder_attention_heads=a.dim // 64, max_positions=a.source_len + a.target_len + 2)
    return UniLMv2Model(cfg, d).eval()


def without_cache(model):
    """The same weights, but every step runs the whole target prefix again (no target cache;
    the source is still encoded once, as SequenceGenerator does)."""
    forward = model.decoder.forward

    def recompute(prev_output_tokens, encoder_out, incremental_state=None, **kwargs):
        return forward(prev_output_tokens, encoder_out, incremental_state=None, **kwargs)

    model.decoder.forward = recompute
    return model


def bart_base(d, a, **shape):
    """fairseq's bart_base; ``shape``: architecture arguments to override (smaller tests)."""
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from fairseq.models.bart import BARTModel

    args = Namespace(max_source_positions=1024, max_target_positions=1024, **shape)
    ARCH_CONFIG_REGISTRY["bart_base"](args)
    task = Namespace(source_dictionary=d, target_dictionary=d)
    return BARTModel.build_model(args, task).eval()


# --host-bound: shapes, and bart_base's widths brought down to unilmv2's
HOST_BOUND = dict(source_len=16, target_len=16, sentences=1, dim=64, layers=12)
BART_AT_WIDTH_64 = dict(encoder_embed_dim=64, decoder_embed_dim=64, encoder_ffn_embed_dim=256,
                        decoder_ffn_embed_dim=256, encoder_attention_heads=1, decoder_attention_heads=1)


def time_generation(model, d, sample, a, search="fairseq"):
    if search == "s2s-ft":
        # s2s-ft's search (--beam-search s2s-ft): with EOS banned throughout, every hypothesis is
        # open at its limit of max_len_b + 1 tokens: target_len tokens and the EOS added, as below
        gen = PMLMSequenceGenerator([model], d, beam_search="s2s-ft", beam_size=a.beam, max_len_a=0,
                                    max_len_b=a.target_len - 1, min_len=a.target_len, no_repeat_ngram_size=3)
    else:  # the working trigram blocker for every system (pmlm_seq2seq's generator uses it)
        gen = fix_repeat_ngram_blocker(SequenceGenerator(
            [model], d, beam_size=a.beam, max_len_a=0, max_len_b=a.target_len, min_len=a.target_len,
            no_repeat_ngram_size=3))
    with torch.no_grad():
        gen.forward(sample)  # warm-up
        synchronize()
        t = time.perf_counter()
        out = gen.forward(sample)
        synchronize()
        sec = time.perf_counter() - t
    assert all(len(h[0]["tokens"]) == a.target_len + 1 for h in out), "every system decodes the same length"
    return sec


def alternated(models, d, sample, a, rounds, report=None):
    """{name: [seconds of one generate() call, a round each]}: the systems take turns each round, so
    one busy moment of the host does not decide a ratio. ``report(name, round, sec)`` as each ends."""
    times = {name: [] for name in models}
    for r in range(rounds):
        for name, model in models.items():
            model, search = model if isinstance(model, tuple) else (model, "fairseq")
            times[name].append(time_generation(model, d, sample, a, search))
            if report:
                report(name, r, times[name][-1])
    return times


def xsum_sample(d, a):
    """``a.sentences`` random sources of ``a.source_len`` tokens, [SOS] ... [EOS]."""
    body = torch.randint(d.nspecial, len(d) - 2, (a.sentences, a.source_len - 2))
    src = torch.cat([torch.full((a.sentences, 1), d.bos()), body, torch.full((a.sentences, 1), d.eos())], 1)
    return {"net_input": {"src_tokens": src, "src_lengths": torch.full((a.sentences,), a.source_len)}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source-len", type=int, default=720, help="source tokens ([SOS] and [EOS] included)")
    p.add_argument("--target-len", type=int, default=48, help="decoding steps (tokens before EOS)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--sentences", type=int, default=4, help="sentences per generate() call (one batch)")
    p.add_argument("--layers", type=int, default=12, help="unilmv2 layers (bart_base: 6+6 at dim 768)")
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--rounds", type=int, default=3, help="alternated rounds; the table shows their median")
    p.add_argument("--host-bound", action="store_true",
                   help=f"{HOST_BOUND} and bart_base at width 64: the per-step host cost alone")
    p.add_argument("--skip-recompute", action="store_true", help="skip the slow no-cache row")
    p.add_argument("--s2sft-search", action="store_true",
                   help="a row for unilmv2 with s2s-ft's beam search (--beam-search s2s-ft), same steps")
    a = p.parse_args()
    if a.host_bound:
        vars(a).update(HOST_BOUND)
    torch.manual_seed(0)
    d = dictionary(a.vocab)
    sample = xsum_sample(d, a)

    models = {"unilmv2, incremental cache": unilmv2(d, a)}
    if a.s2sft_search:
        models["unilmv2, incremental cache, s2s-ft's search"] = (models["unilmv2, incremental cache"], "s2s-ft")
    if not a.skip_recompute:
        models["unilmv2, recompute prefix each step"] = without_cache(unilmv2(d, a))
    bart_name = "fairseq bart_base" + (" at width 64" if a.host_bound else "") + ", incremental"
    models[bart_name] = bart_base(d, a, **(BART_AT_WIDTH_64 if a.host_bound else {}))
    times = alternated(models, d, sample, a, a.rounds,
                       lambda name, r, sec: print(f"{name}, round {r + 1}: {sec:.3f} s", file=sys.stderr, flush=True))
    base = statistics.median(times[bart_name])
    print(f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads; source {a.source_len}, target "
          f"{a.target_len} (min = max length), beam {a.beam}, {a.sentences} sentences per batch, "
          f"no-repeat-ngram 3; unilmv2 {a.layers}x{a.dim}; median of {a.rounds} alternated rounds\n")
    print("| system | parameters | batch time (s) | sentences/s | time per sentence vs bart_base |")
    print("|---|---:|---:|---:|---:|")
    for name, model in models.items():
        model = model[0] if isinstance(model, tuple) else model
        params, sec = sum(p.numel() for p in model.parameters()), statistics.median(times[name])
        print(f"| {name} | {params / 1e6:.1f}M | {sec:.3f} | {a.sentences / sec:.2f} | {sec / base:.2f}x |")


if __name__ == "__main__":
    from fairseq_pmlm.runtime.interrupts import one_line_exit

    # Ctrl-C or SIGTERM: 130, one line, no traceback
    sys.exit(one_line_exit("bench_generate.py", main))
