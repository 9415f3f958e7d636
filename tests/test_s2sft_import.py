"""Importing what s2s-ft saves after fine-tuning (weights/s2sft.py): a small synthetic checkpoint in
that layout, made here from a released-layout one by s2s-ft's own key conversion (separate q/k/v
with a zero key bias, the table at ``bert.rel_pos_bias.weight``) plus what its model class saves
besides (the tied ``cls.predictions.decoder_weight``, the label-smoothing buffer)."""
import json
import os

import pytest
import torch
from test_released_weights import (
    HEADS,
    REL_BUCKETS,
    REL_MAX,
    fairseq_generate,
    hf_config,
    random_bert,
    stdlib_lines,
    unilmv2_layout,
    wordpiece_vocab,
)

from fairseq_pmlm.text import vocab
from fairseq_pmlm.weights import convert
from fairseq_pmlm.weights.layouts import ConversionError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC_LEN, TGT_LEN = 40, 16  # the fine-tuning run's train_opt.json (source + target <= 64 positions)


@pytest.fixture(scope="module")
def vocab_tokens():  # a WordPiece vocab trained on stdlib docstrings, as test_released_weights.py's
    return wordpiece_vocab(stdlib_lines())


def s2sft_finetuned_layout(released_sd, label_smoothing=0.1):
    """What s2s-ft's run_seq2seq.py saves for a released UniLMv2 file it fine-tuned (zero steps)."""
    sd = {}
    for k, v in released_sd.items():
        if k.endswith("attention.self.qkv_linear.weight"):
            for name, part in zip(("query", "key", "value"), v.chunk(3)):
                sd[k.replace("qkv_linear.weight", f"{name}.weight")] = part.clone()
        elif k.endswith("attention.self.q_bias"):
            sd[k.replace("q_bias", "query.bias")] = v.clone()
        elif k.endswith("attention.self.v_bias"):
            sd[k.replace("v_bias", "value.bias")] = v.clone()
            sd[k.replace("v_bias", "key.bias")] = torch.zeros_like(v)
        elif k == "bert.encoder.rel_pos_bias.weight":
            sd["bert.rel_pos_bias.weight"] = v.clone()
        else:
            sd[k] = v.clone()
    emb = sd["bert.embeddings.word_embeddings.weight"]
    sd["cls.predictions.decoder_weight"] = emb.clone()
    n = emb.size(0)
    one_hot = torch.full((1, n), label_smoothing / (n - 2))
    one_hot[0, 0] = 0
    sd["crit_mask_lm_smoothed.one_hot"] = one_hot
    return sd


def write_finetuned(d, sd, config, vocab_tokens, train_opt=True):
    """OUTPUT_DIR/ckpt-N/{pytorch_model.bin,config.json} and OUTPUT_DIR/train_opt.json, as s2s-ft
    writes them; the vocab is the released one, elsewhere (s2s-ft saves none)."""
    ckpt = d / "output" / "ckpt-10"
    ckpt.mkdir(parents=True)
    torch.save(sd, ckpt / "pytorch_model.bin")
    (ckpt / "config.json").write_text(json.dumps(config))
    if train_opt:
        (d / "output" / "train_opt.json").write_text(json.dumps(
            {"max_source_seq_length": SRC_LEN, "max_target_seq_length": TGT_LEN, "do_lower_case": True,
             "model_type": "unilm", "mask_way": "v2"}))
    vocab.write_vocab(d / "unilm2-vocab.txt", vocab_tokens)
    return ckpt, d / "unilm2-vocab.txt"


@pytest.fixture(scope="module")
def source(tmp_path_factory, vocab_tokens):
    """The released file, its import, and the s2s-ft save made from it."""
    d = tmp_path_factory.mktemp("s2sft")
    hf = random_bert(len(vocab_tokens), seed=5, layer_norm_eps=1e-5)
    released_sd = unilmv2_layout(hf.state_dict(), HEADS, seed=2)
    for k in ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias"):
        released_sd.pop(k, None)
    config = {**hf_config(len(vocab_tokens), layer_norm_eps=1e-5).to_dict(), "rel_pos_bins": REL_BUCKETS,
              "max_rel_pos": REL_MAX}
    (d / "released").mkdir()
    torch.save(released_sd, d / "released" / "unilm2-tiny.bin")
    (d / "released" / "unilm2-tiny-config.json").write_text(json.dumps(config))
    vocab.write_vocab(d / "released" / "unilm2-tiny-vocab.txt", vocab_tokens)
    convert.import_checkpoint(str(d / "released" / "unilm2-tiny.bin"), str(d / "released-import"))
    # BertForSeq2SeqConfig's own keys, as its save writes them
    s2s_config = {**config, "label_smoothing": 0.1, "source_type_id": 0, "target_type_id": 1,
                  "fix_word_embedding": False}
    sd = s2sft_finetuned_layout(released_sd)
    ckpt, vocab_file = write_finetuned(d, sd, s2s_config, vocab_tokens)
    info = convert.import_checkpoint(str(ckpt), str(d / "s2sft-import"), vocab_file=str(vocab_file))
    return d, sd, s2s_config, info


def test_s2sft_finetuned_checkpoint_imports_tensor_for_tensor_as_the_released_file_it_came_from(source):
    d, _, _, info = source
    assert info["layout"] == "s2s-ft" and info["task"] == "pmlm_seq2seq" and not info["cased"]
    a = torch.load(d / "released-import" / "model.pt")
    b = torch.load(d / "s2sft-import" / "model.pt")
    assert a["model"].keys() == b["model"].keys()
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    for f in ("dict.txt", "vocab.txt", "tokenizer_config.json"):
        assert (d / "released-import" / f).read_bytes() == (d / "s2sft-import" / f).read_bytes(), f
    # the fine-tuning run's lengths (train_opt.json) become the task's, for decoding
    task = b["cfg"]["task"]
    assert (task["_name"], task["max_source_positions"], task["max_target_positions"]) == (
        "pmlm_seq2seq", SRC_LEN, TGT_LEN)
    assert any("train_opt.json" in n for n in info["notes"])


def test_imported_s2sft_checkpoint_decodes_with_the_hub_and_fairseq_generate_alike(source, tmp_path):
    """No fine-tuning step: the hub's sample() and fairseq-generate --task pmlm_seq2seq (what
    s2s/generate.sh runs) read the import as it is, and give the same hypotheses."""
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model
    from fairseq_pmlm.text.wordpiece import WordPieceEncoder

    import cli

    out = source[0] / "s2sft-import"
    hub = UniLMv2Model.from_pretrained(str(out))
    sources = [t for t in stdlib_lines() if 40 < len(t) < 120][:3]
    hyps = hub.sample(sources, beam=2, max_len_b=5)
    assert len(hyps) == 3 and all(isinstance(h, str) for h in hyps)
    enc = WordPieceEncoder(str(out / "vocab.txt"))
    for lang in ("source", "target"):
        (tmp_path / f"test.{lang}").write_text("\n".join(enc.encode_lines(sources)) + "\n")
    cli.preprocess_in_process("--source-lang", "source", "--target-lang", "target", "--testpref",
                              tmp_path / "test", "--destdir", tmp_path / "bin", "--srcdict", out / "dict.txt",
                              "--tgtdict", out / "dict.txt", "--workers", "1")
    stdout = fairseq_generate(
        tmp_path / "bin", "--user-dir", os.path.join(REPO, "fairseq_pmlm"), "--task", "pmlm_seq2seq",
        "--path", out / "model.pt", "--gen-subset", "test", "--max-source-positions", SRC_LEN,
        "--max-target-positions", TGT_LEN, "--beam", "2", "--max-len-b", "5", "--batch-size", "4", "--cpu",
        "--bpe", "bert", "--bpe-vocab-file", out / "vocab.txt", "--required-batch-size-multiple", "1")
    got = {int(r.split("\t")[0][2:]): r.split("\t")[2] for r in stdout.splitlines() if r.startswith("D-")}
    assert [got[i] for i in range(3)] == hyps


def test_an_untied_decoder_weight_is_refused_naming_the_key(source, tmp_path, vocab_tokens):
    _, sd, config, _ = source
    sd = dict(sd, **{"cls.predictions.decoder_weight": sd["cls.predictions.decoder_weight"] + 1})
    ckpt, vocab_file = write_finetuned(tmp_path, sd, config, vocab_tokens)
    with pytest.raises(ConversionError) as e:
        convert.import_checkpoint(str(ckpt), str(tmp_path / "out"), vocab_file=str(vocab_file))
    assert "\n" not in str(e.value) and "cls.predictions.decoder_weight differs from the word embedding" in str(e.value)
    assert not (tmp_path / "out").exists()


def test_segment_ids_other_than_the_plugins_are_refused_in_one_line(source, tmp_path, vocab_tokens):
    _, sd, config, _ = source
    ckpt, vocab_file = write_finetuned(tmp_path, sd, dict(config, source_type_id=4, target_type_id=5), vocab_tokens)
    with pytest.raises(ConversionError, match=r"config.json: source_type_id 4: the plugin feeds sources as segment 0"):
        convert.import_checkpoint(str(ckpt), str(tmp_path / "out"), vocab_file=str(vocab_file))


def test_a_position_table_extended_beyond_the_released_one_is_read(source, tmp_path, vocab_tokens):
    """s2s-ft extends the absolute positions (cyclic copies) when source + target exceed them:
    the import keeps every row and the model's --max-positions follows the config."""
    _, sd, config, _ = source
    key = "bert.embeddings.position_embeddings.weight"
    rows = sd[key].size(0)
    sd = dict(sd, **{key: torch.cat([sd[key], sd[key][: rows // 2]])})
    ckpt, vocab_file = write_finetuned(tmp_path, sd, dict(config, max_position_embeddings=rows + rows // 2),
                                       vocab_tokens, train_opt=False)
    info = convert.import_checkpoint(str(ckpt), str(tmp_path / "out"), vocab_file=str(vocab_file))
    assert f"--max-positions={rows + rows // 2}" in info["flags"]
    state = torch.load(tmp_path / "out" / "model.pt")
    assert torch.equal(state["model"]["transformer.embed_positions.weight"], sd[key])
    assert any("no train_opt.json" in n for n in info["notes"])  # and the lengths it then chose are said


def test_a_finetuned_directory_without_a_vocab_asks_for_vocab(source, tmp_path, vocab_tokens):
    _, sd, config, _ = source
    ckpt, _ = write_finetuned(tmp_path, sd, config, vocab_tokens)
    with pytest.raises(ConversionError, match=r"no vocab.txt or tokenizer.json found for .*ckpt-10: pass --vocab"):
        convert.import_checkpoint(str(ckpt), str(tmp_path / "out"))


def test_imported_s2sft_checkpoint_decodes_through_the_recipes(source, tmp_path):
    """s2s/prepare.sh with the import as --pretrain-data, then s2s/generate.sh on its model.pt:
    one hypothesis per test pair and a ROUGE table, without a fine-tuning step."""
    from cli import recipe

    out = source[0] / "s2sft-import"
    raw = tmp_path / "raw"
    raw.mkdir()
    sources = [t for t in stdlib_lines() if 40 < len(t) < 120][:3]
    for split in ("train", "valid", "test"):
        (raw / f"{split}.source").write_text("\n".join(sources) + "\n")
        (raw / f"{split}.target").write_text("\n".join(s.split(" ")[0] for s in sources) + "\n")
    recipe("s2s/prepare.sh", "--raw", raw, "--name", "pairs", "--pretrain-data", out, "--destdir", tmp_path,
           "--workers", "1")
    done = recipe("s2s/generate.sh", "--preset", "demo", "--data", tmp_path / "pairs", "--checkpoint",
                  out / "model.pt", "--refs", raw / "test.target", "--out-dir", tmp_path / "gen", "--",
                  "--max-source-positions", SRC_LEN, "--max-target-positions", TGT_LEN, "--beam", "2",
                  "--max-len-b", "5", "--min-len", "1")
    assert len((tmp_path / "gen" / "hyp.txt").read_text().splitlines()) == 3
    assert "ROUGE-L" in (tmp_path / "gen" / "scores.txt").read_text() and "ROUGE-L" in done.stdout
