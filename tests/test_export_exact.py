"""Exports that behave outside the plugin as the model does inside it (weights/export.py), where an
export used to differ silently: s2s-ft's pseudo token, a dictionary cut to the pieces a corpus uses,
the tokenizer that stands beside the data, and the directories an export reads from.

The model: a random BERT-shaped ``unilmv2_tiny`` (WordPiece vocab trained on standard-library
docstrings) imported with ``--keep-pieces-of`` a few of them, then fine-tuned for a few updates
by ``s2s/finetune.sh`` with ``--pseudo-token mask``. s2s-ft's decoding is re-implemented from its
input layout in ``tests/s2sft_decoding.py``.
"""
import json
import os
import shutil

import pytest
import torch
from s2sft_decoding import S2SFTGreedy
from test_released_weights import stdlib_lines, wordpiece_vocab

from fairseq_pmlm.text import vocab
from fairseq_pmlm.weights import convert, export
from fairseq_pmlm.weights.layouts import ConversionError

from cli import recipe
from helpers import stdlib_docstrings
from tiny_s2s import tiny_s2s

TRAIN_FROM = ["textwrap", "argparse", "json/__init__", "string", "fractions", "shlex"]
TEST_FROM = ["calendar", "heapq", "bisect"]  # unseen modules: words outside the kept rows
MAX_LEN = 8
NEVER_TEXT = ("[CLS]", "[PAD]", "[MASK]", "[P]")  # what the plugin's generator never emits


def write_pairs(raw, pairs_by_split):
    raw.mkdir()
    for split, pairs in pairs_by_split.items():
        (raw / f"{split}.source").write_text("".join(s.replace("\n", " ") + "\n" for s, _ in pairs))
        (raw / f"{split}.target").write_text("".join(t.replace("\n", " ") + "\n" for _, t in pairs))


@pytest.fixture(scope="module")
def cut(tmp_path_factory):
    """(import dir, fine-tuned save dir, data dir, test sources) of the cut, fine-tuned tiny model."""
    from transformers import BertConfig, BertForMaskedLM

    d = tmp_path_factory.mktemp("cut")
    tokens = wordpiece_vocab(stdlib_lines())
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=len(tokens), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=128)).save_pretrained(d / "bert")
    vocab.write_vocab(d / "bert" / "vocab.txt", tokens)
    train = stdlib_docstrings(TRAIN_FROM)[0]
    test = stdlib_docstrings(TEST_FROM)[0][:8]
    write_pairs(d / "raw", {"train": train, "valid": train[:4], "test": test})
    # the dictionary keeps the pieces of the training pairs only, as the main job's does
    info = convert.import_checkpoint(str(d / "bert"), str(d / "plugin"), zero_rel_pos=(32, 128),
                                     keep_pieces_of=[str(d / "raw" / "train.source"), str(d / "raw" / "train.target")])
    assert info["vocab_size"] < len(tokens)
    state = torch.load(d / "plugin" / "model.pt")
    table = state["model"]["transformer.rel_pos_bias.weight"]
    table.copy_(torch.randn(table.shape, generator=torch.Generator().manual_seed(1)))
    torch.save(state, d / "plugin" / "model.pt")
    recipe("s2s/prepare.sh", "--raw", d / "raw", "--name", "pairs", "--pretrain-data", d / "plugin", "--destdir", d,
           "--workers", "1")
    recipe("s2s/finetune.sh", "--preset", "demo", "--data", d / "pairs", "--checkpoint", d / "plugin" / "model.pt",
           "--save-dir", d / "save", "--", "--pseudo-token", "mask", "--max-update", "20", "--batch-size", "8",
           "--disable-validation", "--num-workers", "0")
    return d / "plugin", d / "save", d / "pairs", [s for s, _ in test]


def plugin_greedy(hub, sources):
    """The hub's greedy outputs (beam 1) as vocab.txt spells the pieces, with their log-probabilities."""
    d = hub.src_dict
    out = []
    for h in hub.generate([hub.encode(s) for s in sources], beam=1, max_len_b=MAX_LEN):
        tokens = [t for t in h[0]["tokens"].tolist() if t != d.eos()]
        out.append(([vocab.FAIRSEQ_TO_BERT.get(d[t], d[t]) for t in tokens],
                    h[0]["positional_scores"][:len(tokens)].tolist()))
    return out


def s2sft_greedy(directory, sources, pseudo="[MASK]"):
    ref = S2SFTGreedy(directory)
    return [ref.decode(s, 48, MAX_LEN, banned=NEVER_TEXT, min_len=1, pseudo=pseudo) for s in sources]


def agree(ours, theirs):
    """(outputs equal, max |log-probability difference| where they are)."""
    same = [a[0] == b[0] for a, b in zip(ours, theirs)]
    diffs = [abs(x - y) for a, b, eq in zip(ours, theirs, same) if eq for x, y in zip(a[1], b[1])]
    return sum(same), max(diffs, default=0.0)


def test_s2sft_export_of_a_model_fine_tuned_with_pseudo_token_mask_decodes_in_s2sft_as_in_the_plugin(cut, tmp_path):
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    _, save, _, sources = cut
    info = export.export_checkpoint(str(save / "checkpoint_last.pt"), str(tmp_path / "s2s"), fmt="s2s-ft")
    hub = UniLMv2Model.from_pretrained(str(save), checkpoint_file="checkpoint_last.pt")
    assert hub.model.decoder.pseudo_idx == hub.src_dict.index("[MASK]")  # recorded in the checkpoint
    # the sources hold pieces the cut dictionary dropped (the plugin reads <unk>); s2s-ft's tokenizer
    # reads the export's vocab.txt, the whole vocab again
    assert any(hub.src_dict.unk() in hub.encode(s).tolist() for s in sources)
    assert any("keeps" in n and "whole vocab" in n for n in info["notes"])
    ours, theirs = plugin_greedy(hub, sources), s2sft_greedy(tmp_path / "s2s", sources)
    same, diff = agree(ours, theirs)
    print(f"\ngreedy outputs equal through s2s-ft's layout: {same}/{len(ours)}, max |log-prob diff| {diff:.1e}")
    assert same == len(ours) and diff < 1e-4
    # fed another pseudo row (what an export of a [P] model gets), the same layout tells the difference
    same, diff = agree(ours, s2sft_greedy(tmp_path / "s2s", sources, pseudo="[P]"))
    assert same < len(ours) or diff > 1e-3


def test_s2sft_export_of_a_model_fine_tuned_with_its_own_pseudo_row_is_refused_naming_the_flag(cut, tmp_path, capsys):
    """A [P] model would decode otherwise in s2s-ft (it feeds [MASK]): refused in one line, nothing
    written; --pseudo-as-mask exports it with [P] and [MASK] trading rows, which s2s-ft then decodes
    as the plugin does."""
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    _, save, _, sources = cut
    p_dir = tmp_path / "p-model"
    shutil.copytree(save, p_dir)
    state = torch.load(p_dir / "checkpoint_last.pt", weights_only=False)
    state["cfg"]["model"]["pseudo_token"] = "p"  # as fine-tuned without --pseudo-token mask
    emb = state["model"]["transformer.embed_tokens.weight"]
    emb[-1] = torch.randn(emb.size(1), generator=torch.Generator().manual_seed(2))  # its own [P] row
    torch.save(state, p_dir / "checkpoint_last.pt")
    argv = ["export", str(p_dir / "checkpoint_last.pt"), str(tmp_path / "s2s"), "--format", "s2s-ft"]
    assert convert.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("convert_checkpoint.py: error: ")
    assert "--pseudo-token mask" in err[0] and "--pseudo-as-mask" in err[0]
    assert not (tmp_path / "s2s").exists()
    assert convert.main(argv + ["--pseudo-as-mask"]) == 0
    hub = UniLMv2Model.from_pretrained(str(p_dir), checkpoint_file="checkpoint_last.pt")
    assert hub.model.decoder.pseudo_idx == hub.src_dict.index("[P]")
    same, diff = agree(plugin_greedy(hub, sources), s2sft_greedy(tmp_path / "s2s", sources))
    assert same == len(sources) and diff < 1e-4


def test_hf_export_of_a_cut_dictionary_tokenises_real_text_as_the_plugin_does(cut, tmp_path):
    """AutoTokenizer of the export gives the hub's ids, [UNK] for pieces the cut dropped, where a
    tokenizer of the cut vocab.txt alone splits such a word into pieces that remain."""
    from test_export_hf import compare_with_plugin
    from transformers import BertTokenizer

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    plugin, _, _, _ = cut
    export.export_checkpoint(str(plugin / "model.pt"), str(tmp_path / "hf"))
    lines = [t for t in stdlib_docstrings(TEST_FROM)[1] if 60 < len(t) < 300][:6]
    hub = UniLMv2Model.from_pretrained(str(plugin))
    cut_vocab_only = BertTokenizer(str(tmp_path / "hf" / "vocab.txt"), do_lower_case=True)
    split_otherwise = [w for w in {w for t in lines for w in t.split()}
                       if hub.src_dict.unk() in hub.encode(w).tolist() and "[UNK]" not in cut_vocab_only.tokenize(w)]
    assert split_otherwise  # the case at stake is in these lines
    dh, dl = compare_with_plugin(plugin, tmp_path / "hf", lines)  # asserts that the ids are the hub's
    assert dh <= 1e-5 and dl <= 1e-5


def plain_fairseq_train_checkpoint(ckpt, data_dir, out):
    """``ckpt`` as plain fairseq-train on ``data_dir`` saves it: no --bpe recorded, nothing beside it."""
    out.mkdir()
    state = torch.load(ckpt, weights_only=False)
    state["cfg"]["bpe"] = None
    state["cfg"]["task"]["data"] = str(data_dir)
    torch.save(state, out / "checkpoint_last.pt")
    return out / "checkpoint_last.pt"


def test_hf_export_of_a_cut_dictionary_with_the_original_vocab_is_a_drop_in_for_its_tokenizer(cut, tmp_path):
    """--vocab restores the original tokenizer's ids; for a cut dictionary the export was refused ("the
    given vocab.txt is not the one this model's dictionary was made from", though it was): now the
    whole vocab, each dropped row holding [UNK]'s embedding, as the s2s-ft export does."""
    from transformers import AutoModel, BertTokenizer

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    plugin = cut[0]
    original = plugin.parent / "bert" / "vocab.txt"
    info = export.export_checkpoint(str(plugin / "model.pt"), str(tmp_path / "hf"), original_vocab=str(original))
    assert any("is that whole vocab" in n for n in info["notes"])
    assert vocab.read_vocab(tmp_path / "hf" / "vocab.txt") == vocab.read_vocab(original) + ["[P]"]  # (its own row)
    hub = UniLMv2Model.from_pretrained(str(plugin))
    theirs = BertTokenizer(str(original), do_lower_case=True)
    model = AutoModel.from_pretrained(tmp_path / "hf", trust_remote_code=True).eval()
    for line in [t for t in stdlib_docstrings(TEST_FROM)[1] if 60 < len(t) < 300][:4]:
        enc = theirs(line, return_tensors="pt")
        with torch.no_grad():
            got, want = model(**enc).last_hidden_state[0], hub.extract_features(hub.encode(line))[0]
        assert got.shape == want.shape and (got - want).abs().max() <= 1e-5


def test_export_finds_the_tokenizer_beside_the_data_of_a_checkpoint_that_records_none(cut, tmp_path):
    from transformers import AutoTokenizer

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    plugin, _, _, sources = cut
    ckpt = plain_fairseq_train_checkpoint(plugin / "model.pt", plugin, tmp_path / "pretrained")
    info = export.export_checkpoint(str(ckpt), str(tmp_path / "hf"))
    assert not any("tokenizer" in n for n in info["notes"])
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf", trust_remote_code=True)
    hub = UniLMv2Model.from_pretrained(str(plugin))
    assert [tok(s)["input_ids"] for s in sources] == [hub.encode(s).tolist() for s in sources]
    # a WordPiece pre-training checkpoint exports to s2s-ft (not refused as another tokenizer's pieces)
    info = export.export_checkpoint(str(ckpt), str(tmp_path / "s2s"), fmt="s2s-ft")
    assert any("whole vocab" in n for n in info["notes"])


def test_sentencepiece_checkpoint_without_bpe_exports_its_spm_model_and_s2sft_refuses_it(tmp_path_factory, tmp_path,
                                                                                          capsys):
    _, data, save = tiny_s2s(tmp_path_factory)
    ckpt = plain_fairseq_train_checkpoint(save / "checkpoint_last.pt", data, tmp_path / "pretrained")
    export.export_checkpoint(str(ckpt), str(tmp_path / "hf"))
    assert (tmp_path / "hf" / "spm.model").read_bytes() == (data / "spm.model").read_bytes()
    assert convert.main(["export", str(ckpt), str(tmp_path / "s2s"), "--format", "s2s-ft"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s2s-ft tokenizes with WordPiece only" in err[0] and "sentencepiece" in err[0]
    assert not (tmp_path / "s2s").exists()


@pytest.mark.parametrize("save_dir_has_dictionary", [False, True])
def test_export_with_force_never_replaces_the_data_directory_the_checkpoint_leads_to(cut, tmp_path, capsys,
                                                                                   save_dir_has_dictionary):
    """A save dir records its data-bin (finetune.sh also copies dict.source.txt and the tokenizer
    beside the checkpoint): exporting into that data-bin is refused, --force or not."""
    _, save, pairs, _ = cut
    data = tmp_path / "data-bin"
    shutil.copytree(pairs, data)
    ckpt = tmp_path / "save" / "checkpoint_last.pt"
    ckpt.parent.mkdir()
    state = torch.load(save / "checkpoint_last.pt", weights_only=False)
    state["cfg"]["task"]["data"] = str(data)
    state["cfg"]["bpe"]["bpe_vocab_file"] = str(data / "vocab.txt")
    torch.save(state, ckpt)
    if save_dir_has_dictionary:  # then only the data path the checkpoint records leads to the data-bin
        state["cfg"]["bpe"] = None
        torch.save(state, ckpt)
        for f in ("dict.source.txt", "dict.target.txt", "vocab.txt", "tokenizer_config.json"):
            shutil.copy(data / f, ckpt.parent / f)
    before = sorted(os.listdir(data))
    for force in ([], ["--force"]):
        assert convert.main(["export", str(ckpt), str(data), *force]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "holds the input" in err[0] and str(data) in err[0], err
    assert sorted(os.listdir(data)) == before


def test_hub_decodes_in_fp32_unless_asked_whatever_precision_it_was_trained_in(tmp_path_factory, tmp_path):
    """A checkpoint trained with --bf16-autocast: the hub samples in fp32 as s2s/generate.sh does,
    and in bf16 only with bf16_autocast=True."""
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    _, _, save = tiny_s2s(tmp_path_factory)
    shutil.copytree(save, tmp_path / "bf16")
    state = torch.load(tmp_path / "bf16" / "checkpoint_last.pt", weights_only=False)
    state["cfg"]["task"]["bf16_autocast"] = True
    torch.save(state, tmp_path / "bf16" / "checkpoint_last.pt")
    seen = {}
    for asked in (None, True):
        kwargs = {} if asked is None else {"bf16_autocast": asked}
        hub = UniLMv2Model.from_pretrained(str(tmp_path / "bf16"), checkpoint_file="checkpoint_last.pt", **kwargs)
        def record(*_, asked=asked):  # returns None: the output stays the model's
            seen.setdefault(asked, torch.is_autocast_enabled("cpu"))

        hook = hub.model.transformer.register_forward_hook(record)
        hub.sample(["the cat sat on the mat"], beam=1, max_len_b=3)
        hook.remove()
    assert seen == {None: False, True: True}


def test_s2sft_import_records_mask_as_its_pseudo_token_so_it_exports_back_exactly(cut, tmp_path):
    """s2s-ft fine-tuned it feeding [MASK]: so does the import's decoder, and its s2s-ft export is not refused."""
    _, save, _, _ = cut
    export.export_checkpoint(str(save / "checkpoint_last.pt"), str(tmp_path / "s2s"), fmt="s2s-ft")
    (tmp_path / "output").mkdir()
    ckpt = tmp_path / "output" / "ckpt-1"
    shutil.copytree(tmp_path / "s2s", ckpt)
    sd = torch.load(ckpt / "pytorch_model.bin")
    sd["cls.predictions.decoder_weight"] = sd["bert.embeddings.word_embeddings.weight"].clone()  # s2s-ft's save
    torch.save(sd, ckpt / "pytorch_model.bin")
    (tmp_path / "output" / "train_opt.json").write_text(json.dumps(
        {"max_source_seq_length": 48, "max_target_seq_length": 32, "do_lower_case": True}))
    info = convert.import_checkpoint(str(ckpt), str(tmp_path / "import"))
    assert info["task"] == "pmlm_seq2seq"
    assert torch.load(tmp_path / "import" / "model.pt")["cfg"]["model"]["pseudo_token"] == "mask"
    export.export_checkpoint(str(tmp_path / "import" / "model.pt"), str(tmp_path / "again"), fmt="s2s-ft")


def test_bad_pseudo_as_mask_uses_are_one_line_errors(cut, tmp_path):
    plugin, save, _, _ = cut
    for args, kwargs, needle in (((save / "checkpoint_last.pt",), {"fmt": "s2s-ft"}, "feeds [MASK] as its pseudo"),
                                 ((plugin / "model.pt",), {"fmt": "hf"}, "--pseudo-as-mask is for --format s2s-ft")):
        with pytest.raises(ConversionError) as e:
            export.export_checkpoint(str(args[0]), str(tmp_path / "out"), pseudo_as_mask=True, **kwargs)
        assert "\n" not in str(e.value) and needle in str(e.value)
    assert not (tmp_path / "out").exists()


def test_pseudo_token_mask_in_pre_training_is_refused_in_one_line(tmp_path):
    """Pre-training appends [P] whatever the model option says: the option would be silently ignored."""
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    (tmp_path / "dict.txt").write_text("".join(f"w{i} 1\n" for i in range(20)))
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(tmp_path), "--user-dir", os.path.join(os.path.dirname(os.path.dirname(__file__)), "fairseq_pmlm"),
        "--task", "pseudo_masked_lm", "--arch", "unilmv2_tiny", "--criterion", "pmlm", "--pseudo-token", "mask"])
    cfg = convert_namespace_to_omegaconf(args)
    with pytest.raises(ValueError) as e:
        tasks.setup_task(cfg.task).build_model(cfg.model)
    assert "\n" not in str(e.value) and "--pseudo-token mask is for sequence-to-sequence" in str(e.value)
