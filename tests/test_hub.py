"""The Python hub (models/hub_interface.py) called as RoBERTa's and BART's hubs are: their arguments
and conventions, on the suite's tiny sequence-to-sequence run (tiny_s2s.py)."""
import os

import pytest
import torch
from fairseq.data.data_utils import collate_tokens

from fairseq_pmlm.models.unilmv2 import UniLMv2Model

from tiny_s2s import tiny_s2s


@pytest.fixture(scope="module")
def s2s(tmp_path_factory):
    raw, _, save = tiny_s2s(tmp_path_factory)
    sources = [line for line in (raw / "test.source").read_text().splitlines() if line]
    return save, UniLMv2Model.from_pretrained(str(save), checkpoint_file="checkpoint_last.pt"), sources


def test_generate_of_a_right_padded_batch_equals_generate_of_its_rows(s2s):
    _, hub, sources = s2s
    tokens = [hub.encode(s) for s in sources]
    assert len({len(t) for t in tokens}) > 1  # rows of several lengths: the shorter ones padded
    rows = [h[0]["tokens"].tolist() for h in hub.generate(tokens, beam=2, max_len_b=4)]
    batch = collate_tokens(tokens, pad_idx=hub.src_dict.pad())
    assert [h[0]["tokens"].tolist() for h in hub.generate(batch, beam=2, max_len_b=4)] == rows


def test_generate_of_one_tensor_keeps_inference_step_args(s2s):
    _, hub, sources = s2s
    tokens = hub.encode(sources[0])
    free = hub.generate(tokens, beam=2, max_len_b=4)[0]["tokens"]
    prefix = next(i for i in range(hub.src_dict.nspecial, len(hub.src_dict)) if i != free[0])
    forced = hub.generate(tokens, beam=2, max_len_b=4, inference_step_args={"prefix_tokens": torch.tensor([[prefix]])})
    assert forced[0]["tokens"][0] == prefix
    # as the same call on a list of one
    assert torch.equal(forced[0]["tokens"], hub.generate([tokens], beam=2, max_len_b=4, inference_step_args={
        "prefix_tokens": torch.tensor([[prefix]])})[0][0]["tokens"])


def test_generate_takes_the_tasks_decoding_flags_as_keywords(s2s):
    """As fairseq-generate's task flags: eos_at_limit="free" leaves an EOS at the length limit
    unscored (fairseq's forced one costs), beam_search="s2s-ft" runs s2s-ft's search (an open
    hypothesis reaches max_len_b + 1 tokens), no_repeat_ngram_ignore needs no_repeat_ngram_size."""
    from fairseq_pmlm.errors import BadInput

    _, hub, sources = s2s
    tokens = hub.encode(sources[0])
    kept = {mode: hub.generate(tokens, beam=2, max_len_b=2, min_len=2, eos_at_limit=mode)[0]
            for mode in ("forced", "free")}
    assert float(kept["forced"]["positional_scores"][-1]) < 0  # min_len = max_len_b: every hypothesis at the limit
    assert float(kept["free"]["positional_scores"][-1]) == 0
    hypos = hub.generate(tokens, beam=4, max_len_b=2, min_len=2, beam_search="s2s-ft")
    # 2 tokens + EOS, or 3 still open with an EOS at 0 (fairseq's search stops at 2 + EOS)
    kinds = {(len(h["tokens"]), float(h["positional_scores"][-1]) == 0) for h in hypos}
    assert kinds <= {(3, False), (4, True)} and (4, True) in kinds
    with pytest.raises(BadInput, match="--no-repeat-ngram-size, which is off"):
        hub.generate(tokens, beam=2, max_len_b=4, no_repeat_ngram_ignore=hub.src_dict[tokens[1]])


def test_the_hub_trains_with_dropout_and_evaluates_without_as_robertas(s2s):
    _, hub, sources = s2s
    tokens = hub.encode(sources[0])
    try:
        hub.train()
        assert hub.model.training
        torch.manual_seed(0)
        assert not torch.equal(hub.extract_features(tokens), hub.extract_features(tokens))  # dropout
    finally:
        hub.eval()
    assert not hub.model.training
    assert torch.equal(hub.extract_features(tokens), hub.extract_features(tokens))
    assert hub.sample(sources[0], beam=2, max_len_b=4) == hub.sample(sources[0], beam=2, max_len_b=4)


def test_a_left_padded_batch_is_refused_not_read_as_other_positions(s2s):
    _, hub, sources = s2s
    a, b = hub.encode(sources[0] + " " + sources[1]), hub.encode(sources[1])
    with torch.no_grad():
        right = hub.extract_features(collate_tokens([a, b], pad_idx=hub.src_dict.pad()))
        assert torch.allclose(right[1, : len(b)], hub.extract_features(b)[0], atol=1e-5)
        with pytest.raises(ValueError, match="right-padded"):
            hub.extract_features(collate_tokens([a, b], pad_idx=hub.src_dict.pad(), left_pad=True))


def test_decode_of_a_batch_is_refused_not_joined_with_its_padding(s2s):
    _, hub, sources = s2s
    batch = collate_tokens([hub.encode(sources[0] + " " + sources[1]), hub.encode(sources[1])],
                           pad_idx=hub.src_dict.pad())
    with pytest.raises(ValueError, match="1-D"):
        hub.decode(batch)
    assert hub.decode(batch[0]) == hub.decode(hub.encode(sources[0] + " " + sources[1]))


def test_register_classification_head_takes_the_models_inner_dim_keyword(s2s):
    _, hub, _ = s2s
    hub.register_classification_head("inner", num_classes=2, inner_dim=8)
    assert hub.model.classification_heads["inner"].dense.out_features == 8


def test_data_name_or_path_dot_is_the_model_directory_as_in_robertas_hub(s2s, tmp_path, monkeypatch):
    save, hub, sources = s2s
    monkeypatch.chdir(tmp_path)  # no dictionary here
    dot = UniLMv2Model.from_pretrained(str(save), checkpoint_file="checkpoint_last.pt", data_name_or_path=".")
    assert dot.cfg.task.data == os.path.abspath(save)
    assert torch.equal(dot.encode(sources[0]), hub.encode(sources[0]))


def test_an_explicit_bpe_none_gives_a_hub_without_tokenizer(s2s):
    save, hub, sources = s2s
    plain = UniLMv2Model.from_pretrained(str(save), checkpoint_file="checkpoint_last.pt", bpe=None)
    assert hub.bpe is not None and plain.bpe is None
    pieces = " ".join(hub.src_dict[i] for i in hub.encode(sources[0])[1:-1])  # as the tokenizer cut them
    assert torch.equal(plain.encode(pieces), hub.encode(sources[0]))


def test_several_checkpoint_files_are_refused_saying_the_hub_holds_one_model(s2s):
    save, _, _ = s2s
    with pytest.raises(ValueError, match="several checkpoints"):
        UniLMv2Model.from_pretrained(str(save), checkpoint_file=os.pathsep.join(["checkpoint_last.pt"] * 2))


def test_score_says_it_is_unavailable_rather_than_failing_inside_fairseq(s2s):
    _, hub, sources = s2s
    with pytest.raises(NotImplementedError, match="score-reference"):
        hub.score(sources[:1])


def test_an_explicit_bpe_names_the_tokenizer_and_a_missing_file_is_not_swapped_for_another(s2s, tmp_path):
    save, hub, sources = s2s
    model = str(save / "spm.model")
    named = UniLMv2Model.from_pretrained(str(save), checkpoint_file="checkpoint_last.pt", bpe="sentencepiece",
                                         sentencepiece_model=model)
    assert named.cfg.bpe.sentencepiece_model == model and torch.equal(named.encode(sources[0]), hub.encode(sources[0]))
    with pytest.raises(Exception, match="missing.model"):
        UniLMv2Model.from_pretrained(str(save), checkpoint_file="checkpoint_last.pt", bpe="sentencepiece",
                                     sentencepiece_model=str(tmp_path / "missing.model"))
