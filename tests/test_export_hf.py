"""Exports that keep the plugin's behaviour outside it (weights/export.py): Hugging Face with its
modeling file (trust_remote_code), and s2s-ft's UniLMv2 layout; both import back bit for bit.

Sources: a random ``unilmv2_tiny`` with the default relative table (32 buckets, WordPiece vocab
trained here), and the pinned all-MiniLM-L6-v2 (real weights) with a random relative table, on
real sentences. Max abs differences are printed (``pytest -s``).
"""
import argparse
import json
import os

import pytest
import torch
from test_released_weights import stdlib_lines, wordpiece_vocab

from fairseq_pmlm.arch import TransformerShape
from fairseq_pmlm.text import vocab
from fairseq_pmlm.weights import checkpoint, convert, export
from fairseq_pmlm.weights.layouts import ConversionError

from cli import run_main
from helpers import no_room_for

NAME = "all-minilm-l6-v2"


@pytest.fixture(scope="module")
def vocab_tokens():  # a WordPiece vocab trained on stdlib docstrings, as test_released_weights.py's
    return wordpiece_vocab(stdlib_lines())


def randomize(model_pt, seed, zero_key_bias=False):
    """Every weight of a converted checkpoint random (the relative table too); the dictionary
    digest and the head's record kept. ``zero_key_bias``: as imported UniLMv2 weights have it."""
    state = torch.load(model_pt)
    g = torch.Generator().manual_seed(seed)
    for k, v in state["model"].items():
        if v.is_floating_point() and k not in ("dictionary_digest", "lm_head_trained"):
            v.copy_(torch.randn(v.shape, generator=g) * 0.3)
            if zero_key_bias and k.endswith("attn.key.bias"):
                v.zero_()
    torch.save(state, model_pt)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, vocab_tokens):
    """A unilmv2_tiny (2 x 64, 4 heads) with the default 32-bucket table, every weight random."""
    from transformers import BertConfig, BertForMaskedLM

    d = tmp_path_factory.mktemp("tiny")
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=len(vocab_tokens), hidden_size=64, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=128)).save_pretrained(d / "bert")
    vocab.write_vocab(d / "bert" / "vocab.txt", vocab_tokens)
    info = convert.import_checkpoint(str(d / "bert"), str(d / "plugin"), zero_rel_pos=(32, 128))
    assert info["arch"] == "unilmv2_tiny" and "--no-rel-pos" not in info["flags"]
    randomize(d / "plugin" / "model.pt", seed=1)
    return d / "plugin"


@pytest.fixture(scope="module")
def minilm(tmp_path_factory):
    """all-MiniLM-L6-v2 (layers 0 and 5) with a random relative table: real weights otherwise."""
    d = tmp_path_factory.mktemp("minilm")
    convert.import_checkpoint(NAME, str(d / "table"), layers=[0, 5], zero_rel_pos=(32, 128))
    state = torch.load(d / "table" / "model.pt")
    g = torch.Generator().manual_seed(3)
    table = state["model"]["transformer.rel_pos_bias.weight"]
    table.copy_(torch.randn(table.shape, generator=g))
    torch.save(state, d / "table" / "model.pt")
    convert.import_checkpoint(NAME, str(d / "plain"), layers=[0, 5])
    return d


def sentences(text, n=4):
    return [t for t in text if 60 < len(t) < 300][:n]


def compare_with_plugin(plugin_dir, hf_dir, lines):
    """Max |diff| of the final hidden states and of the AE head's logits between the plugin's hub
    and transformers' Auto classes (trust_remote_code) on ``lines`` (one batch, padded, plus a
    pair of segments), whose token ids must agree."""
    from transformers import AutoModel, AutoModelForMaskedLM, AutoTokenizer

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    hub = UniLMv2Model.from_pretrained(str(plugin_dir))
    tok = AutoTokenizer.from_pretrained(hf_dir, trust_remote_code=True)  # it reads config.json too
    base = AutoModel.from_pretrained(hf_dir, trust_remote_code=True).eval()
    mlm = AutoModelForMaskedLM.from_pretrained(hf_dir, trust_remote_code=True).eval()
    dh = dl = 0.0
    for batch in ([(line,) for line in lines], [(lines[0], lines[1])]):
        enc = tok(*zip(*batch), padding=True, return_tensors="pt")
        ids = [hub.encode(*texts) for texts in batch]
        width = enc["input_ids"].size(1)
        tokens = torch.stack([torch.cat([t, t.new_full((width - len(t),), hub.src_dict.pad())]) for t in ids])
        assert torch.equal(tokens, enc["input_ids"])  # AutoTokenizer gives the plugin's ids
        real = enc["attention_mask"].bool()
        with torch.no_grad():
            want_h = hub.extract_features(tokens)
            want_l, _ = hub.model(tokens, masked_tokens=real)
            got_h = base(**enc).last_hidden_state
            got_l = mlm(**enc).logits
        dh = max(dh, (got_h - want_h)[real].abs().max().item())
        dl = max(dl, (got_l[real] - want_l).abs().max().item())
    return dh, dl


def test_hf_export_reproduces_features_and_mlm_logits_of_a_random_tiny_model(tiny, tmp_path):
    info = export.export_checkpoint(str(tiny / "model.pt"), str(tmp_path / "hf"))
    assert info["rel_pos_buckets"] == 32
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["model_type"] == "unilmv2" and config["auto_map"]["AutoModel"] == "modeling_unilmv2.UniLMv2Model"
    assert (tmp_path / "hf" / "modeling_unilmv2.py").is_file()
    dh, dl = compare_with_plugin(tiny, tmp_path / "hf", sentences(stdlib_lines()))
    print(f"\nunilmv2_tiny -> hf: max |hidden diff| {dh:.2e}, max |MLM logit diff| {dl:.2e}")
    assert dh <= 1e-5 and dl <= 1e-5


def test_hf_export_of_released_minilm_with_a_relative_table_reproduces_it_on_real_sentences(minilm, tmp_path):
    export.export_checkpoint(str(minilm / "table" / "model.pt"), str(tmp_path / "hf"))
    dh, dl = compare_with_plugin(minilm / "table", tmp_path / "hf", sentences(stdlib_lines()))
    print(f"\nall-MiniLM-L6-v2 + relative table -> hf: max |hidden diff| {dh:.2e}, max |MLM logit diff| {dl:.2e}")
    assert dh <= 1e-5 and dl <= 1e-5


def test_hf_export_without_a_relative_table_is_a_plain_bert_that_transformers_own_classes_read(minilm, tmp_path):
    """No auto_map and no modeling code: the Auto classes give transformers' own BERT classes, with
    trust_remote_code too (an auto_map naming our classes for a BertConfig broke AutoModel in
    transformers 5.17), and those compute what the plugin computes."""
    from transformers import AutoModel, AutoModelForMaskedLM, BertForMaskedLM, BertModel

    export.export_checkpoint(str(minilm / "plain" / "model.pt"), str(tmp_path / "hf"))
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["model_type"] == "bert" and "auto_map" not in config
    assert not (tmp_path / "hf" / "modeling_unilmv2.py").exists()
    assert type(AutoModel.from_pretrained(tmp_path / "hf", trust_remote_code=True)) is BertModel
    assert type(AutoModelForMaskedLM.from_pretrained(tmp_path / "hf", trust_remote_code=True)) is BertForMaskedLM
    dh, dl = compare_with_plugin(minilm / "plain", tmp_path / "hf", sentences(stdlib_lines()))
    assert dh <= 1e-5 and dl <= 1e-5
    _, info = BertForMaskedLM.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_the_hf_exports_tokenizer_truncates_text_to_the_models_positions(tiny, tmp_path):
    """A tokenizer_config.json without model_max_length: truncation=True cut nothing, and a long text
    overran the position table (an error in the model) where the source's tokenizer cut it."""
    from transformers import AutoModel, AutoTokenizer

    export.export_checkpoint(str(tiny / "model.pt"), str(tmp_path / "hf"))
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf", trust_remote_code=True)
    enc = tok(" ".join(stdlib_lines())[:20000], truncation=True, return_tensors="pt")
    assert tok.model_max_length == enc["input_ids"].size(1) == 512
    model = AutoModel.from_pretrained(tmp_path / "hf", trust_remote_code=True).eval()
    with torch.no_grad():
        assert model(**enc).last_hidden_state.size(1) == 512


def test_without_trust_remote_code_transformers_refuses_a_model_with_a_relative_table(tiny, tmp_path):
    from transformers import AutoModel

    export.export_checkpoint(str(tiny / "model.pt"), str(tmp_path / "hf"))
    with pytest.raises(ValueError, match="trust_remote_code"):
        AutoModel.from_pretrained(tmp_path / "hf", trust_remote_code=False)


def test_hf_modeling_buckets_equal_the_plugins_on_minus_700_to_700():
    from fairseq_pmlm.modules.relative_position import relative_position_bucket
    from fairseq_pmlm.weights import hf_modeling

    grid = torch.arange(-700, 701)
    for buckets, distance in ((32, 128), (16, 40), (64, 256)):
        assert torch.equal(hf_modeling.relative_position_bucket(grid, buckets, distance),
                           relative_position_bucket(grid, buckets, distance))


def plugin_copy(tiny, tmp_path):
    """tmp_path/plugin: the tiny model's files and its checkpoint state with a zero key bias (the
    released UniLMv2 layout has none, so the s2s-ft export keeps every tensor); (dir, state)."""
    src = tmp_path / "plugin"
    os.makedirs(src)
    for f in ("dict.txt", "vocab.txt", "tokenizer_config.json"):
        (src / f).write_bytes((tiny / f).read_bytes())
    state = torch.load(tiny / "model.pt")
    for k, v in state["model"].items():
        if k.endswith("attn.key.bias"):
            v.zero_()
    return src, state


@pytest.mark.parametrize("head", ["trained head", "untrained head"])
@pytest.mark.parametrize("fmt", export.FORMATS)
def test_export_then_import_gives_back_the_same_checkpoint_bit_for_bit(tiny, tmp_path, fmt, head):
    """The record of an untrained MLM head too (a source without one, as all-MiniLM-L6-v2): the export
    has a head either way, and importing it again recorded it trained (no head warm-up after)."""
    src, state = plugin_copy(tiny, tmp_path)
    state["model"]["lm_head_trained"].fill_(float(head == "trained head"))
    torch.save(state, src / "model.pt")
    info = export.export_checkpoint(str(src / "model.pt"), str(tmp_path / "out"), fmt=fmt)
    assert any("the MLM head is untrained" in n for n in info["notes"]) == (head == "untrained head")
    convert.import_checkpoint(str(tmp_path / "out"), str(tmp_path / "back"))
    a, b = state["model"], torch.load(tmp_path / "back" / "model.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("fmt", export.FORMATS)
def test_a_sequence_to_sequence_checkpoint_imports_back_as_one_with_its_lengths_pseudo_token_and_lenpen(
        tiny, tmp_path, fmt):
    """The export kept no record of the task: imported again a pmlm_seq2seq model came back as a
    pseudo_masked_lm one (same tensors), whose hub refused generate(), and an --format hf one forgot
    its lengths and pseudo token."""
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    src, state = plugin_copy(tiny, tmp_path)
    shape = TransformerShape.of(state["cfg"]["model"])
    record = {"max_source_positions": 40, "max_target_positions": 24, "pseudo_token": "mask",
              "lenpen_formula": "gnmt"}
    state["cfg"] = checkpoint.training_cfg(str(src), shape, "unilmv2_tiny", str(src / "vocab.txt"), False, record)
    torch.save(state, src / "model.pt")
    export.export_checkpoint(str(src / "model.pt"), str(tmp_path / "out"), fmt=fmt)
    info = convert.import_checkpoint(str(tmp_path / "out"), str(tmp_path / "back"))
    back = torch.load(tmp_path / "back" / "model.pt")
    assert back["cfg"]["task"]["_name"] == "pmlm_seq2seq" and back["cfg"]["model"]["pseudo_token"] == "mask"
    assert {k: back["cfg"]["task"][k] for k in record if k != "pseudo_token"} == {
        k: v for k, v in record.items() if k != "pseudo_token"}
    assert any("a sequence-to-sequence model" in n for n in info["notes"])
    a, b = state["model"], back["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    hubs = [UniLMv2Model.from_pretrained(str(d), checkpoint_file="model.pt") for d in (src, tmp_path / "back")]
    outs = [hub.sample(["the cat sat on the mat"], beam=2, max_len_b=5) for hub in hubs]
    assert outs[0] == outs[1]


def test_a_bad_sequence_to_sequence_record_in_config_json_is_one_line_naming_it(tiny, tmp_path):
    export.export_checkpoint(str(tiny / "model.pt"), str(tmp_path / "out"))
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    cfg["pmlm_seq2seq"] = {"max_source_positions": 400, "max_target_positions": 400, "pseudo_token": "mask",
                           "lenpen_formula": "gnmt"}
    (tmp_path / "out" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConversionError) as e:
        convert.import_checkpoint(str(tmp_path / "out"), str(tmp_path / "back"))
    assert str(e.value).startswith("config.json: pmlm_seq2seq: max_source_positions 400 + max_target_positions 400 "
                                   "do not fit the model's")
    assert not (tmp_path / "back").exists()


def test_s2sft_export_is_the_released_unilmv2_layout_s2sft_reads(tiny, tmp_path):
    info = export.export_checkpoint(str(tiny / "model.pt"), str(tmp_path / "s2s"), fmt="s2s-ft")
    sd = torch.load(tmp_path / "s2s" / "pytorch_model.bin")
    config = json.loads((tmp_path / "s2s" / "config.json").read_text())
    assert (config["rel_pos_bins"], config["max_rel_pos"]) == (32, 128)
    p = "bert.encoder.layer.0.attention.self."
    assert sd[p + "qkv_linear.weight"].shape == (3 * 64, 64) and {p + "q_bias", p + "v_bias"} <= sd.keys()
    assert not any(k.endswith(("query.weight", "key.bias")) for k in sd)
    assert sd["bert.encoder.rel_pos_bias.weight"].shape == (4, 32)
    assert vocab.read_vocab(tmp_path / "s2s" / "vocab.txt")[0] == "[PAD]"  # s2s-ft pads with id 0
    # the random model's key bias is not zero: said, since that layout cannot hold it
    assert any("key bias" in n for n in info["notes"])


# ------------------------------------------------------------------ bad input
def test_bad_exports_fail_in_one_line_and_write_nothing(tiny, tmp_path, vocab_tokens):
    ckpt = str(tiny / "model.pt")
    (tmp_path / "taken").mkdir()
    other = tmp_path / "roberta.pt"
    torch.save({"cfg": {"model": {"_name": "roberta_base"}}, "model": {}}, other)
    legacy = tmp_path / "checkpoint_last.pt"  # stock fairseq 0.12's: its args an argparse.Namespace
    torch.save({"args": argparse.Namespace(arch="roberta_base"), "model": {}}, legacy)
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    wrong_vocab = tmp_path / "wrong-vocab.txt"
    vocab.write_vocab(wrong_vocab, vocab_tokens[:-3])
    cases = [((ckpt, str(tmp_path / "taken")), {}, "exists: pass --force to replace it"),
             ((str(other), str(tmp_path / "a")), {}, "is not a checkpoint of this plugin's unilmv2 model"),
             # it said torch's first line (with terminal colour codes), and the hub: "delete it"
             ((str(legacy), str(tmp_path / "a")), {},
              f"checkpoint {legacy} cannot be loaded (torch's weights_only loading refuses the argparse.Namespace in "
              "it): not a checkpoint of this plugin's, but of another program or an older fairseq"),
             ((str(empty), str(tmp_path / "a")), {}, f"checkpoint {empty} is unreadable (an empty file)"),
             ((ckpt, str(tmp_path / "b")), {"original_vocab": str(wrong_vocab)}, "is not the one this model's"),
             ((ckpt, str(tiny)), {"force": True}, "holds the input"),
             ((ckpt, str(tmp_path / "c")), {"fmt": "onnx"}, "--format 'onnx'")]
    for args, kwargs, needle in cases:
        with pytest.raises(ConversionError) as e:
            export.export_checkpoint(*args, **kwargs)
        assert "\n" not in str(e.value) and needle in str(e.value), str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint_last.pt", "empty.pt", "roberta.pt", "taken", "wrong-vocab.txt"]
    assert (tiny / "model.pt").is_file()


def test_a_full_disk_during_export_is_one_line_naming_the_file_and_leaves_nothing(tiny, tmp_path, capsys,
                                                                                 monkeypatch):
    """safetensors reports ENOSPC as its own SafetensorError: a traceback before."""
    import signal

    import safetensors
    import safetensors.torch

    def full_disk(tensors, path, metadata=None):
        with open(path, "wb") as f:
            f.write(b"\0" * 1000)  # as far as it got
        raise safetensors.SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full_disk)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        rc = convert.main(["export", str(tiny / "model.pt"), str(tmp_path / "hf")])
    finally:
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
    err = capsys.readouterr().err
    assert rc == 2 and err == (f"convert_checkpoint.py: error: {tmp_path / 'hf' / 'model.safetensors'}: cannot write "
                               "it: No space left on device\n")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fmt,name", [("hf", "modeling_unilmv2.py"), ("hf", "config.json"), ("hf", "vocab.txt"),
                                      ("hf", "tokenizer.json"), ("s2s-ft", "pytorch_model.bin"),
                                      ("s2s-ft", "config.json"), ("s2s-ft", "vocab.txt")])
def test_a_full_disk_at_any_write_of_every_export_format_is_one_line_naming_the_file(tiny, tmp_path, monkeypatch,
                                                                                     fmt, name):
    """s2s-ft's pytorch_model.bin (torch.save to a path) said torch's "unexpected pos"; a write
    that Python reports without a file name named the hidden staging directory or nothing."""
    no_room_for(name, monkeypatch)
    try:  # (one_line_exit puts the signal handlers back)
        proc = run_main(convert.main, "export", tiny / "model.pt", tmp_path / "out", "--format", fmt)
    finally:
        monkeypatch.undo()
    assert proc.returncode == 2 and proc.stderr == (f"convert_checkpoint.py: error: {tmp_path / 'out' / name}: "
                                                    "cannot write it: No space left on device\n"), proc.stderr
    assert os.listdir(tmp_path) == []


def test_a_full_disk_while_importing_is_one_line_naming_the_checkpoint(tiny, tmp_path, monkeypatch):
    """torch.save to a path said "unexpected pos" (a traceback through the converter)."""
    export.export_checkpoint(str(tiny / "model.pt"), str(tmp_path / "hf"))
    no_room_for("model.pt", monkeypatch)
    try:
        proc = run_main(convert.main, "import", tmp_path / "hf", tmp_path / "back")
    finally:
        monkeypatch.undo()
    assert proc.returncode == 2 and proc.stderr == (f"convert_checkpoint.py: error: {tmp_path / 'back' / 'model.pt'}: "
                                                    "cannot write it: No space left on device\n"), proc.stderr
    assert os.listdir(tmp_path) == ["hf"]


def test_import_never_replaces_a_directory_holding_its_input_even_with_force(tiny, tmp_path):
    export.export_checkpoint(str(tiny / "model.pt"), str(tmp_path / "hf"))
    for out in (tmp_path / "hf", tmp_path):
        with pytest.raises(ConversionError, match="holds the input"):
            convert.import_checkpoint(str(tmp_path / "hf"), str(out), force=True)
    assert (tmp_path / "hf" / "model.safetensors").is_file()


def test_keep_pieces_of_a_file_that_is_not_utf8_names_the_file_and_line(tiny, tmp_path, capsys):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("first line\nsecond line\ncaf\xe9 au lait\n".encode("latin-1"))
    export.export_checkpoint(str(tiny / "model.pt"), str(tmp_path / "hf"))
    assert convert.main(["import", str(tmp_path / "hf"), str(tmp_path / "out"), "--keep-pieces-of", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"convert_checkpoint.py: error: --keep-pieces-of: {bad} line 3: not UTF-8 text (byte 0xe9 at "
                   "byte 4 of the line)"]
    assert not (tmp_path / "out").exists()


def test_keep_pieces_of_a_text_with_sentence_separators_keeps_the_separators_row(tiny, tmp_path):
    """[X_SEP] (CNN/DailyMail's targets) is one token in the data, the vocab's first [unusedN] row: the cut
    dropped that row, so every separator became <unk>, and kept the pieces of its spelling instead."""
    from fairseq_pmlm.data.pmlm_dictionary import load_pmlm_dictionary
    from fairseq_pmlm.text.token_ids import WordPieceIds, lookup_table

    text = tmp_path / "targets.txt"
    text.write_text("the first sentence . [X_SEP] the second one .\nno separator here\n")
    convert.import_checkpoint(str(tiny.parent / "bert"), str(tmp_path / "cut"), keep_pieces_of=[str(text)])
    d = load_pmlm_dictionary(str(tmp_path / "cut"))
    assert "[unused0]" in d.symbols and "sep" not in d.symbols
    ids = WordPieceIds(str(tmp_path / "cut" / "vocab.txt"), False)
    rows = lookup_table(ids.pieces(), d)[ids.encode(["the . [X_SEP] the first ."])[0]]
    assert [d[r] for r in rows][:4] == ["the", ".", "[unused0]", "the"] and d.unk() not in rows


def test_task_heads_are_left_out_of_an_export_with_a_note(tiny, tmp_path):
    from fairseq_pmlm.models.heads import SentenceClassificationHead

    state = torch.load(tiny / "model.pt")
    head = SentenceClassificationHead(64, 64, 3, 0.1).state_dict()
    state["model"].update({f"classification_heads.rte.{k}": v for k, v in head.items()})
    os.makedirs(tmp_path / "glue")
    (tmp_path / "glue" / "dict.txt").write_bytes((tiny / "dict.txt").read_bytes())
    torch.save(state, tmp_path / "glue" / "checkpoint_best.pt")
    info = export.export_checkpoint(str(tmp_path / "glue" / "checkpoint_best.pt"), str(tmp_path / "hf"))
    assert any("left out the task head(s) rte" in n for n in info["notes"])


@pytest.mark.parametrize("layout", ["glue", "pairs"])
def test_without_dict_the_export_reads_the_dictionary_where_the_hub_finds_it(tiny, tmp_path, layout):
    """A GLUE classifier's data keeps its dictionary in input0/ (fairseq's sentence_prediction), a
    pairs task's in dict.SOURCE_LANG.txt: both are found through the checkpoint's recorded data
    directory, as ``from_pretrained`` finds them, with no --dict."""
    state = torch.load(tiny / "model.pt")
    data = tmp_path / "data"
    name = os.path.join("input0", "dict.txt") if layout == "glue" else "dict.src.txt"
    os.makedirs(os.path.dirname(data / name), exist_ok=True)
    (data / name).write_bytes((tiny / "dict.txt").read_bytes())
    state["cfg"]["task"]["data"] = str(data)
    if layout == "pairs":
        state["cfg"]["task"]["source_lang"] = "src"
    os.makedirs(tmp_path / "save")
    torch.save(state, tmp_path / "save" / "checkpoint_best.pt")
    export.export_checkpoint(str(tmp_path / "save" / "checkpoint_best.pt"), str(tmp_path / "hf"))
    export.export_checkpoint(str(tiny / "model.pt"), str(tmp_path / "beside"))  # its dict.txt beside it
    assert (tmp_path / "hf" / "vocab.txt").read_bytes() == (tmp_path / "beside" / "vocab.txt").read_bytes()


def test_sharded_hugging_face_weights_import_as_the_single_file_does(tiny, tmp_path):
    """save_pretrained(max_shard_size=...) writes shards and an index, and no model.safetensors: it
    was "no weights found ... pass --weights", a flag that takes one file."""
    from safetensors.torch import load_file
    from transformers import BertForMaskedLM

    BertForMaskedLM.from_pretrained(tiny.parent / "bert").save_pretrained(tmp_path / "sharded", max_shard_size="100KB")
    for name in ("config.json", "vocab.txt"):
        (tmp_path / "sharded" / name).write_bytes((tiny.parent / "bert" / name).read_bytes())
    shards = sorted(p.name for p in (tmp_path / "sharded").glob("model-*.safetensors"))
    assert len(shards) > 2 and not (tmp_path / "sharded" / "model.safetensors").exists()
    assert load_file(tmp_path / "sharded" / shards[0]).keys() != load_file(tmp_path / "sharded" / shards[1]).keys()
    convert.import_checkpoint(str(tiny.parent / "bert"), str(tmp_path / "whole"))
    convert.import_checkpoint(str(tmp_path / "sharded"), str(tmp_path / "parts"))
    whole, parts = (torch.load(tmp_path / d / "model.pt")["model"] for d in ("whole", "parts"))
    assert whole.keys() == parts.keys() and all(torch.equal(whole[k], parts[k]) for k in whole)
    (tmp_path / "sharded" / shards[1]).unlink()
    with pytest.raises(ConversionError) as e:
        convert.import_checkpoint(str(tmp_path / "sharded"), str(tmp_path / "out"))
    assert str(e.value) == (f"{tmp_path / 'sharded' / shards[1]} missing: model.safetensors.index.json names it as a "
                            "shard of the weights")
    assert not (tmp_path / "out").exists()


def test_cut_short_weights_and_an_output_under_a_file_are_one_line_naming_the_cause(tiny, tmp_path):
    """A download cut short said "OSError: [Errno 22] Invalid argument" (torch's zip reader) or
    safetensors' "incomplete metadata"; an output path under a regular file "File exists"."""
    from safetensors.torch import load_file

    src = tiny.parent / "bert"
    state = load_file(src / "model.safetensors")
    for name, write in (("pytorch_model.bin", lambda p: torch.save(state, p)),
                        ("model.safetensors", lambda p: p.write_bytes((src / "model.safetensors").read_bytes()))):
        d = tmp_path / name.split(".")[1]
        d.mkdir()
        for other in ("config.json", "vocab.txt"):
            (d / other).write_bytes((src / other).read_bytes())
        write(d / name)
        convert.import_checkpoint(str(d), str(tmp_path / "whole"), force=True)  # the whole file imports
        data = (d / name).read_bytes()
        (d / name).write_bytes(data[:len(data) // 2])
        with pytest.raises(ConversionError) as e:
            convert.import_checkpoint(str(d), str(tmp_path / "out"))
        why = ("without the zip directory that ends a whole file" if name.endswith(".bin")
               else f"of the {len(data):,} its header describes")
        assert str(e.value) == f"cannot read weights from {d / name}: truncated: {len(data) // 2:,} bytes {why}"
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ConversionError) as e:
        convert.import_checkpoint(str(src), str(tmp_path / "a-file" / "sub" / "out"))
    assert str(e.value) == (f"{tmp_path / 'a-file' / 'sub' / 'out'}: cannot make its directory: "
                            f"{tmp_path / 'a-file'} is a file, not a directory")
    assert sorted(os.listdir(tmp_path)) == ["a-file", "bin", "safetensors", "whole"]


def test_an_unreadable_tokenizer_vocab_is_named_in_the_s2sft_exports_error(tiny, tmp_path):
    """The error named the dictionary, which was fine."""
    import shutil

    shutil.copytree(tiny, tmp_path / "plugin")
    bad = tmp_path / "plugin" / "vocab.txt"
    state = torch.load(tmp_path / "plugin" / "model.pt")
    state["cfg"]["bpe"]["bpe_vocab_file"] = str(bad)  # its --bpe's vocab: the copy's
    torch.save(state, tmp_path / "plugin" / "model.pt")
    bad.write_bytes(bad.read_bytes() + b"caf\xe9\n")
    with pytest.raises(ConversionError) as e:
        export.export_checkpoint(str(tmp_path / "plugin" / "model.pt"), str(tmp_path / "out"), fmt="s2s-ft")
    assert str(e.value).startswith(f"{bad}: ") and "dict.txt" not in str(e.value), str(e.value)
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_config_that_is_not_json_is_one_line_naming_it(tiny, tmp_path):
    import shutil

    shutil.copytree(tiny.parent / "bert", tmp_path / "bert")
    (tmp_path / "bert" / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ConversionError) as e:
        convert.import_checkpoint(str(tmp_path / "bert"), str(tmp_path / "out"))
    assert str(e.value).startswith(f"{tmp_path / 'bert' / 'tokenizer_config.json'}: cannot read do_lower_case: ")
    assert not (tmp_path / "out").exists()
