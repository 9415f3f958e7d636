"""The path most users take, on real released weights: sentence-transformers' all-MiniLM-L6-v2
(pip-installed by scripts/setup_env.sh, sha256 checked) -> convert_checkpoint.py import ->
hidden states equal to transformers' BertModel on real sentences -> the s2s recipes
(prepare, finetune, generate) on real docstring pairs -> fairseq-generate's detokenised output.
"""
import importlib.util
import os
import subprocess

import pytest
import torch

from fairseq_pmlm.weights import convert, released
from fairseq_pmlm.weights.layouts import ConversionError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "all-minilm-l6-v2"


def corpus_module():
    spec = importlib.util.spec_from_file_location("corpus", os.path.join(REPO, "scripts", "make_stdlib_corpus.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def docstring_pairs(modules=("textwrap", "argparse", "json/__init__", "string", "fractions", "shlex", "csv")):
    corpus = corpus_module()
    root = os.path.dirname(os.__file__)
    return [p for m in modules for p in corpus.module_pairs(corpus.parse(os.path.join(root, m + ".py")))]


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


def test_converted_minilm_equals_transformers_bert_model_on_real_sentences(hf_dir, converted):
    from transformers import AutoTokenizer, BertModel

    from fairseq_pmlm.models.unilmv2 import nlu_layout
    from fairseq_pmlm.tasks.pseudo_masked_lm import load_pmlm_dictionary

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


def test_released_minilm_fine_tunes_and_decodes_through_the_s2s_recipes(converted, tmp_path):
    """prepare.sh on a converted directory, finetune.sh reading the arch from the checkpoint,
    generate.sh detokenising with the data's WordPiece vocab: real summaries come out."""
    import cli

    out, _ = converted
    pairs = docstring_pairs()
    raw = tmp_path / "raw"
    raw.mkdir()
    for split, rows in (("train", pairs[:48]), ("valid", pairs[48:52]), ("test", pairs[52:58])):
        for side, col in (("source", 0), ("target", 1)):
            (raw / f"{split}.{side}").write_text("".join(r[col] + "\n" for r in rows))
    env = {**os.environ, **cli.ENV}

    def recipe(name, *args):
        proc = subprocess.run(["bash", os.path.join(REPO, "scripts", "s2s", name), *map(str, args)],
                              capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout

    recipe("prepare.sh", raw, "--name", "docs", "--pretrain-data", out, "--destdir", tmp_path)
    data = tmp_path / "docs"
    assert (data / "vocab.txt").is_file() and (data / "tokenizer_config.json").is_file()
    log = recipe("finetune.sh", "demo", data, out / "model.pt", tmp_path / "ck", "--max-update", "4",
                 "--max-source-positions", "48", "--max-target-positions", "16", "--batch-size", "8",
                 "--disable-validation", "--num-workers", "0", "--log-interval", "1")
    assert "--encoder-layers=6" not in log or "encoder_layers" in log
    state = torch.load(tmp_path / "ck" / "checkpoint_last.pt", weights_only=True, mmap=True)
    assert state["cfg"]["model"]["encoder_layers"] == 6 and state["cfg"]["model"]["encoder_embed_dim"] == 384
    assert state["cfg"]["bpe"]["_name"] == "bert"  # the tokenizer is recorded for the hub
    recipe("generate.sh", "demo", data, tmp_path / "ck" / "checkpoint_last.pt", raw / "test.target",
           tmp_path / "gen", "--max-source-positions", "48", "--max-target-positions", "16", "--max-len-b", "8",
           "--beam", "2", "--cpu")
    hyps = (tmp_path / "gen" / "hyp.txt").read_text().splitlines()
    assert len(hyps) == 6
    words = " ".join(hyps).split()
    assert words and not any(w.startswith("##") or w in ("[P]", "[MASK]", "<s>", "[CLS]") for w in words)
    assert "ROUGE" in (tmp_path / "gen" / "scores.txt").read_text()
