"""Bad input to `fairseq-train --task pseudo_masked_lm`: a clear one-line error that names the
file or flag, a non-zero exit, and no checkpoint file left behind; and the two cases that are
not errors (too-short documents are skipped, too-long sentences are split) said in the log.

The command-line runs are fairseq-train processes (cli.train_many, from the warm process), side by
side in cli.py's two-worker pool; the in-process tests check the same things directly and fast.
"""
import logging
import re

import numpy as np
import pytest
import torch

from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model
from fairseq_pmlm.modules.attention_rule import CONTEXT
from fairseq_pmlm.tasks.pseudo_masked_lm import PseudoMaskedLMConfig, PseudoMaskedLMTask

from cli import (
    assert_fails_with,
    binarize,
    checkpoints,
    log_line,
    memorisable_documents,
    preprocess,
    records,
    shared_corpus,
    submit,
    train_many,
)
from pack_reference import pack_documents

VALID = [["a valid document .", "of two sentences ."]]
LONG = " ".join(f"t{i % 30}" for i in range(150))  # 150 tokens > 61 = 64 - 3 specials
SHORT_AND_LONG = [
    ["one"],                                  # 1 token: skipped
    ["alpha beta gamma .", "delta epsilon ."],
    ["two"],                                  # 1 token: skipped
    ["start of a long one .", LONG],          # 6 tokens, then LONG split into 61 + 61 + 28
    ["x y"],                                  # 2 tokens: kept
    ["the end .", "really ."],
]
LONG_LINE = 8  # its line in the text file: documents of 1, 2, 1 lines (+ blank lines), "start ..."


def write(path, text):
    path.write_text(text)
    return path


def corpus_of(tmp, name, train_text, srcdict=None):
    """Binarize a raw train text (in-process) with a small valid split."""
    train_txt = write(tmp / f"{name}.train.txt", train_text)
    valid_txt = write(tmp / f"{name}.valid.txt", "a valid document .\nof two sentences .\n\n")
    return binarize(train_txt, valid_txt, tmp / name, srcdict=srcdict, in_process=True)


def other_dictionaries(data, tmp):
    """Dictionaries for the same text as ``data``: the same symbols in another order (same
    size, so every tensor shape matches), and with 8 more symbols (other size)."""
    lines = (data / "dict.txt").read_text().splitlines()
    same_size = write(tmp / "same_size.dict.txt", "\n".join(reversed(lines)) + "\n")
    other_size = write(tmp / "other_size.dict.txt", "\n".join(lines + [f"extra{i} 1" for i in range(8)]) + "\n")
    return same_size, other_size


def restore_runs(data, other, root):
    """train_many's runs: 2 updates on ``data``, then --restore-file that checkpoint on each of ``other``."""
    ckpt = root / "first" / "checkpoint_last.pt"
    return [(data, root / "first", "--max-update", "2", "--no-epoch-checkpoints"),
            *[(d, root / f"restore_{name}", "--max-update", "4", "--restore-file", ckpt) for name, d in other.items()],
            (data, root / "restore_layers", "--max-update", "4", "--restore-file", ckpt, "--encoder-layers", "1"),
            (data, root / "restore_width", "--max-update", "4", "--restore-file", ckpt,
             "--encoder-ffn-embed-dim", "48")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad_input")
    data = shared_corpus(tmp_path_factory)
    same_size, other_size = other_dictionaries(data, tmp)
    docs = memorisable_documents()
    c = {"tmp": tmp, "data": data}
    c["blank"] = corpus_of(tmp, "blank", "\n\n\n\n")
    c["zero"] = corpus_of(tmp, "zero", "")
    c["same_size"] = preprocess(tmp, docs, "same_size", srcdict=same_size, in_process=True)
    c["other_size"] = preprocess(tmp, docs, "other_size", srcdict=other_size, in_process=True)
    c["short_long"] = preprocess(tmp, SHORT_AND_LONG, "short_long", valid=VALID, in_process=True)
    # two lists of fairseq-train runs (cli.train_many), side by side
    dict_runs = submit(train_many, restore_runs(data, {k: c[k] for k in ("same_size", "other_size")}, tmp))
    bad_runs = submit(train_many, [
        (tmp / "no_such_dir", tmp / "ckpt_missing", "--max-update", "2"),
        (c["blank"], tmp / "ckpt_blank", "--max-update", "2"),
        (c["zero"], tmp / "ckpt_zero", "--max-update", "2"),
        (data, tmp / "ckpt_positions", "--max-update", "2", "--tokens-per-sample", "1024"),
        (c["short_long"], tmp / "ckpt_short_long", "--max-update", "2", "--log-interval", "1", "--no-save"),
        (data, tmp / "ckpt_metric", "--max-update", "2", "--objective", "ae", "--best-checkpoint-metric", "par_loss"),
        (data, tmp / "ckpt_fp16", "--max-update", "2", "--fp16"),
        (data, tmp / "ckpt_bf16", "--max-update", "2", "--bf16"),
    ])
    names = ("first", "restore same_size", "restore other_size", "restore layers", "restore width", "missing",
             "blank", "zero", "positions", "short_long", "metric", "fp16", "bf16")
    c["run"] = dict(zip(names, dict_runs.result() + bad_runs.result()))
    return c


# ---- command line ----------------------------------------------------------------------

def test_missing_data_directory(runs):
    proc = runs["run"]["missing"]
    assert_fails_with(proc, "data directory not found", str(runs["tmp"] / "no_such_dir"))
    assert checkpoints(runs["tmp"] / "ckpt_missing") == []


@pytest.mark.parametrize("corpus", ["blank", "zero"])
def test_empty_corpus_names_the_binarized_file(corpus, runs):
    """blank: a train text of blank lines only (documents of no token); zero: an empty train
    text (a binarized dataset of no item, a 0-byte train.bin)."""
    proc = runs["run"][corpus]
    assert_fails_with(proc, str(runs[corpus] / "train"))
    assert checkpoints(runs["tmp"] / f"ckpt_{corpus}") == []


def test_tokens_per_sample_over_the_models_positions(runs):
    proc = runs["run"]["positions"]
    assert_fails_with(proc, "--tokens-per-sample 1024", "512")
    assert checkpoints(runs["tmp"] / "ckpt_positions") == []


def test_a_best_checkpoint_metric_the_objective_never_logs_stops_before_the_first_update(runs):
    """MLM (--objective ae) logs no par_loss: fairseq stopped with a KeyError after the first
    validation (after an epoch of training, lost)."""
    proc = runs["run"]["metric"]
    assert_fails_with(proc, "--best-checkpoint-metric par_loss: --objective ae trains no par part, so validation "
                            "never logs it (it logs loss, ae_loss, ae_acc)")
    assert records(proc) == [] and checkpoints(runs["tmp"] / "ckpt_metric") == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="--fp16 is for a machine with CUDA")
def test_fp16_without_a_gpu_stops_before_the_first_update_in_one_line(runs):
    """fairseq's FP16Optimizer asked CUDA for its device: "AssertionError: Torch not compiled with
    CUDA enabled" after the data loaded. The recipes said it in one line; fairseq-train now does too."""
    proc = runs["run"]["fp16"]
    assert_fails_with(proc, "--fp16 needs a CUDA GPU and this machine has none: leave it out (on a CPU with bf16: "
                            "--bf16-autocast)")
    assert records(proc) == [] and checkpoints(runs["tmp"] / "ckpt_fp16") == []


def test_fairseqs_bf16_tpu_mode_without_a_tpu_stops_before_the_first_update_in_one_line(runs):
    """fairseq's --bf16 means TPU: its Trainer stopped with "'NoneType' object has no attribute
    'xla_device'" (a traceback) on a machine without torch_xla."""
    proc = runs["run"]["bf16"]
    assert_fails_with(proc, "--bf16 (and --memory-efficient-bf16) is fairseq's TPU mode and this machine has no "
                            "TPU (torch_xla): for bf16 on a GPU or CPU use --bf16-autocast")
    assert "Traceback" not in proc.stderr
    assert records(proc) == [] and checkpoints(runs["tmp"] / "ckpt_bf16") == []


@pytest.mark.parametrize("other", ["layers", "width"])
def test_restoring_a_checkpoint_of_another_size_names_what_differs_in_one_line(other, runs):
    """fairseq's trainer said "please ensure that the architectures match" after torch's traceback
    of every mismatched tensor."""
    ckpt = runs["tmp"] / "first" / "checkpoint_last.pt"
    proc = runs["run"][f"restore {other}"]
    want = (f"{ckpt} has 2 layers, this model 1" if other == "layers" else
            f"{ckpt}: transformer.layers.0.fc1.weight is [128, 64] there, [48, 64] in this model")
    assert_fails_with(proc, want + ": give the checkpoint's --arch and size flags")
    assert "Traceback" not in proc.stderr and checkpoints(runs["tmp"] / f"restore_{other}") == []


@pytest.mark.parametrize("other", ["same_size", "other_size"])
def test_restoring_a_checkpoint_with_another_dictionary(other, runs):
    first, ckpt = runs["run"]["first"], runs["tmp"] / "first" / "checkpoint_last.pt"
    assert ckpt.is_file() and records(first, "train")  # control: the first run trained and saved
    proc = runs["run"][f"restore {other}"]
    line = assert_fails_with(proc, "dictionary")
    assert "different dictionary" in line and "--srcdict" in line, line
    assert str(ckpt) in proc.stderr  # and fairseq's own last line names the checkpoint
    assert checkpoints(runs["tmp"] / f"restore_{other}") == []


def test_short_documents_are_skipped_and_long_sentences_split_said_in_the_log(runs):
    proc = runs["run"]["short_long"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = log_line(proc, r"\| train: ")
    assert re.search(r"train: \d+ examples from 6 documents; skipped 2 documents of fewer than 2 "
                     r"tokens; split 1 sentences longer than 61 tokens", line), line
    assert "skipped 0 documents" in log_line(proc, r"\| valid: ")
    assert len(records(proc)) == 2  # and it trains on what is left


# ---- in-process: the same checks, without a fairseq-train process ----------------------

def setup_task(data, **overrides):
    return PseudoMaskedLMTask.setup_task(PseudoMaskedLMConfig(data=str(data), seed=1, train_subset="train",
                                                              **overrides))


def test_in_process_missing_data_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="data directory not found"):
        setup_task(tmp_path / "nope")


@pytest.mark.parametrize("text", ["\n\n\n\n", ""])
def test_in_process_empty_corpus_names_the_file(text, tmp_path):
    data = corpus_of(tmp_path, "empty", text)
    task = setup_task(data, tokens_per_sample=64)
    task.load_dataset("valid")  # the valid split is fine
    with pytest.raises(Exception) as err:
        task.load_dataset("train")
    assert str(data / "train") in str(err.value), repr(err.value)


@pytest.mark.parametrize("flag, prob, allowed", [("mask_prob", 0.0, r"\(0, 1\)"), ("mask_prob", 1.0, r"\(0, 1\)"),
                                                ("leave_unmasked_prob", -0.5, r"\[0, 1\]"),
                                                ("random_token_prob", -0.1, r"\[0, 1\]")])
def test_in_process_masking_probabilities_fairseqs_masked_lm_refuses_are_refused(runs, flag, prob, allowed):
    """As fairseq's MaskTokensDataset asserts. Accepted before: --mask-prob 0 trained with loss 0 and
    gradient 0 at every update (and a best checkpoint of loss 0); a negative --leave-unmasked-prob made
    every masked token [MASK]."""
    option = "--" + flag.replace("_", "-")
    with pytest.raises(ValueError, match=rf"^{option} {prob}: must be in {allowed}"):
        setup_task(runs["data"], **{flag: prob})


def test_in_process_tokens_per_sample_over_positions(runs):
    task = setup_task(runs["data"], tokens_per_sample=1024)
    with pytest.raises(ValueError, match="--tokens-per-sample 1024 exceeds the model's --max-positions 512"):
        UniLMv2Model.build_model(UniLMv2Config(), task)
    assert UniLMv2Model.build_model(UniLMv2Config(max_positions=1024), task) is not None


@pytest.mark.parametrize("buckets, distance", [(2, 128), (32, 8)])
def test_in_process_a_relative_table_the_bucket_function_cannot_index_is_refused(runs, buckets, distance):
    """--rel-pos-buckets 2 divided by zero and --max-rel-distance 8 with 32 buckets indexed outside
    the table, both at the first forward (only 0 buckets was refused)."""
    task = setup_task(runs["data"])
    with pytest.raises(ValueError, match=rf"^--rel-pos-buckets {buckets} --max-rel-distance {distance}: a relative "
                                         r"table needs at least 4 buckets and a max distance above buckets // 4"):
        UniLMv2Model.build_model(UniLMv2Config(rel_pos_buckets=buckets, max_rel_distance=distance), task)
    assert UniLMv2Model.build_model(UniLMv2Config(rel_pos_buckets=4, max_rel_distance=2), task) is not None


@pytest.mark.parametrize("objective", ["ae+par", "ae"])
def test_in_process_max_tokens_below_the_largest_example_names_the_least_that_batches(runs, objective):
    """A PAR example counts its appended tokens too: a --max-tokens of --tokens-per-sample batched
    nothing, and fairseq's batching stopped on an assertion ("Sentences lengths should not exceed
    max_tokens")."""
    from fairseq_pmlm.errors import BadInput

    task = setup_task(runs["data"], tokens_per_sample=64, objective=objective)
    task.load_dataset("train")
    ds = task.dataset("train")
    need = max(ds.num_tokens(i) for i in range(len(ds)))
    assert ds.most_tokens() == need and (need > max(ds.sizes)) == (objective == "ae+par")  # (sizes: the contexts)
    assert len(list(task.get_batch_iterator(ds, max_tokens=need).next_epoch_itr(shuffle=False))) > 0
    with pytest.raises(BadInput, match=rf"^--max-tokens {need - 1}: an example of --tokens-per-sample 64 counts up to "
                                       rf"{need} tokens with --objective {re.escape(objective)} .* give --max-tokens "
                                       rf"{need} or more, or --batch-size$"):
        task.get_batch_iterator(ds, max_tokens=need - 1)
    # the valid split is batched by --max-tokens-valid: the error named --max-tokens, which was fine
    task.load_dataset("valid")
    need = task.dataset("valid").most_tokens()
    with pytest.raises(BadInput, match=rf"^--max-tokens-valid {need - 1}: .* give --max-tokens-valid {need} or more, "
                                       "or --batch-size-valid$"):
        task.get_batch_iterator(task.dataset("valid"), max_tokens=need - 1)


def test_in_process_checkpoint_weights_refuse_another_dictionary(runs):
    cfg = UniLMv2Config(encoder_layers=1, encoder_embed_dim=16, encoder_ffn_embed_dim=32, encoder_attention_heads=2)
    a = UniLMv2Model(cfg, setup_task(runs["data"]).dictionary)
    again = UniLMv2Model(cfg, setup_task(runs["data"]).dictionary)
    again.load_state_dict(a.state_dict())  # control: the same dictionary loads
    for other in ("same_size", "other_size"):
        b = UniLMv2Model(cfg, setup_task(runs[other]).dictionary)
        same_size = len(b.transformer.embed_tokens.weight) == len(a.transformer.embed_tokens.weight)
        assert same_size == (other == "same_size")
        with pytest.raises(ValueError, match="different dictionary"):
            b.load_state_dict(a.state_dict())


def test_in_process_skip_and_split_counts_and_no_token_of_a_long_sentence_lost(runs, caplog):
    task = setup_task(runs["short_long"], tokens_per_sample=64)
    with caplog.at_level(logging.INFO, logger="fairseq_pmlm"):
        task.load_dataset("train")
    assert ("from 6 documents; skipped 2 documents of fewer than 2 tokens; split 1 sentences longer than 61 tokens"
            in caplog.text)
    ds = task.datasets["train"]
    assert ds.sizes.max() <= 64
    for i in range(len(ds)):  # every context fits: [SOS] S1 [EOS] S2 [EOS] <= 64 tokens
        assert 5 <= int((ds[i]["kinds"] == CONTEXT).sum()) == ds.sizes[i] <= 64
    # the long sentence is cut into pieces that together are the sentence, in order
    rows = [r for i in range(len(ds)) for r in ds.chunk_pieces(i) if r[0] == LONG_LINE]
    assert [e - s for _, s, e in rows] == [61, 61, 28]
    whole = ds.lines[LONG_LINE][:-1].numpy()
    assert len(whole) == 150
    np.testing.assert_array_equal(np.concatenate([ds.lines[LONG_LINE][s:e].numpy() for _, s, e in rows]), whole)
    # 4 usable documents, the long one packed as [start] | [piece 1] | [piece 2] | [piece 3]
    # (a piece joins a chunk only while it stays <= 61 tokens): 1 + 4 + 1 + 1 examples
    assert len(ds) == 7


def test_pack_documents_counts_on_sizes():
    # sizes include each line's EOS; a blank line (size 1) ends a document
    sizes = [2, 1, 4, 3, 1, 2, 1, 70, 1]  # docs: [1 tok], [3, 2 toks], [1 tok], [69 toks]
    pieces, offsets, stats = pack_documents(sizes, max_tokens=61)
    assert stats == {"documents": 4, "short_documents": 2, "long_sentences": 1}
    chunks = [pieces[offsets[i]:offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
    assert chunks == [[[2, 0, 3], [3, 0, 2]], [[7, 0, 61]], [[7, 61, 69]]]
