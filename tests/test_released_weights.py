"""Starting from released weights (docs/DESIGN.md §7): BERT / UniLMv2 import, export, WordPiece data.

No downloads: the reference models are small randomly initialised ``transformers`` BERTs
saved to disk here, the vocabulary is a WordPiece vocab trained here (``tokenizers``) on
standard-library docstrings, with BERT's special tokens moved to BERT-like rows so the
vocabulary permutation is exercised. Max abs differences are printed (``pytest -s``).
"""
import json
import os
import subprocess

import pytest
import torch

from fairseq_pmlm import recipe_info
from fairseq_pmlm.modules.attention_rule import CONTEXT, PAD
from fairseq_pmlm.text import vocab
from fairseq_pmlm.weights import convert
from fairseq_pmlm.weights.layouts import ConversionError

from cli import run_main
from helpers import stdlib_docstrings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STDLIB_MODULES = ["textwrap", "argparse", "json/__init__", "string", "fractions", "shlex"]
DIM, HEADS, LAYERS, FFN, POSITIONS = 32, 4, 2, 64, 64


def stdlib_lines():
    return stdlib_docstrings(STDLIB_MODULES)[1]


@pytest.fixture(scope="module")
def text():
    return stdlib_lines()


@pytest.fixture(scope="module")
def vocab_tokens(text):
    return wordpiece_vocab(text)


def wordpiece_vocab(text):
    """A trained uncased WordPiece vocab, specials where BERT has them (after [unusedN])."""
    from tokenizers import BertWordPieceTokenizer

    wp = BertWordPieceTokenizer(lowercase=True)
    wp.train_from_iterator([t for t in text if t], vocab_size=600, show_progress=False,
                           special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    learnt = [t for t, _ in sorted(wp.get_vocab().items(), key=lambda kv: kv[1])][5:]
    return ["[PAD]"] + [f"[unused{i}]" for i in range(4)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + learnt


def hf_config(n_vocab, **kw):
    from transformers import BertConfig

    return BertConfig(vocab_size=n_vocab, hidden_size=DIM, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      intermediate_size=FFN, max_position_embeddings=POSITIONS, **kw)


def random_bert(n_vocab, seed=0, **kw):
    """A BertForMaskedLM whose every parameter (LayerNorms and biases too) is random."""
    from transformers import BertForMaskedLM

    torch.manual_seed(seed)
    model = BertForMaskedLM(hf_config(n_vocab, **kw)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory, vocab_tokens):
    d = tmp_path_factory.mktemp("bert")
    model = random_bert(len(vocab_tokens))
    model.save_pretrained(d)
    vocab.write_vocab(d / "vocab.txt", vocab_tokens)
    return d, model


@pytest.fixture(scope="module")
def converted_bert(tmp_path_factory, bert_dir):
    out = tmp_path_factory.mktemp("conv") / "bert-fairseq"
    info = convert.import_checkpoint(str(bert_dir[0]), str(out))
    return out, info


def load_fairseq(out):
    from fairseq import checkpoint_utils

    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(out / "model.pt")],
                                                                      arg_overrides={"data": str(out)})
    return models[0].eval(), task


def batch(n_vocab, seed=0, lengths=(40, 23)):
    """Random BERT ids (specials included), right-padded, two segments."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, n_vocab, (len(lengths), max(lengths)), generator=g)
    mask = torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    types = (torch.arange(max(lengths)) >= 10).long().expand_as(ids) * mask
    return ids * mask, mask, types


def fairseq_ids(bert_ids, mapping):
    inverse = torch.empty(max(mapping.rows) + 1, dtype=torch.long)
    for fairseq_row, bert_row in reversed(list(enumerate(mapping.rows))):  # [MASK] wins over a [P] copy
        inverse[bert_row] = fairseq_row
    return inverse[bert_ids], inverse


def ours(model, ids, mask, types):
    """Hidden states and MLM logits of the plugin model on a plain bidirectional input."""
    T = ids.size(1)
    positions = torch.arange(T).expand_as(ids)
    kinds = torch.where(mask, CONTEXT, PAD)
    with torch.no_grad():
        h = model.transformer(ids, positions, types, kinds, torch.zeros_like(ids))
        return h, model.transformer.lm_head(h)


def test_converted_bert_equals_hugging_face_hidden_states_and_mlm_logits(bert_dir, converted_bert, vocab_tokens, jobs):
    hf, (out, info) = bert_dir[1], converted_bert
    model, task = load_fairseq(out)
    assert model.cfg.no_rel_pos and model.transformer.rel_pos_bias is None  # BERT has no relative table
    mapping = vocab.map_vocab(vocab_tokens)
    ids, mask, types = batch(len(vocab_tokens))
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask.long(), token_type_ids=types, output_hidden_states=True)
    fids, inverse = fairseq_ids(ids, mapping)
    h, logits = ours(model, fids, mask, types)
    dh = (h - ref.hidden_states[-1])[mask].abs().max().item()
    dl = (logits[..., inverse] - ref.logits)[mask].abs().max().item()
    print(f"\nBERT import: max |hidden diff| {dh:.2e}, max |MLM logit diff| {dl:.2e}")
    assert dh < 1e-5 and dl < 1e-5
    # [P] starts as [MASK] (s2s-ft feeds [MASK] ids as its pseudo tokens)
    d = task.source_dictionary
    assert d.symbols[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and d.symbols[-2:] == ["[MASK]", "[P]"]
    w = model.transformer.embed_tokens.weight
    assert torch.equal(w[d.index("[P]")], w[d.index("[MASK]")]) and info["pseudo_from_mask"]


def test_zero_relative_table_keeps_the_bert_outputs_and_loads_with_default_flags(bert_dir, tmp_path, vocab_tokens):
    hf = bert_dir[1]
    info = convert.import_checkpoint(str(bert_dir[0]), str(tmp_path / "z"), zero_rel_pos=(32, 128))
    assert "--no-rel-pos" not in info["flags"]
    model, _ = load_fairseq(tmp_path / "z")
    assert model.transformer.rel_pos_bias is not None and not model.transformer.rel_pos_bias.weight.any()
    ids, mask, types = batch(len(vocab_tokens), seed=11)
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask.long(), token_type_ids=types, output_hidden_states=True)
    h, _ = ours(model, fairseq_ids(ids, vocab.map_vocab(vocab_tokens))[0], mask, types)
    diff = (h - want.hidden_states[-1])[mask].abs().max().item()
    print(f"\nBERT import with a zero relative table: max |hidden diff| {diff:.2e}")
    assert diff < 1e-5


@pytest.mark.parametrize("buckets,distance", [(0, 128), (-2, 128), (32, 8), (3, 128)])
def test_a_zero_relative_table_the_bucket_function_cannot_index_is_refused_naming_the_flag(bert_dir, tmp_path, buckets,
                                                                                            distance):
    """0 buckets wrote a checkpoint the model refuses to build, -2 a traceback; 32 buckets up to distance 8
    (the exact ones) indexed outside the table at the first forward."""
    with pytest.raises(ConversionError) as e:
        convert.import_checkpoint(str(bert_dir[0]), str(tmp_path / "z"), zero_rel_pos=(buckets, distance))
    assert str(e.value).startswith(f"--zero-rel-pos {buckets} {distance}: a relative table needs at least 4 buckets")
    assert not os.listdir(tmp_path)


@pytest.fixture(scope="module")
def bare_bert(tmp_path_factory, bert_dir, vocab_tokens):
    """The import of a bare BertModel (keys without "bert.", a pooler, no MLM head), as
    sentence-transformers' models ship: (BertModel, output directory, import info)."""
    d = tmp_path_factory.mktemp("bare")
    hf = bert_dir[1].bert
    hf.save_pretrained(d / "bare")
    vocab.write_vocab(d / "bare" / "vocab.txt", vocab_tokens)
    info = convert.import_checkpoint(str(d / "bare"), str(d / "out"))
    return hf, d / "out", info


def test_bare_bert_model_without_head_converts_with_the_same_hidden_states(bare_bert, vocab_tokens):
    hf, out, info = bare_bert
    assert any("no MLM head" in n for n in info["notes"])
    model, _ = load_fairseq(out)
    ids, mask, types = batch(len(vocab_tokens), seed=13)
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask.long(), token_type_ids=types).last_hidden_state
    h, _ = ours(model, fairseq_ids(ids, vocab.map_vocab(vocab_tokens))[0], mask, types)
    assert (h - want)[mask].abs().max().item() < 1e-5


def test_the_import_records_whether_the_source_had_a_trained_lm_head(bare_bert, converted_bert):
    assert torch.load(converted_bert[0] / "model.pt")["model"]["lm_head_trained"].item() == 1
    assert torch.load(bare_bert[1] / "model.pt")["model"]["lm_head_trained"].item() == 0
    assert load_fairseq(bare_bert[1])[0].lm_head_trained.item() == 0


def test_a_checkpoint_from_before_the_head_record_loads_with_its_head_counted_trained(bare_bert, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(bare_bert[1], old)
    state = torch.load(old / "model.pt")
    del state["model"]["lm_head_trained"]
    torch.save(state, old / "model.pt")
    model, _ = load_fairseq(old)  # strict loading: the record is filled in, as "trained" (no warm-up by default)
    assert model.lm_head_trained.item() == 1


def test_dict_txt_rebuilds_the_converted_rows_and_the_checkpoint_digest(bert_dir, converted_bert, vocab_tokens):
    from fairseq_pmlm.data.pmlm_dictionary import load_pmlm_dictionary
    from fairseq_pmlm.models.unilmv2 import dictionary_digest

    out, _ = converted_bert
    d = load_pmlm_dictionary(str(out))
    assert d.symbols == vocab.map_vocab(vocab_tokens).symbols
    assert len(d) == len(vocab_tokens) + 1  # + [P]; no padding to a multiple of 8
    state = torch.load(out / "model.pt")  # torch's weights_only=True default
    assert torch.equal(state["model"]["dictionary_digest"], dictionary_digest(d))
    # BERT's specials play fairseq's parts: SOS, pad, EOS, unk rows hold their embeddings
    ours_emb = state["model"]["transformer.embed_tokens.weight"]
    emb = bert_dir[1].bert.embeddings.word_embeddings.weight
    for fairseq_row, token in enumerate(["[CLS]", "[PAD]", "[SEP]", "[UNK]"]):
        assert torch.equal(ours_emb[fairseq_row], emb[vocab_tokens.index(token)])


def save_tokenizer_json(d, tokens, lowercase=True):
    """A Hugging Face tokenizer.json of this WordPiece vocab (the vocab.txt then removed), as
    released models often ship it."""
    from tokenizers import BertWordPieceTokenizer

    BertWordPieceTokenizer({t: i for i, t in enumerate(tokens)}, lowercase=lowercase).save(str(d / "tokenizer.json"))


def test_a_vocab_only_in_tokenizer_json_converts_like_vocab_txt(bert_dir, converted_bert, tmp_path, vocab_tokens):
    import shutil

    src = tmp_path / "hf"
    shutil.copytree(bert_dir[0], src)
    os.remove(src / "vocab.txt")
    save_tokenizer_json(src, vocab_tokens)
    info = convert.import_checkpoint(str(src), str(tmp_path / "out"))
    assert not info["cased"]  # from the normaliser's lowercase
    out = converted_bert[0]
    for f in ("dict.txt", "vocab.txt", "tokenizer_config.json"):
        assert (tmp_path / "out" / f).read_bytes() == (out / f).read_bytes(), f
    a, b = torch.load(tmp_path / "out" / "model.pt"), torch.load(out / "model.pt")
    assert a["model"].keys() == b["model"].keys() and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_kept_layers_are_the_sources_layers_renumbered(bert_dir, tmp_path):
    info = convert.import_checkpoint(str(bert_dir[0]), str(tmp_path / "one"), layers=[1])
    assert "--encoder-layers=1" in info["flags"]
    one = torch.load(tmp_path / "one" / "model.pt")["model"]
    assert not any(k.startswith("transformer.layers.1.") for k in one)
    # layer 0 of the result is layer 1 of the source: its FFN output weight is the source's
    hf = bert_dir[1].state_dict()
    for i, found in ((1, True), (0, False)):
        w = hf[f"bert.encoder.layer.{i}.output.dense.weight"]
        assert any(torch.equal(v, w) for k, v in one.items() if k.startswith("transformer.layers.0.")) is found
    with pytest.raises(ConversionError, match=r"--layers 0,2: need distinct layer numbers in 0..1"):
        convert.import_checkpoint(str(bert_dir[0]), str(tmp_path / "bad"), layers=[0, 2])


def test_recipe_info_gives_the_arch_flags_and_tokenizer_of_a_converted_directory(converted_bert):
    out, info = converted_bert
    def run(*args):
        return run_main(recipe_info.main, *args)

    flags = run("model-flags", out / "model.pt")
    assert flags.returncode == 0 and flags.stdout.split() == ["--arch", info["arch"], *info["flags"]]
    bpe = run("bpe-flags", out)
    # uncased: no --bpe-cased
    assert bpe.stdout.split() == ["--bpe", "bert", "--bpe-vocab-file", str(out / "vocab.txt")]
    missing = run("bpe-flags", out / "nowhere")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "has no tokenizer" in missing.stderr


# ------------------------------------------------------------------ the released UniLMv2 layout
REL_BUCKETS, REL_MAX = 16, 40


def unilmv2_layout(hf_state, n_heads, seed=1):
    """Hugging Face BERT keys -> the released UniLMv2 keys: fused qkv_linear, q_bias and
    v_bias (no key bias), and a random relative table at bert.encoder.rel_pos_bias.weight."""
    sd, g = {}, torch.Generator().manual_seed(seed)
    for k, v in hf_state.items():
        if ".attention.self." in k:
            continue
        sd[k] = v.clone()
    for i in range(LAYERS):
        p = f"bert.encoder.layer.{i}.attention.self."
        sd[p + "qkv_linear.weight"] = torch.cat([hf_state[p + n + ".weight"] for n in ("query", "key", "value")])
        sd[p + "q_bias"], sd[p + "v_bias"] = hf_state[p + "query.bias"].clone(), hf_state[p + "value.bias"].clone()
    sd["bert.encoder.rel_pos_bias.weight"] = torch.randn(n_heads, REL_BUCKETS, generator=g)
    return sd


def reference_unilmv2_forward(sd, ids, mask, types, eps):
    """The released layout's forward, written from the key names alone: BERT post-LN layers,
    scores = q.k / sqrt(d) + table[head, T5 bucket(pos_key - pos_query)], padding masked."""
    from transformers.models.t5.modeling_t5 import T5Attention

    f = torch.nn.functional

    def ln(x, p):
        return f.layer_norm(x, (DIM,), sd[p + ".weight"], sd[p + ".bias"], eps)

    def lin(x, p):
        return f.linear(x, sd[p + ".weight"], sd[p + ".bias"])

    B, T = ids.shape
    pos = torch.arange(T)
    e = "bert.embeddings."
    x = (sd[e + "word_embeddings.weight"][ids] + sd[e + "position_embeddings.weight"][pos]
         + sd[e + "token_type_embeddings.weight"][types])
    x = ln(x, e + "LayerNorm")
    bucket = T5Attention._relative_position_bucket(pos[None, :] - pos[:, None], True, REL_BUCKETS, REL_MAX)
    bias = sd["bert.encoder.rel_pos_bias.weight"][:, bucket]  # [H, T, T]
    bias = bias.unsqueeze(0) + torch.where(mask, 0.0, float("-inf"))[:, None, None, :]
    for i in range(LAYERS):
        p = f"bert.encoder.layer.{i}."
        a = p + "attention.self."
        qkv_bias = torch.cat([sd[a + "q_bias"], torch.zeros_like(sd[a + "v_bias"]), sd[a + "v_bias"]])
        qkv = f.linear(x, sd[a + "qkv_linear.weight"], qkv_bias)
        q, k, v = qkv.view(B, T, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2) / (DIM // HEADS) ** 0.5 + bias).softmax(-1) @ v
        att = lin(att.transpose(1, 2).reshape(B, T, DIM), p + "attention.output.dense")
        x = ln(x + att, p + "attention.output.LayerNorm")
        x = ln(x + lin(f.gelu(lin(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm")
    c = "cls.predictions."
    head = f.layer_norm(f.gelu(lin(x, c + "transform.dense")), (DIM,), sd[c + "transform.LayerNorm.weight"],
                        sd[c + "transform.LayerNorm.bias"], eps)
    return x, head @ sd[e + "word_embeddings.weight"].T + sd[c + "bias"]


@pytest.fixture(scope="module")
def released(tmp_path_factory, vocab_tokens):
    """unilm2-tiny-uncased.bin with -config.json and -vocab.txt beside it, as released."""
    d = tmp_path_factory.mktemp("released")
    eps = 1e-5
    hf = random_bert(len(vocab_tokens), seed=3, layer_norm_eps=eps)
    sd = unilmv2_layout(hf.state_dict(), HEADS)
    sd.pop("cls.predictions.decoder.weight", None)
    sd.pop("cls.predictions.decoder.bias", None)
    torch.save(sd, d / "unilm2-tiny-uncased.bin")
    config = {**hf_config(len(vocab_tokens), layer_norm_eps=eps).to_dict(),
              "rel_pos_bins": REL_BUCKETS, "max_rel_pos": REL_MAX}
    (d / "unilm2-tiny-uncased-config.json").write_text(json.dumps(config))
    vocab.write_vocab(d / "unilm2-tiny-uncased-vocab.txt", vocab_tokens)
    out = d / "converted"
    info = convert.import_checkpoint(str(d / "unilm2-tiny-uncased.bin"), str(out))
    return d, sd, out, info, eps


def test_released_unilmv2_layout_reproduces_a_reference_forward_of_that_layout(released, vocab_tokens):
    d, sd, out, info, eps = released
    assert info["layout"] == "unilmv2"
    model, _ = load_fairseq(out)
    assert model.cfg.rel_pos_buckets == REL_BUCKETS and model.cfg.max_rel_distance == REL_MAX
    assert model.cfg.layernorm_eps == eps  # read from the config, not BERT's 1e-12
    ids, mask, types = batch(len(vocab_tokens), seed=5, lengths=(POSITIONS, 37))  # distances up to 63 > REL_MAX
    ref_h, ref_logits = reference_unilmv2_forward(sd, ids, mask, types, eps)
    fids, inverse = fairseq_ids(ids, vocab.map_vocab(vocab_tokens))
    h, logits = ours(model, fids, mask, types)
    dh = (h - ref_h)[mask].abs().max().item()
    dl = (logits[..., inverse] - ref_logits)[mask].abs().max().item()
    print(f"\nUniLMv2 layout: max |hidden diff| {dh:.2e}, max |MLM logit diff| {dl:.2e}")
    assert dh < 1e-5 and dl < 1e-5


@pytest.mark.parametrize("buckets,max_distance", [(32, 128), (16, 40), (64, 256)])
def test_bucket_function_equals_transformers_t5_bidirectional(buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    from fairseq_pmlm.modules.relative_position import relative_position_bucket

    grid = torch.arange(-700, 701).view(-1, 1) + torch.zeros(1, 3, dtype=torch.long)  # any shape
    want = T5Attention._relative_position_bucket(grid, True, buckets, max_distance)
    assert torch.equal(relative_position_bucket(grid, buckets, max_distance), want)


# ------------------------------------------------------------------ export and round trip
def test_export_then_import_gives_identical_weights_and_outputs(released, tmp_path, vocab_tokens):
    _, _, out, _, _ = released
    hf_dir, back = tmp_path / "hf", tmp_path / "back"
    convert.export_checkpoint(str(out / "model.pt"), str(hf_dir))
    cfg = json.loads((hf_dir / "config.json").read_text())
    assert cfg["rel_pos_bins"] == REL_BUCKETS and cfg["max_rel_pos"] == REL_MAX
    # with a relative table it is no BERT: its own model type and modeling file (test_export_hf.py)
    assert cfg["model_type"] == "unilmv2" and (hf_dir / cfg["auto_map"]["AutoModel"].split(".")[0]).with_suffix(
        ".py").is_file()
    convert.import_checkpoint(str(hf_dir), str(back))
    a, b = torch.load(out / "model.pt")["model"], torch.load(back / "model.pt")["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    (m1, _), (m2, _) = load_fairseq(out), load_fairseq(back)
    ids, mask, types = batch(len(vocab_tokens), seed=7)
    fids, _ = fairseq_ids(ids, vocab.map_vocab(vocab_tokens))
    (h1, l1), (h2, l2) = ours(m1, fids, mask, types), ours(m2, fids, mask, types)
    print(f"\nround trip: max |hidden diff| {(h1 - h2)[mask].abs().max().item():.2e}, "
          f"max |logit diff| {(l1 - l2)[mask].abs().max().item():.2e}")
    assert torch.equal(h1[mask], h2[mask]) and torch.equal(l1[mask], l2[mask])


def test_export_with_the_original_vocab_restores_bert_ids_and_hugging_face_outputs(bert_dir, converted_bert, tmp_path,
                                                                                    vocab_tokens):
    from transformers import BertForMaskedLM

    (src_dir, hf), (out, _) = bert_dir, converted_bert
    convert.export_checkpoint(str(out / "model.pt"), str(tmp_path / "hf"), original_vocab=str(src_dir / "vocab.txt"))
    assert vocab.read_vocab(tmp_path / "hf" / "vocab.txt") == vocab_tokens + ["[P]"]
    again = BertForMaskedLM.from_pretrained(tmp_path / "hf").eval()
    ids, mask, types = batch(len(vocab_tokens), seed=9)
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=mask.long(), token_type_ids=types).logits
        got = again(input_ids=ids, attention_mask=mask.long(), token_type_ids=types).logits
    diff = (got[..., : len(vocab_tokens)] - want)[mask].abs().max().item()
    print(f"\nBERT -> fairseq -> BERT: max |logit diff| {diff:.2e}")
    assert diff == 0.0


# ------------------------------------------------------------------ WordPiece data path
def split_on_a_document_boundary(text):
    cut = text.index("", len(text) // 2) + 1
    return text[:cut], text[cut:]


def recipe(text, out, d):
    """prepare_data.sh --wordpiece-vocab on stdlib docstrings (the converted model's vocab)."""
    import cli

    train, valid = split_on_a_document_boundary(text)
    (d / "train.txt").write_text("\n".join(train) + "\n")
    (d / "valid.txt").write_text("\n".join(valid) + "\n")
    proc = subprocess.run(
        ["bash", os.path.join(REPO, "scripts", "prepare_data.sh"), "--train", d / "train.txt",
         "--valid", d / "valid.txt", "--name", "wp", "--destdir", d, "--wordpiece-vocab", out / "vocab.txt",
         "--srcdict", out / "dict.txt", "--workers", "1"],
        capture_output=True, text=True, env={**os.environ, **cli.ENV},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return d / "wp", train


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, text, converted_bert, bare_bert):
    """The slow subprocesses, started in cli.py's two-worker pool as soon as the converted
    model exists (the first test asks for this fixture), so they run side by side and
    while the in-process tests do: the recipe, and fairseq-train from the converted
    checkpoints (--finetune-from-model and --restore-file; from the head-less import with
    the default head warm-up, an explicit one and none; in one process) on the same text
    WordPiece-encoded and binarized in-process."""
    from fairseq_pmlm.text.wordpiece import WordPieceEncoder

    import cli

    out, info = converted_bert
    d = tmp_path_factory.mktemp("wp")
    enc = WordPieceEncoder(str(out / "vocab.txt"))
    for name, lines in zip(("train", "valid"), split_on_a_document_boundary(text)):
        (d / f"{name}.pieces").write_text("\n".join(enc.encode_lines(lines)) + "\n")
    data = cli.binarize(d / "train.pieces", d / "valid.pieces", d / "bin", srcdict=out / "dict.txt", in_process=True)
    model = ["--arch", info["arch"], *info["flags"], "--log-interval", "1"]
    flags = [*model, "--max-update", "1", "--no-save"]
    # a checkpoint after every update (the same dictionary: the bare import's dict.txt is this one)
    saved = [*model, "--no-epoch-checkpoints", "--save-interval-updates", "1", "--max-update", "2"]
    bare = bare_bert[1] / "model.pt"
    runs = [(data, d / "ft", "--finetune-from-model", out / "model.pt", *saved),
            (data, d / "rs", "--restore-file", out / "model.pt", *flags),
            (data, d / "bare_default", "--finetune-from-model", bare, *saved),
            (data, d / "bare_1", "--finetune-from-model", bare, "--head-warmup-updates", "1", *saved),
            (data, d / "bare_0", "--finetune-from-model", bare, "--head-warmup-updates", "0", *saved)]
    return {"recipe": cli.submit(recipe, text, out, d), "training": cli.submit(cli.train_many, runs), "dir": d,
            "pairs": seq2seq_pairs(text, enc, out, d / "s2s")}


def seq2seq_pairs(text, enc, out, d):
    """A few (docstring sentence -> its first words) pairs, WordPiece-encoded and binarized
    in-process with the converted dictionary on both sides, for fairseq-generate."""
    import cli

    d.mkdir()
    heads = [" ".join(t.split()[:4]) for t in text]
    fits = [6 < len(p.split()) <= 40 and len(h.split()) <= 12  # 48 source and 16 target positions
            for p, h in zip(enc.encode_lines(text), enc.encode_lines(heads))]
    src = [t for t, ok in zip(text, fits) if ok][:12]
    tgt = [h for h, ok in zip(heads, fits) if ok][:12]
    for lang, lines in (("source", src), ("target", tgt)):
        (d / f"test.{lang}").write_text("\n".join(enc.encode_lines(lines)) + "\n")
    cli.preprocess_in_process("--source-lang", "source", "--target-lang", "target", "--testpref", d / "test",
                              "--destdir", d / "bin", "--srcdict", out / "dict.txt", "--tgtdict", out / "dict.txt",
                              "--workers", "1")
    return d / "bin", src, tgt


@pytest.fixture(scope="module")
def wordpiece_data(jobs):
    return jobs["recipe"].result()


def test_wordpiece_recipe_ids_equal_bert_tokenizer_ids_on_stdlib_docstrings(wordpiece_data, vocab_tokens):
    from fairseq.data import Dictionary, data_utils
    from transformers import BertTokenizer

    data, lines = wordpiece_data
    d = Dictionary.load(str(data / "dict.txt"))
    ds = data_utils.load_indexed_dataset(str(data / "train"), d)
    assert len(ds) == len(lines)
    tok = BertTokenizer(str(data / "vocab.txt"), do_lower_case=True)
    mapping = vocab.map_vocab(vocab_tokens)
    n_tokens = n_continuations = 0
    for i, line in enumerate(lines):
        want = tok(line, add_special_tokens=False)["input_ids"] if line else []
        got = [mapping.rows[t] for t in ds[i][:-1].tolist()]  # minus the EOS fairseq appends
        assert got == want, f"line {i}: {line!r}"
        n_tokens += len(want)
        n_continuations += sum(vocab_tokens[t].startswith("##") for t in want)
    assert n_tokens > 5000 and n_continuations > 500  # real text, with words split into pieces


def test_bert_bpe_detokenises_recipe_pieces_as_the_tokenizer_decodes(wordpiece_data):
    """fairseq-generate --bpe bert --bpe-vocab-file DATA/vocab.txt turns hypotheses back into text."""
    from argparse import Namespace

    from fairseq.data import Dictionary, data_utils, encoders
    from transformers import BertTokenizer

    data, lines = wordpiece_data
    d = Dictionary.load(str(data / "dict.txt"))
    ds = data_utils.load_indexed_dataset(str(data / "train"), d)
    bpe = encoders.build_bpe(Namespace(bpe="bert", bpe_vocab_file=str(data / "vocab.txt"), bpe_cased=False))
    tok = BertTokenizer(str(data / "vocab.txt"), do_lower_case=True)
    for i in [i for i, line in enumerate(lines) if line][:50]:
        text = bpe.decode(d.string(ds[i]))
        ids = tok(lines[i], add_special_tokens=False)["input_ids"]
        assert " ##" not in text and text == tok.decode(ids, clean_up_tokenization_spaces=True)


def fairseq_generate(*argv):
    """fairseq-generate's own main() in-process (fairseq is imported already: saves a
    subprocess's 5-10 s), without a data-loading worker process (fairseq's default of one left
    its DataLoader iterator and worker alive in the test process until a later garbage
    collection, and a signal that a later test sends itself could land in that iterator's
    shutdown); returns what it printed."""
    import contextlib
    import io

    from fairseq import options
    from fairseq_cli import generate

    args = options.parse_args_and_arch(options.get_generation_parser(), [*map(str, argv), "--num-workers", "0"])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        generate.main(args)
    return buf.getvalue()


def test_fairseq_generate_with_bert_bpe_prints_detokenised_sources_and_targets(jobs, converted_bert):
    from transformers import BertTokenizer

    out = converted_bert[0]
    bin_dir, src, tgt = jobs["pairs"]
    stdout = fairseq_generate(
        bin_dir, "--user-dir", os.path.join(REPO, "fairseq_pmlm"), "--task", "pmlm_seq2seq", "--path", out / "model.pt",
        "--gen-subset", "test", "--max-source-positions", "48", "--max-target-positions", "16", "--beam", "2",
        "--max-len-b", "4", "--batch-size", "16", "--cpu", "--bpe", "bert", "--bpe-vocab-file", out / "vocab.txt",
        "--required-batch-size-multiple", "1",  # this fairseq build drops a last batch smaller than it (default 8)
    )
    tok = BertTokenizer(str(out / "vocab.txt"), do_lower_case=True)
    def detok(s):
        return tok.decode(tok(s, add_special_tokens=False)["input_ids"], clean_up_tokenization_spaces=True)

    for tag, lines in (("S", src), ("T", tgt)):
        got = {int(r.split("\t")[0][2:]): r.split("\t")[1] for r in stdout.splitlines() if r.startswith(tag + "-")}
        assert got == {i: detok(line) for i, line in enumerate(lines)}
    assert sum(r.startswith("D-") for r in stdout.splitlines()) == len(src)


def test_converted_checkpoint_trains_with_finetune_from_model_and_restore_file(jobs):
    import cli

    finetune, restore = jobs["training"].result()[:2]
    for proc in finetune, restore:
        assert proc.returncode == 0, proc.stdout[-3000:]
        first = cli.records(proc)[0]
        assert first["num_updates"] == "1" and 0 < float(first["loss"]) < 100
    assert "loading pretrained model" in finetune.stdout
    assert "Loaded checkpoint" in restore.stdout and "@ 0 updates" in restore.stdout


HEAD_PARAMETERS = ["transformer.lm_head.bias", "transformer.lm_head.dense.bias", "transformer.lm_head.dense.weight",
                   "transformer.lm_head.ln.bias", "transformer.lm_head.ln.weight"]


def changed_after_each_update(start, save_dir):
    """{update: (parameters changed since the start, its lm_head_trained record)} of a run that
    saved after every update (the tied output projection is the embedding: counted once)."""
    before = torch.load(start)["model"]
    params = [k for k, v in before.items() if v.is_floating_point()
              and k not in ("transformer.lm_head.weight", "dictionary_digest", "lm_head_trained")]
    out = {}
    for path in save_dir.glob("checkpoint_*_*.pt"):
        after = torch.load(path)["model"]
        update = int(path.stem.rsplit("_", 1)[1])
        out[update] = ({k for k in params if not torch.equal(after[k], before[k])}, bool(after["lm_head_trained"]))
    return out, set(params)


def test_a_start_without_a_trained_lm_head_trains_the_head_alone_by_default(jobs, bare_bert):
    """The default warm-up (50 updates) on a head-less import: updates 1 and 2 change the LM
    head's own parameters and nothing else, the checkpoints still record the head untrained (a
    resume goes on with the warm-up), and the log says so."""
    import cli

    proc = jobs["training"].result()[2]
    assert proc.returncode == 0, proc.stdout[-3000:]
    cli.log_line(proc, r"LM head is new: training it alone for the first 50 updates \(counted in --max-update")
    cli.log_line(proc, r"--max-update 2: within the 50 head warm-up updates, only the LM head trains")
    changed, _ = changed_after_each_update(bare_bert[1] / "model.pt", jobs["dir"] / "bare_default")
    assert changed == {1: (set(HEAD_PARAMETERS), False), 2: (set(HEAD_PARAMETERS), False)}


def test_an_explicit_head_warmup_sets_its_length_and_zero_turns_it_off(jobs, bare_bert):
    """--head-warmup-updates 1: update 1 trains the head alone and ends the warm-up (the head is
    recorded trained), update 2 trains everything; --head-warmup-updates 0: everything from update 1."""
    import cli

    one, zero = jobs["training"].result()[3:5]
    assert one.returncode == 0 and zero.returncode == 0, one.stdout[-3000:] + zero.stdout[-3000:]
    cli.log_line(one, r"LM head is new: training it alone for the first 1 update \(")
    cli.log_line(zero, r"LM head is new: no head warm-up \(--head-warmup-updates 0\)")
    changed, params = changed_after_each_update(bare_bert[1] / "model.pt", jobs["dir"] / "bare_1")
    assert changed[1] == (set(HEAD_PARAMETERS), True)
    assert changed[2][0] == params
    changed, params = changed_after_each_update(bare_bert[1] / "model.pt", jobs["dir"] / "bare_0")
    assert changed[1] == (params, True)


def test_a_start_with_a_trained_lm_head_gets_no_warm_up_by_default(jobs, converted_bert):
    """An import of a BertForMaskedLM (its MLM head came along): every parameter changes at update 1."""
    import cli

    proc = jobs["training"].result()[0]
    cli.log_line(proc, r"LM head is trained \(or as new as the rest of the model\): no head warm-up")
    changed, params = changed_after_each_update(converted_bert[0] / "model.pt", jobs["dir"] / "ft")
    assert set(HEAD_PARAMETERS) < params
    assert changed[1] == (params, True)


def test_hub_interface_encodes_with_wordpiece_and_extracts_the_converted_features(converted_bert, text, vocab_tokens):
    from transformers import BertTokenizer

    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    out, _ = converted_bert
    hub = UniLMv2Model.from_pretrained(str(out), checkpoint_file="model.pt")
    tok = BertTokenizer(str(out / "vocab.txt"), do_lower_case=True)
    line = next(t for t in text if len(t) > 80)
    ids = hub.encode(line)
    mapping = vocab.map_vocab(vocab_tokens)
    assert [mapping.rows[t] for t in ids[1:-1].tolist()] == tok(line, add_special_tokens=False)["input_ids"]
    assert ids[0].item() == hub.src_dict.bos() and ids[-1].item() == hub.src_dict.eos()


# ------------------------------------------------------------------ bad input
def _break(tmp_path, bert_dir, edit_state=None, edit_config=None, extra_vocab=0, vocab_as="vocab.txt"):
    """A copy of the BERT directory with one thing wrong."""
    from safetensors.torch import load_file, save_file

    src = bert_dir[0]
    d = tmp_path / "broken"
    d.mkdir()
    sd = load_file(src / "model.safetensors")
    if edit_state:
        edit_state(sd)
    save_file(sd, d / "model.safetensors")
    cfg = json.loads((src / "config.json").read_text())
    if edit_config:
        edit_config(cfg)
    (d / "config.json").write_text(json.dumps(cfg))
    tokens = vocab.read_vocab(src / "vocab.txt") + [f"extra{i}" for i in range(extra_vocab)]
    if vocab_as == "vocab.txt":
        vocab.write_vocab(d / "vocab.txt", tokens)
    elif vocab_as == "bpe":  # a byte-level BPE tokenizer.json (GPT-2/RoBERTa style)
        from tokenizers import Tokenizer, models

        Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, [])).save(str(d / "tokenizer.json"))
    return d


def _rename(sd, old, new):
    sd[new] = sd.pop(old)


BAD = {
    "renamed_key_is_named_as_missing": (
        dict(edit_state=lambda sd: _rename(sd, "bert.encoder.layer.1.output.dense.weight",
                                           "bert.encoder.layer.1.output.dense_x.weight")),
        ["missing key(s)", "bert.encoder.layer.1.output.dense.weight"]),
    "foreign_key_is_named": (dict(edit_state=lambda sd: sd.__setitem__("bert.encoder.adapter.weight", torch.zeros(2))),
                             ["unknown key(s)", "bert.encoder.adapter.weight"]),
    "vocab_size_disagrees_with_embedding": (dict(extra_vocab=3), ["vocab.txt has", "rows"]),
    "config_layers_disagree_with_checkpoint": (dict(edit_config=lambda c: c.__setitem__("num_hidden_layers", 3)),
                                               ["num_hidden_layers 3", "layers 0, 1"]),
    "config_hidden_disagrees_with_weights": (
        dict(edit_config=lambda c: c.update(hidden_size=48, num_attention_heads=4)),
        ["has shape", "config.json implies"]),
    "announced_relative_table_missing": (dict(edit_config=lambda c: c.update(rel_pos_bins=32, max_rel_pos=128)),
                                         ["missing key(s)", "bert.encoder.rel_pos_bias.weight"]),
    "relative_table_the_buckets_cannot_index": (
        dict(edit_config=lambda c: c.update(rel_pos_bins=32, max_rel_pos=8),
             edit_state=lambda sd: sd.__setitem__("bert.encoder.rel_pos_bias.weight", torch.zeros(HEADS, 32))),
        ["config.json: rel_pos_bins 32, max_rel_pos 8: a relative table needs at least 4 buckets"]),
    "unsupported_activation": (dict(edit_config=lambda c: c.__setitem__("hidden_act", "gelu_new")),
                               ["hidden_act 'gelu_new'"]),
    # a bare RobertaModel's keys are a BertModel's: it converted, every output off (positions from pad + 1)
    "a_roberta_with_bert_keys": (dict(edit_config=lambda c: c.__setitem__("model_type", "roberta")),
                                 ["config.json: model_type 'roberta' is not BERT's layout (converted: bert, "
                                  "electra, unilm, unilmv2)"]),
    "neither_vocab_txt_nor_tokenizer_json": (dict(vocab_as=None), ["no vocab.txt or tokenizer.json found"]),
    "tokenizer_json_of_another_kind": (dict(vocab_as="bpe"), ["tokenizer.json: a BPE tokenizer, not WordPiece"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_fails_with_one_clear_line_before_writing_anything(case, tmp_path, bert_dir):
    kwargs, needles = BAD[case]
    src = _break(tmp_path, bert_dir, **kwargs)
    with pytest.raises(ConversionError) as e:
        convert.import_checkpoint(str(src), str(tmp_path / "out"))
    msg = str(e.value)
    assert "\n" not in msg and all(n in msg for n in needles), msg
    assert sorted(os.listdir(tmp_path)) == ["broken"]  # no output, no temp directory


def test_arch_that_disagrees_with_the_config_is_refused(tmp_path, bert_dir):
    with pytest.raises(ConversionError, match=r"--arch unilmv2_base is .* but config.json says \(2, 32, 64, 4\)"):
        convert.import_checkpoint(str(bert_dir[0]), str(tmp_path / "out"), arch="unilmv2_base")
    assert not os.listdir(tmp_path)


def test_a_failure_while_writing_leaves_no_partial_output(tmp_path, bert_dir, monkeypatch):
    from fairseq_pmlm.weights import checkpoint

    def disk_full(state, path):
        with open(path, "wb") as f:
            f.write(b"partial")
        raise OSError("No space left on device")

    monkeypatch.setattr(checkpoint, "save", disk_full)
    with pytest.raises(OSError):
        convert.import_checkpoint(str(bert_dir[0]), str(tmp_path / "out"))
    assert not os.listdir(tmp_path)


def test_command_line_reports_errors_in_one_line_and_exit_code_2(tmp_path, bert_dir, capsys):
    src = _break(tmp_path, bert_dir, extra_vocab=1)
    assert convert.main(["import", str(src), str(tmp_path / "out")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    n = len(vocab.read_vocab(bert_dir[0] / "vocab.txt"))
    assert errors == [f"convert_checkpoint.py: error: vocab.txt has {n + 1} tokens but the word embedding has {n} rows"]
    assert not (tmp_path / "out").exists()


def test_the_exports_tokenizer_gives_a_token_listed_twice_the_row_the_plugin_gives(tmp_path):
    """The export's tokenizer.json gave the first, shadowed row of a duplicated token."""
    from tokenizers import Tokenizer

    from fairseq_pmlm.text import wordpiece

    tokens = ["[PAD]", "a", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "b", "a", "d"]
    vocab.write_vocab(tmp_path / "vocab.txt", tokens)
    m = vocab.map_vocab(tokens)
    names, _ = vocab.symbols_to_vocab(m.symbols, None)  # the export's vocab.txt, without --vocab
    plugin = wordpiece.WordPieceEncoder(str(tmp_path / "vocab.txt"), cased=False).encode_lines(["a b a d"])[0].split()
    exported = Tokenizer.from_str(wordpiece.tokenizer_json(str(tmp_path / "vocab.txt"), False, names))
    assert [names[i] for i in exported.encode("a b a d", add_special_tokens=False).ids] == plugin == \
        ["a", "b", "a", "d"]


def test_a_special_tokens_spelling_in_text_is_text_in_the_data_the_hub_squad_and_the_export(tmp_path):
    """transformers' default reads "[SEP]" in text as the control token: the data had an [EOS] inside
    a line (and a real [MASK], a real [SEP] in a SQuAD question), while fairseq's --bpe bert (the hub,
    fairseq-generate) gave <unk> and [MASK]: every path now splits it as BERT's own tokenizer does."""
    from fairseq.data.encoders.hf_bert_bpe import BertBPE, BertBPEConfig
    from tokenizers import Tokenizer

    from fairseq_pmlm.data.span_alignment import align
    from fairseq_pmlm.text import token_ids, tokenizer_files, wordpiece

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[", "]", "sep", "mask", "cl", "##s", "a", "b"]
    vocab.write_vocab(tmp_path / "vocab.txt", tokens)
    (tmp_path / "dict.txt").write_text(vocab.map_vocab(tokens).dict_txt())
    tokenizer_files.write_casing(tmp_path, False)
    text = "a [SEP] b [MASK] [CLS]"
    want = "a [ sep ] b [ mask ] [ cl ##s ]".split()
    assert wordpiece.WordPieceEncoder(str(tmp_path / "vocab.txt")).encode_lines([text])[0].split() == want  # data
    ids = token_ids.WordPieceIds(str(tmp_path / "vocab.txt"), False)  # the data-bin engine
    assert [ids.symbols[i] for i in ids.encode([text])[0]] == want
    hub_bpe = BertBPE(BertBPEConfig(bpe_vocab_file=str(tmp_path / "vocab.txt")))  # the hub, fairseq-generate
    assert hub_bpe.encode(text).split() == want
    assert align(tokenizer_files.piece_encoder(tmp_path), text).pieces == want  # SQuAD passages
    exported = Tokenizer.from_str(wordpiece.tokenizer_json(str(tmp_path / "vocab.txt"), False, tokens))
    exported.encode_special_tokens = True  # (what tokenizer_config.json's split_special_tokens sets)
    assert exported.encode(text, add_special_tokens=False).tokens == want


def test_vocab_module_spells_the_tasks_symbols():
    from fairseq_pmlm.tasks import pseudo_masked_lm

    assert (vocab.MASK_SYMBOL, vocab.PSEUDO_SYMBOL) == (pseudo_masked_lm.MASK_SYMBOL, pseudo_masked_lm.PSEUDO_SYMBOL)


def test_vocab_rows_fairseq_cannot_name_keep_their_weights_under_placeholders():
    tokens = ["[PAD]", "a", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "b c", "<s>", "a", "", "[P]", "d"]
    m = vocab.map_vocab(tokens)
    # "b c" holds a space, "<s>" is fairseq's, the first "a" is shadowed by the second, "" is empty
    assert m.symbols == ["<s>", "<pad>", "</s>", "<unk>", "[unreachable-1]", "[unreachable-6]", "[unreachable-7]",
                         "a", "[unreachable-9]", "d", "[MASK]", "[P]"]
    assert m.rows == [3, 0, 4, 2, 1, 6, 7, 8, 9, 11, 5, 10]  # an existing [P] keeps its own row
    assert not m.pseudo_from_mask and m.placeholders == 4
    names, order = vocab.symbols_to_vocab(m.symbols, tokens)  # export restores the original ids
    assert names == tokens and [m.rows[i] for i in order] == list(range(len(tokens)))


SPLITS_OTHERWISE = {  # an uncased source whose tokenizer files say it splits text unlike BERT's uncased default
    "keeps_accents": ("tokenizer_config.json", {"do_lower_case": True, "strip_accents": False},
                      "tokenizer_config.json: strip_accents false, but the plugin's uncased WordPiece tokenizer has "
                      "strip_accents true"),
    "keeps_cjk_characters_in_words": ("tokenizer_config.json", {"tokenize_chinese_chars": False},
                                      "tokenize_chinese_chars false"),
    "no_basic_tokenizer": ("tokenizer_config.json", {"do_basic_tokenize": False}, "do_basic_tokenize false"),
    "another_tokenizer_class": ("tokenizer_config.json", {"tokenizer_class": "BertJapaneseTokenizer"},
                                "tokenizer_class 'BertJapaneseTokenizer' is not BERT's WordPiece tokenizer"),
    "tokenizer_json_keeps_accents": ("tokenizer.json", {"normalizer": {"type": "BertNormalizer", "lowercase": True,
                                                                       "strip_accents": False}},
                                     "tokenizer.json: strip_accents false"),
    "tokenizer_json_other_normalizer": ("tokenizer.json", {"normalizer": {"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Lowercase"}]}}, "tokenizer.json: normalizer 'Sequence', but the plugin tokenises "
                                                    "as BERT's BertNormalizer does"),
    "tokenizer_json_whitespace_split": ("tokenizer.json", {"pre_tokenizer": {"type": "Whitespace"}},
                                        "tokenizer.json: pre_tokenizer 'Whitespace'"),
    "tokenizer_json_bpe": ("tokenizer.json", {"model": {"type": "BPE", "vocab": {}, "merges": []}},
                           "tokenizer.json: model 'BPE'"),
}


@pytest.mark.parametrize("case", list(SPLITS_OTHERWISE))
def test_a_source_tokenizer_that_splits_text_otherwise_than_the_plugins_is_refused_naming_its_setting(
        case, tmp_path, bert_dir):
    """transformers' tokenizer of such a directory gives other pieces than the plugin's WordPiece
    ("café" stays whole where the plugin reads "cafe"): it converted without a word."""
    name, content, needle = SPLITS_OTHERWISE[case]
    src = _break(tmp_path, bert_dir)
    (src / name).write_text(json.dumps(content))
    with pytest.raises(ConversionError) as e:
        convert.import_checkpoint(str(src), str(tmp_path / "out"))
    assert "\n" not in str(e.value) and needle in str(e.value), str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["broken"]
    # the settings that are the plugin's convert
    (src / name).write_text(json.dumps({"tokenizer_class": "BertTokenizerFast", "do_lower_case": True,
                                        "strip_accents": None, "tokenize_chinese_chars": True,
                                        "normalizer": {"type": "BertNormalizer", "strip_accents": True}}))
    convert.import_checkpoint(str(src), str(tmp_path / "out"))
