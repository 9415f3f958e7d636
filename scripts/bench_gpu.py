#!/usr/bin/env python
"""The GPU comparison in one call (``scripts/bench_gpu.sh`` installs, then runs this).

At base size, same batch of full-length contexts, one full fairseq ``Trainer.train_step``
(forward, backward, Adam) per update:
  - stock fairseq ``roberta_base`` masked_lm (fp16) vs PMLM AE+PAR (fp16): tokens/s,
    context sequences/s, model FLOPs utilisation (appended tokens counted), peak memory;
  - PMLM AE+PAR vs the naive way: one cloze instance (a full copy of the context) per
    factorization step, accumulated into one update;
  - PMLM fp16 (fairseq's --fp16) vs bf16 (the plugin's --bf16-autocast);
  - decoding at XSum shapes (source 720, 48 steps, beam 5): unilmv2_base vs fairseq's bart_base.
Prints one markdown table with the device, commit and ratios. ``--smoke``: the same code at
tiny sizes (the test suite runs it on the CPU, so this script cannot rot). ``--profile FILE``:
also one PMLM AE+PAR fp16 update's kernels (torch.profiler; kernels only, shares of the measured
update time) with named totals for attention, relative bias, optimizer and copies, and the
relative-position bias's own forward + backward time against the update's, and on a GPU where the
device idles (gaps between kernels by fairseq stage and host op) and where the host waits for the
device (syncs by the fairseq or plugin line that asked), written to FILE.
``--attention sdpa|flex|triton|both|auto+triton``: PMLM's attention path (flex: the one-call flex
attention path; triton: the shared context block by the Triton kernel; both: the default rows plus
flex rows; auto+triton: the default rows plus triton rows, measured in the same rounds).
``--compile``: also the PMLM rows with ``--compile-layers`` (each layer through torch.compile).
``--ceiling``: also roberta, PMLM AE+PAR and AE (fp16) with attention replaced by a copy of the
values (SDPA's call made free, the relative bias still built): what the rest of an update costs,
so the most that attention work alone can give against roberta's full update.
``--rounds N``: the four rows the targets compare (roberta, AE+PAR fp16 and bf16, AE) measured N
times in turn: a row's time is the median, a ratio the median of the rounds' own ratios, with their
range (one row alone moves by several percent between runs on one machine).

    python scripts/bench_gpu.py [--smoke] [--peak-tflops 989] [--profile FILE] [--attention both] [--compile]
                                [--ceiling] [--rounds 3]
"""
import argparse
import contextlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from argparse import Namespace

from lib.import_guard import interruptible  # scripts/lib: Ctrl-C during the imports below, one line

with interruptible():
    import bench_generate
    import bench_pretrain
    import torch
    import torch.nn.functional as F
    from bench_gpu_profile import profile_update
    from bench_pretrain import REPO

    from fairseq_pmlm.modules import compiled_layers, flex_attention, toeplitz_attention
    from fairseq_pmlm.modules.attention_rule import ORIGINAL
    from fairseq_pmlm.modules.transformer import ReadCells
    from fairseq_pmlm.runtime.interrupts import one_line_exit

SIZES = {
    "base": dict(layers=12, dim=768, heads=12, ffn=3072, batch=32, length=512, vocab=30000, docs=64,
                 warmup=3, steps=10, source_len=720, target_len=48, beam=5, sentences=8, bart={}),
    "smoke": dict(layers=2, dim=64, heads=4, ffn=256, batch=4, length=64, vocab=300, docs=8,
                  warmup=1, steps=1, source_len=40, target_len=6, beam=2, sentences=2,
                  bart=dict(encoder_layers=1, decoder_layers=1, encoder_embed_dim=64, decoder_embed_dim=64,
                            encoder_ffn_embed_dim=128, decoder_ffn_embed_dim=128,
                            encoder_attention_heads=2, decoder_attention_heads=2)),
}
# dense fp16/bf16 tensor-core peaks (FLOP/s), matched against torch.cuda.get_device_name()
PEAK_FLOPS = [("H100 PCIe", 756e12), ("H100", 989e12), ("H200", 989e12), ("A100", 312e12)]
ANCHOR = "stock roberta_base fp16, H100, batch 32 x 512: 225-240k tokens/s (earlier measurement)"
VARYING_BATCHES = 6  # --compile: batches of varying length in one update
COLUMNS = ["run", "precision", "time (ms)", "sequences/s", "tokens/s", "MFU", "peak memory (GiB)", "ratio"]


def progress(message):
    """One line on stderr as each measurement ends: bench_gpu.sh shows them live, and a run cut
    short (a machine's time limit) keeps the rows it finished."""
    print(f"bench_gpu: {message}", file=sys.stderr, flush=True)


def attention_calls():
    """The calls the opt-in paths (flex, the Triton kernel) have served so far: ``attention_ran``'s start."""
    return flex_attention.calls(), toeplitz_attention.calls()


def attention_ran(calls_before):
    """Which attention path the last measurement ran: flex, or the Triton kernel for the context block,
    only if it served calls (auto takes SDPA where attention dropout is on; a path that failed to
    compile fell back to SDPA, and the row says why)."""
    flex_before, triton_before = calls_before
    if flex_attention.calls() > flex_before:
        return "flex"
    if toeplitz_attention.calls() > triton_before:
        return "Triton context block + SDPA"
    failed = [f"{path} failed: {type(e).__name__}" for path, e in
              (("flex", flex_attention.failure()), ("triton", toeplitz_attention.failure())) if e is not None]
    return "SDPA" + (f" ({', '.join(failed)})" if failed else "")


@contextlib.contextmanager
def attention_free():
    """``F.scaled_dot_product_attention`` replaced by a copy of the values (the queries' rows of V),
    for fairseq's MultiheadAttention (roberta) and the plugin's SDPA path alike: an update then costs
    what it does besides attention. A diagnostic only: the model learns nothing sensible so."""
    sdpa = F.scaled_dot_product_attention

    def copy_values(q, k, v, *args, **kwargs):
        return v[..., :q.shape[-2], :].clone()

    F.scaled_dot_product_attention = copy_values
    try:
        yield
    finally:
        F.scaled_dot_product_attention = sdpa


def device_info(peak_tflops):
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name()
        peak = peak_tflops * 1e12 if peak_tflops else next((f for k, f in PEAK_FLOPS if k in name), None)
        return "cuda", name, peak
    return "cpu", f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)", (
        peak_tflops * 1e12 if peak_tflops else None)


def commit():
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except OSError:
        return "unknown"


def train_flops(sample, s, vocab, pad):
    """Model FLOPs of one update (forward + backward = 3x forward), counting every computed
    token, the appended ones included: dense layers 6 x params x tokens, attention 12 x dim
    per query-key pair actually computed (PMLM's context rows skip the appended keys), LM
    head 6 x dim x vocab per predicted token. PMLM's last layer computes keys and values for
    every token, the rest for the R columns a row's loss reads (``ReadCells``) over all keys."""
    ni = sample["net_input"]
    B, T = ni["src_tokens"].shape
    P = ni.get("prefix_len") or T
    mask = sample["target"].ne(pad)
    predicted = int(mask.sum())
    dim, layers, pmlm = s["dim"], s["layers"], "kinds" in ni
    R = ReadCells.of(mask).columns.size(1) if pmlm else T
    body = 4 * dim**2 + 2 * dim * s["ffn"]
    dense = (layers - 1) * body * B * T + 2 * dim**2 * B * T + (body - 2 * dim**2) * B * R
    pairs = B * (P * P + (T - P) * T)
    pairs = (layers - 1) * pairs + (B * R * T if pmlm else pairs)
    return 6 * dense + 12 * dim * pairs + 6 * dim * (vocab + dim) * predicted


def naive_batches(sample, pad, batch):
    """The same examples the naive way: per factorization step s one copy of the context
    in which the blocks of steps < s are revealed, predicting step s's block (the first copy,
    everything masked, also predicts every masked token: the AE loss). Batches of ``batch``."""
    ni = sample["net_input"]
    P = ni["prefix_len"]
    rows = []
    for b in range(ni["src_tokens"].size(0)):
        orig = ni["kinds"][b].eq(ORIGINAL)
        pos, step, tok = ni["positions"][b][orig], ni["steps"][b][orig], ni["src_tokens"][b][orig]
        for s in range(1, int(step.max()) + 1):
            tokens = ni["src_tokens"][b, :P].clone()
            tokens[pos[step < s]] = tok[step < s]
            target = torch.full_like(tokens, pad)
            pick = step >= 1 if s == 1 else step == s
            target[pos[pick]] = tok[pick]
            rows.append((tokens, target, b))
    out = []
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]
        idx = torch.tensor([b for _, _, b in chunk])
        tokens = torch.stack([t for t, _, _ in chunk])
        out.append({
            "net_input": {"src_tokens": tokens, "positions": ni["positions"][idx, :P],
                          "segments": ni["segments"][idx, :P], "kinds": ni["kinds"][idx, :P],
                          "steps": torch.zeros_like(tokens)},
            "target": torch.stack([t for _, t, _ in chunk]),
            "ntokens": int(tokens.ne(pad).sum()), "nsentences": len(chunk),
        })
    return out, len(rows)


def pmlm_args(objective):
    return ["--user-dir", os.path.join(REPO, "fairseq_pmlm"), "--task", "pseudo_masked_lm",
            "--arch", "unilmv2_base", "--criterion", "pmlm", "--objective", objective]


def common_args(s, data, device):
    """(fairseq flags every pre-training run shares, each precision's flags)."""
    shape = ["--encoder-layers", str(s["layers"]), "--encoder-embed-dim", str(s["dim"]),
             "--encoder-ffn-embed-dim", str(s["ffn"]), "--encoder-attention-heads", str(s["heads"])]
    common = [data, "--optimizer", "adam", "--lr", "1e-4", "--max-tokens", "1000000", "--seed", "1",
              "--tokens-per-sample", str(s["length"]), "--log-format", "none", *shape]
    common += ["--cpu"] if device == "cpu" else []
    # fairseq flattens the fp32 master copy onto torch.cuda.current_device(): CPU needs it unflattened
    precision_args = {"fp16": ["--fp16"] + (["--fp16-no-flatten-grads"] if device == "cpu" else []),
                      "bf16 autocast": ["--bf16-autocast"]}
    return common, precision_args


def attention_bench_model(s, device, prefix):
    """(task, one full-length batch, the model's transformer in the attention benches' dtype: fp16 on a
    GPU, fp32 on the CPU) of a PMLM AE+PAR fp16 trainer: what bench_attention.py and bench_bias.py time."""
    work = tempfile.mkdtemp(prefix=prefix)
    try:
        common, precision = common_args(s, bench_pretrain.binarize(work, vocab=s["vocab"], docs=s["docs"]), device)
        task, trainer = bench_pretrain.setup(common + pmlm_args("ae+par") + precision["fp16"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sample = bench_pretrain.full_length_batch(task.dataset("train"), s["batch"], s["length"])
    return task, sample, trainer.model.transformer.to(torch.float16 if device == "cuda" else torch.float32)


def attention_args(attention):
    """PMLM's attention path (``--attention``; "auto": the model's default). flex has no attention
    dropout: its runs train without it (the row says so)."""
    if attention == "auto":
        return []
    return ["--attention-impl", attention] + (["--attention-dropout", "0"] if attention == "flex" else [])


def compiled_name(device):
    """What a --compile-layers row ran: compiled layers, or eager ones (on the CPU, or where compiling failed)."""
    if device not in compiled_layers.DEVICES:
        return ", layers eager (compiled on CUDA only)"
    failed = compiled_layers.failure()
    return ", layers compiled" if failed is None else f", layers eager (compiling failed: {type(failed).__name__})"


def row_name(what, m, flex_asked):
    """A row's name with the attention path it measured ran (flex asked for: trained without attention
    dropout, which flex lacks; on the CPU, which has no flex backward, the model falls back to SDPA)."""
    return f"{what} (unilmv2_base), {m['attention']} attention" + (", no attention dropout" if flex_asked else "")


def pretraining_rows(a, s, work, device, peak):
    data = bench_pretrain.binarize(work, vocab=s["vocab"], docs=s["docs"])
    common, precision_args = common_args(s, data, device)
    main = "auto" if a.attention in ("both", "auto+triton") else a.attention
    triton = a.attention == "auto+triton"  # the triton rows in every round, beside the default ones
    pmlm = pmlm_args("ae+par") + attention_args(main)
    roberta = ["--task", "masked_lm", "--arch", "roberta_base", "--criterion", "masked_lm",
               "--sample-break-mode", "none"]

    def measure(label, argv, make_batches, steps, several=False):
        calls = attention_calls()
        if "--compile-layers" in argv:  # compiled afresh for this row: no graph of an earlier row's shapes
            torch._dynamo.reset()
        task, trainer = bench_pretrain.setup(common + argv)
        batches, extra = make_batches(task)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        with bench_pretrain.peak_memory_kept():
            sec = bench_pretrain.time_updates(trainer, batches, s["warmup"], steps)
        memory = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
        first = batches[0] if isinstance(batches, list) else batches
        vocab = len(task.source_dictionary)
        pad = task.source_dictionary.pad()
        flops = sum(train_flops(b, s, vocab, pad) for b in (batches if isinstance(batches, list) else [batches]))
        processed = sum(int(b["net_input"]["src_tokens"].numel()) for b in
                        (batches if isinstance(batches, list) else [batches]))
        del trainer, task
        if device == "cuda":
            torch.cuda.empty_cache()
        sequences = s["batch"] * (extra if several else 1)  # several: distinct batches, else one batch's rows
        m = dict(sec=sec, seqs=sequences / sec, batches=batches if isinstance(batches, list) else [batches],
                 tokens=processed / sec, mfu=flops / sec / peak if peak else None,
                 memory=memory, first=first, extra=extra, attention=attention_ran(calls))
        progress(f"{label}: {1000 * sec:.1f} ms/update, {m['seqs']:,.1f} sequences/s, attention {m['attention']}"
                 + (f", peak {memory:.2f} GiB" if memory is not None else ""))
        return m

    def pmlm_batch(task):
        return bench_pretrain.full_length_batch(task.dataset("train"), s["batch"], s["length"]), None

    def roberta_batch(task):
        ds = task.dataset("train")
        sample = ds.collater([ds[i] for i in range(s["batch"])])
        assert sample["net_input"]["src_tokens"].shape == (s["batch"], s["length"])
        return sample, None

    def pmlm_rows(attention, label):
        """PMLM AE+PAR fp16 and bf16 autocast, AE fp16, on one attention path."""
        ae_par = pmlm_args("ae+par") + attention_args(attention)
        return (measure(f"PMLM AE+PAR fp16{label}", ae_par + precision_args["fp16"], pmlm_batch, s["steps"]),
                measure(f"PMLM AE+PAR bf16 autocast{label}", ae_par + precision_args["bf16 autocast"], pmlm_batch,
                        s["steps"]),
                measure(f"PMLM AE fp16{label}", pmlm_args("ae") + attention_args(attention) + precision_args["fp16"],
                        pmlm_batch, s["steps"]))

    def main_rows(label):
        """The rows the targets compare, measured one after the other (one round): roberta, then
        PMLM's three on the main path (and on the triton path)."""
        rob = measure(f"roberta_base fp16{label}", roberta + precision_args["fp16"], roberta_batch, s["steps"])
        return (rob, *pmlm_rows(main, label)) + (pmlm_rows("triton", f", triton{label}") if triton else ())

    rounds = [main_rows("" if a.rounds == 1 else f", round {r + 1} of {a.rounds}") for r in range(a.rounds)]
    rob, fp16, bf16, ae, *triton_rows = (median_round([r[i] for r in rounds]) for i in range(len(rounds[0])))

    def rounds_ratio(i, j, what):
        """Row i's sequences/s over row j's: the median of the rounds' own ratios (rows measured
        seconds apart, so a machine's drift between rounds cancels), and their range."""
        return ratio_text([r[j]["sec"] / r[i]["sec"] for r in rounds], what)

    def naive(task):
        sample, _ = pmlm_batch(task)
        return naive_batches(sample, task.source_dictionary.pad(), s["batch"])

    nv = measure("naive fp16", pmlm + precision_args["fp16"], naive, max(1, s["steps"] // 3))
    per_example = nv["extra"] / s["batch"]
    flex = []
    if a.attention == "both":  # the flex path against the rows' default path, same batches
        pmlm_flex = pmlm_args("ae+par") + attention_args("flex")
        fx = measure("PMLM AE+PAR fp16, flex", pmlm_flex + precision_args["fp16"], pmlm_batch, s["steps"])
        fx_ae = measure("PMLM AE fp16, flex", pmlm_args("ae") + attention_args("flex") + precision_args["fp16"],
                        pmlm_batch, s["steps"])
        fx_bf16 = measure("PMLM AE+PAR bf16 autocast, flex", pmlm_flex + precision_args["bf16 autocast"],
                          pmlm_batch, s["steps"])
        flex = [(row_name("PMLM AE+PAR", fx, True), "fp16", fx,
                 f"{fx['seqs'] / rob['seqs']:.2f}x roberta's sequences/s, {fx['seqs'] / fp16['seqs']:.2f}x the "
                 "row with dropout"),
                (row_name("PMLM AE only", fx_ae, True), "fp16", fx_ae, f"{fx_ae['seqs'] / rob['seqs']:.2f}x roberta's"),
                (row_name("PMLM AE+PAR", fx_bf16, True), "bf16 autocast", fx_bf16,
                 f"{fx_bf16['seqs'] / fx['seqs']:.2f}x its fp16 row")]
    compiled = []
    if a.compile:  # --compile-layers against eager on the same batches (compiling happens in the warm-up)
        def varying(task):
            """Batches of full contexts whose appended parts differ in length, one update over them:
            what training feeds (each length compiles; the model pads lengths to few)."""
            ds = task.dataset("train")
            full = [i for i in range(len(ds)) if ds.size(i) == s["length"]]
            n = max(1, min(VARYING_BATCHES, len(full) // s["batch"]))
            return [ds.collater([ds[i] for i in full[k * s["batch"]:(k + 1) * s["batch"]]]) for k in range(n)], n

        def vs(m, ref, what):
            return f"{m['seqs'] / ref['seqs']:.2f}x {what}"

        layers = ["--compile-layers"]
        eager_v = measure("PMLM AE+PAR fp16, batches of varying length", pmlm + precision_args["fp16"], varying,
                          s["steps"], several=True)
        cmp = measure("PMLM AE+PAR fp16, batches of varying length, --compile-layers",
                      pmlm + layers + precision_args["fp16"], varying, s["steps"], several=True)
        cmp_bf16 = measure("PMLM AE+PAR bf16 autocast, batches of varying length, --compile-layers",
                           pmlm + layers + precision_args["bf16 autocast"], varying, s["steps"], several=True)
        cmp_ae = measure("PMLM AE fp16, --compile-layers", pmlm_args("ae") + attention_args(main) + layers
                         + precision_args["fp16"], pmlm_batch, s["steps"])
        lengths = "{} batches of lengths {}".format(
            eager_v["extra"], "/".join(sorted({str(b["net_input"]["src_tokens"].size(1)) for b in eager_v["batches"]})))
        compiled = [(f"PMLM AE+PAR (unilmv2_base), {eager_v['attention']} attention, {lengths}, eager", "fp16",
                     eager_v, "reference for the compiled rows (one optimizer step per update: not comparable "
                     "to the one-batch rows)"),
                    (row_name("PMLM AE+PAR", cmp, False) + f", {lengths}" + compiled_name(device), "fp16", cmp,
                     f"{vs(cmp, eager_v, 'eager')}'s sequences/s"),
                    (row_name("PMLM AE+PAR", cmp_bf16, False) + f", {lengths}" + compiled_name(device), "bf16 autocast",
                     cmp_bf16, f"{vs(cmp_bf16, cmp, 'its fp16 row')}, {vs(cmp_bf16, eager_v, 'eager fp16')}"),
                    (row_name("PMLM AE only", cmp_ae, False) + compiled_name(device), "fp16", cmp_ae,
                     f"{vs(cmp_ae, rob, 'roberta')}'s sequences/s, {vs(cmp_ae, ae, 'eager')}")]
    if triton_rows:
        t16, tbf16, tae = triton_rows
        triton_rows = [
            (row_name("PMLM AE+PAR", t16, False), "fp16", t16,
             rounds_ratio(4, 0, "roberta's sequences/s (target >= 1); ") + rounds_ratio(4, 1, "the default path's")),
            (row_name("PMLM AE+PAR", tbf16, False), "bf16 autocast", tbf16,
             rounds_ratio(5, 4, "its fp16 row's (target >= 1); ") + rounds_ratio(5, 2, "the default path's")),
            (row_name("PMLM AE only", tae, False), "fp16", tae,
             rounds_ratio(6, 0, "roberta's sequences/s (target >= 1.2); ") + rounds_ratio(6, 3, "the default path's"))]
    ceiling = []
    if a.ceiling:  # the rest of each update: attention made free (its calls copy the values)
        with attention_free():
            free = [measure(f"{label}, attention a copy", argv + precision_args["fp16"], batch, s["steps"])
                    for label, argv, batch in (("roberta_base fp16", roberta, roberta_batch),
                                               ("PMLM AE+PAR fp16", pmlm_args("ae+par") + attention_args("sdpa"),
                                                pmlm_batch),
                                               ("PMLM AE fp16", pmlm_args("ae") + attention_args("sdpa"),
                                                pmlm_batch))]
        names = ("fairseq roberta_base masked_lm", "PMLM AE+PAR", "PMLM AE only")
        full = (rob, fp16, ae)
        ceiling = [(f"{n}, attention a copy of the values (the rest of the update)", "fp16", m,
                    f"attention costs {1000 * (f['sec'] - m['sec']):.1f} ms of the full row's "
                    f"{1000 * f['sec']:.1f}" + ("" if i == 0 else
                                              f"; at most {m['seqs'] / rob['seqs']:.2f}x roberta's full row"))
                   for i, (n, m, f) in enumerate(zip(names, free, full))]
    flex_asked = main == "flex"
    return [
        ("fairseq roberta_base masked_lm", "fp16", rob, "reference for the pre-training rows"),
        (row_name("PMLM AE+PAR", fp16, flex_asked), "fp16", fp16,
         rounds_ratio(1, 0, "roberta's sequences/s (target >= 1)")),
        (row_name("PMLM AE+PAR", bf16, flex_asked), "bf16 autocast", bf16,
         rounds_ratio(2, 1, "PMLM fp16's sequences/s (target >= 1)")),
        (row_name("PMLM AE only", ae, flex_asked), "fp16", ae,
         rounds_ratio(3, 0, "roberta's sequences/s (target >= 1.2)")),
        (f"naive: one cloze instance per factorization step ({per_example:.1f} per example), {nv['attention']} "
         "attention", "fp16", nv, speedup("PMLM fp16", fp16["seqs"] / nv["seqs"])),
    ] + triton_rows + flex + compiled + ceiling


def speedup(name, ratio):
    """"NAME is 20.2x faster", or "NAME is 2.5x slower" where it is (tiny --smoke shapes on a CPU),
    not "0.4x faster"."""
    return f"{name} is {ratio:.1f}x faster" if ratio >= 1 else f"{name} is {1 / ratio:.1f}x slower"


def median_round(ms):
    """One row from its rounds' measurements: the median update time, the rates at that time, the
    largest peak memory. Worked example: 90, 95, 93 ms -> 93 ms."""
    sec = statistics.median(m["sec"] for m in ms)
    first, f = ms[0], ms[0]["sec"] / sec
    memory = max((m["memory"] for m in ms if m["memory"] is not None), default=None)
    return dict(first, sec=sec, seqs=first["seqs"] * f, tokens=first["tokens"] * f,
                mfu=first["mfu"] and first["mfu"] * f, memory=memory)


def ratio_text(ratios, what):
    """ "0.64x what", and with several rounds their range: "0.64x (rounds 0.61-0.66) what"."""
    spread = f" (rounds {min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
    return f"{statistics.median(ratios):.2f}x{spread} {what}"


DECODING_ROUNDS = 3


def decoding_rows(s, device):
    """Decoding at XSum shapes, unilmv2 vs bart_base: the median of rounds that alternate the two
    (the time of one generate() call over ``sentences`` sources; peak memory with both models resident)."""
    g = Namespace(source_len=s["source_len"], target_len=s["target_len"], beam=s["beam"],
                  sentences=s["sentences"], layers=s["layers"], dim=s["dim"])
    torch.manual_seed(0)
    d = bench_generate.dictionary(30522 if s["vocab"] >= 30000 else s["vocab"])
    sample = bench_generate.xsum_sample(d, g)
    sample = {"net_input": {k: v.to(device) for k, v in sample["net_input"].items()}}
    models = {"unilmv2": bench_generate.unilmv2(d, g), "bart_base": bench_generate.bart_base(d, g, **s["bart"])}
    models = {name: model.to(device).half() for name, model in models.items()}
    memory = dict.fromkeys(models, 0.0)

    def report(name, r, sec):  # peak memory per round, with both models resident
        if device == "cuda":
            memory[name] = max(memory[name], torch.cuda.max_memory_allocated() / 2**30)
            torch.cuda.reset_peak_memory_stats()
        progress(f"decoding {name}, round {r + 1} of {DECODING_ROUNDS}: {1000 * sec:.1f} ms "
                 f"for {g.sentences} sentences")

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    # alternated, median: one busy moment of the host must not decide the ratio
    times = bench_generate.alternated(models, d, sample, g, DECODING_ROUNDS, report)
    out = {}
    for name in models:
        sec = statistics.median(times[name])
        out[name] = dict(sec=sec, seqs=g.sentences / sec, tokens=g.sentences * g.target_len / sec, mfu=None,
                         memory=memory[name] if device == "cuda" else None)
    shape = f"source {g.source_len}, {g.target_len} steps, beam {g.beam}"
    return [
        (f"decoding unilmv2 ({shape})", "fp16", out["unilmv2"],
         f"{out['unilmv2']['sec'] / out['bart_base']['sec']:.2f}x bart_base's time per sentence"),
        (f"decoding fairseq bart_base ({shape})", "fp16", out["bart_base"], "reference for decoding"),
    ]


def table(rows):
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|" + "---:|" * 5 + "---|"]
    for name, precision, m, ratio in rows:
        lines.append(f"| {name} | {precision} | {1000 * m['sec']:.1f} | {m['seqs']:,.2f} | {m['tokens']:,.0f} | "
                     f"{num(m['mfu'] and 100 * m['mfu'], '.1f') + ('%' if m['mfu'] else '')} | "
                     f"{num(m['memory'], '.2f')} | {ratio} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes (about a minute on a CPU)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="the device's dense fp16/bf16 peak, for MFU (default: known GPUs by name)")
    p.add_argument("--profile", metavar="FILE", default=None,
                   help="also write the top kernels of one PMLM update and the relative bias's share to FILE")
    p.add_argument("--attention", choices=["auto", "sdpa", "flex", "triton", "both", "auto+triton"], default="auto",
                   help="PMLM's attention path: auto (the model's default, today SDPA), sdpa, flex (trained "
                        "without attention dropout, which flex lacks), triton (the shared context block by the "
                        "Triton kernel), both (the auto rows plus flex rows; --profile: both), auto+triton (the "
                        "auto rows plus triton rows in the same rounds; --profile: both)")
    p.add_argument("--compile", action="store_true",
                   help="also the PMLM rows with --compile-layers (torch.compile of each layer; --profile: also "
                        "its update)")
    p.add_argument("--ceiling", action="store_true",
                   help="also roberta, PMLM AE+PAR and AE (fp16) with attention a copy of the values: the rest of "
                        "an update, so the most attention work alone can give")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure roberta, PMLM AE+PAR fp16 and bf16 and AE this many times in turn; each row "
                        "shows the median time and each ratio the median of the rounds' ratios with their range")
    a = p.parse_args(argv)
    if a.rounds < 1:
        p.error(f"--rounds must be at least 1, got {a.rounds}")
    s = SIZES["smoke" if a.smoke else "base"]
    device, name, peak = device_info(a.peak_tflops)
    if device == "cpu" and not a.smoke:
        sys.exit("bench_gpu.py: error: no CUDA device (torch.cuda.is_available() is False); "
                 "use --smoke for the CPU check")
    torch.manual_seed(0)
    work = tempfile.mkdtemp(prefix="bench_gpu_")
    try:
        rows = pretraining_rows(a, s, work, device, peak) + decoding_rows(s, device)
        profiled = None
        if a.profile:  # both: the default path (SDPA under the paper's attention dropout) and flex
            common, precision_args = common_args(s, os.path.join(work, "bin"), device)
            parts = []
            pair = {"both": ["auto", "flex"], "auto+triton": ["auto", "triton"]}
            paths = [(attention, []) for attention in pair.get(a.attention, [a.attention])]
            paths += [(pair.get(a.attention, [a.attention])[0], ["--compile-layers"])] if a.compile else []
            for attention, extra in paths:
                calls = attention_calls()
                parts.append(profile_update(s, common + pmlm_args("ae+par") + precision_args["fp16"]
                                            + attention_args(attention) + extra, device,
                                            lambda calls=calls, extra=extra: f"{attention_ran(calls)} attention"
                                            + (compiled_name(device) if extra else "")))
                progress(f"profile {len(parts)} of {len(paths)} done")
            profiled = "\n\n".join(parts)
            with open(a.profile, "w") as f:
                f.write(profiled + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mfu = f"MFU against {peak / 1e12:.0f} TFLOP/s" if peak else "MFU: no known peak for this device (--peak-tflops)"
    print(f"\ndevice: {name}; commit: {commit()}; torch {torch.__version__}; "
          f"{'smoke sizes' if a.smoke else 'base size'}: model {s['layers']}x{s['dim']}, {s['heads']} heads, "
          f"batch {s['batch']} x {s['length']} context tokens, median of {s['steps']} updates"
          f"{f' (the compared rows: median of {a.rounds} rounds)' if a.rounds > 1 else ''}; {mfu}\n")
    print(table(rows))
    print(f"\nanchor: {ANCHOR}. sequences/s: context sequences (pre-training), sentences (decoding); "
          "tokens/s: every computed token, PMLM's appended ones included (decoding: generated tokens)")
    if profiled:
        print(f"\n{profiled}\n\n(written to {a.profile})")


if __name__ == "__main__":
    # Ctrl-C or SIGTERM: 130, its temporary corpus removed, no traceback
    sys.exit(one_line_exit("bench_gpu.py", main))
