"""Sequence-to-sequence fine-tuning and decoding (docs/DESIGN.md §4, §5)."""
import collections
import math
import os
import subprocess

import numpy as np
import pytest
import torch
from fairseq.data import data_utils
from fairseq.dataclass.configs import GenerationConfig
from fairseq.sequence_generator import SequenceGenerator
from omegaconf import OmegaConf
from torch.overrides import TorchFunctionMode

from fairseq_pmlm.errors import BadInput
from fairseq_pmlm.models import seq2seq_views
from fairseq_pmlm.models.unilmv2 import UniLMv2Config, UniLMv2Model
from fairseq_pmlm.modules import attention_rule
from fairseq_pmlm.modules.attention_rule import CONTEXT, ORIGINAL, PAD, PSEUDO, TokenDescription
from fairseq_pmlm.modules.transformer import UniLMv2Transformer
from fairseq_pmlm.scoring.rouge import rouge_scores
from fairseq_pmlm.tasks.pmlm_seq2seq import PMLMSeq2SeqConfig, PMLMSeq2SeqTask

from cli import run
from conftest import make_dictionary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_model(d, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = UniLMv2Config(encoder_layers=2, encoder_embed_dim=32, encoder_ffn_embed_dim=64,
                        encoder_attention_heads=4, **kw)
    return UniLMv2Model(cfg, d).eval()


def random_pairs(d, rng, src_lens=(5, 11, 8, 3), tgt_lens=(4, 7, 6, 2)):
    srcs = [torch.tensor([d.bos()] + rng.integers(4, 100, n).tolist() + [d.eos()]) for n in src_lens]
    tgts = [torch.tensor(rng.integers(4, 100, n).tolist() + [d.eos()]) for n in tgt_lens]
    src = data_utils.collate_tokens(srcs, d.pad())
    prev = data_utils.collate_tokens(tgts, d.pad(), d.eos(), move_eos_to_beginning=True)
    return src, torch.tensor([len(s) for s in srcs]), prev, data_utils.collate_tokens(tgts, d.pad())


@pytest.mark.parametrize("rel_pos,room", [(True, None), (False, None), (True, 1)],
                         ids=["relpos", "no-relpos", "cache-grows-every-step"])
def test_incremental_decoding_equals_one_teacher_forced_pass(rel_pos, room, rng, monkeypatch):
    if room:
        monkeypatch.setattr(seq2seq_views, "CACHE_ROOM", room)
    d = make_dictionary()
    model = tiny_model(d, no_rel_pos=not rel_pos)
    src, lens, prev, tgt = random_pairs(d, rng)
    with torch.no_grad():
        full = model(src, src_lengths=lens, prev_output_tokens=prev)[0].log_softmax(-1)
        enc, state, steps = model.encoder(src, lens), {}, []
        for t in range(prev.size(1)):
            steps.append(model.decoder(prev[:, : t + 1], enc, incremental_state=state)[0].log_softmax(-1))
    real = tgt.ne(d.pad())
    assert torch.allclose(full[real], torch.cat(steps, 1)[real], atol=1e-5)



class CountCalls(TorchFunctionMode):
    """How many times each torch function is called (by name) while active."""

    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls[getattr(func, "__name__", str(func))] += 1
        return func(*args, **(kwargs or {}))


def test_a_decoding_step_runs_each_layer_with_four_matmuls_and_no_dropout_call(rng):
    """Decoding is bound by the host's calls on a GPU: without autograd q, k and v come from one
    matmul (the query, key and value weights joined), and the layers skip dropout, the identity
    outside training (6 matmuls and 2 dropout calls a layer before). The LM head adds 2 matmuls, the
    embeddings one dropout call."""
    d = make_dictionary()
    model = tiny_model(d)
    src, lens, prev, _ = random_pairs(d, rng)
    with torch.no_grad():
        enc, state = model.encoder(src, lens), {}
        model.decoder(prev[:, :1], enc, incremental_state=state)
        with CountCalls() as counted:
            model.decoder(prev[:, :2], enc, incremental_state=state)
    layers = len(model.transformer.layers)
    assert counted.calls["linear"] == 4 * layers + 2 and counted.calls["dropout"] == 1, counted.calls


def test_the_joined_projection_gives_the_three_projections_values_and_follows_new_weights(rng):
    """Without autograd q, k, v come from the query, key and value weights joined: the three
    matmuls' values (fp32, and in bf16 under autocast; to rounding, which a BLAS may order
    otherwise for another width: on this project's CPUs bit for bit), made anew at each forward
    without cached keys (so weights loaded between two generations are used) and not kept by a
    forward with autograd (training holds no copy of the weights)."""
    d = make_dictionary()
    model, other = tiny_model(d, seed=0), tiny_model(d, seed=1)
    attn = model.transformer.layers[0].attn
    x = torch.randn(3, 5, attn.query.in_features)
    with torch.no_grad():
        separate = [attn._split(proj(x)) for proj in (attn.query, attn.key, attn.value)]
        for a, b in zip(attn._project(x, incremental=False), separate, strict=True):
            torch.testing.assert_close(a, b)
        with torch.autocast("cpu", torch.bfloat16):
            separate = [attn._split(proj(x)) for proj in (attn.query, attn.key, attn.value)]
            joined = attn._project(x, incremental=False)
        for a, b in zip(joined, separate, strict=True):
            assert a.dtype == torch.bfloat16
            torch.testing.assert_close(a, b)
        src, lens, prev, tgt = random_pairs(d, rng)
        model(src, src_lengths=lens, prev_output_tokens=prev)
        model.load_state_dict(other.state_dict())
        got = model(src, src_lengths=lens, prev_output_tokens=prev)[0]
        assert torch.equal(got, other(src, src_lengths=lens, prev_output_tokens=prev)[0])
    model(src, src_lengths=lens, prev_output_tokens=prev)
    assert all(layer.attn._joined is None for layer in model.transformer.layers)


@pytest.mark.parametrize("rel_pos", [True, False], ids=["relpos", "no-relpos"])
def test_fine_tuning_and_decoding_compute_what_every_columns_last_layer_gives(rel_pos, rng, monkeypatch):
    """The views read the source's keys and values and the [P]s' final states alone, so the last layer
    runs its attention and feed-forward for the [P] rows only (``read``): the logits, every
    parameter's gradient and the generation's keys are those of the last layer computed for every
    column and then cut (dropout off: its draws would differ). Worked example, 2 layers, sources of
    3-11 tokens, targets of 2-7: the last layer's queries and feed-forward over 8-18 rows become 2-7."""
    d = make_dictionary()
    model = tiny_model(d, no_rel_pos=not rel_pos, dropout=0.0, attention_dropout=0.0).train()
    src, lens, prev, tgt = random_pairs(d, rng)
    run = UniLMv2Transformer.forward

    def every_column(self, *args, read=None, **kwargs):
        out = run(self, *args, **kwargs)
        if read is None:
            return out
        x, kvs = out if kwargs.get("return_kv") else (out, None)
        x = None if read == x.size(1) else x[:, read:]
        return (x, kvs) if kwargs.get("return_kv") else x

    def fine_tuning_step():
        model.zero_grad()
        logits = model(src, src_lengths=lens, prev_output_tokens=prev)[0]
        logits.log_softmax(-1)[tgt.ne(d.pad())].sum().backward()
        with torch.no_grad():
            kv = model.encoder(src, lens)["kv"]
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, kv

    logits, grads, kv = fine_tuning_step()
    monkeypatch.setattr(UniLMv2Transformer, "forward", every_column)
    ref_logits, ref_grads, ref_kv = fine_tuning_step()
    torch.testing.assert_close(logits, ref_logits)
    assert grads.keys() == ref_grads.keys()
    for name in grads:
        torch.testing.assert_close(grads[name], ref_grads[name], msg=name)
    for a, b in zip(kv, ref_kv, strict=True):
        torch.testing.assert_close(a, b)


def test_the_source_keys_a_generation_keeps_hold_no_queries(rng):
    """The encoder's per-layer keys and values, which fairseq keeps for a whole generation, own
    their storage: without autograd they come from the joined q/k/v projection, whose output
    also holds the source's queries, which no step reads."""
    d = make_dictionary()
    model = tiny_model(d)
    src, lens, _, _ = random_pairs(d, rng)
    with torch.no_grad():
        kv = model.encoder(src, src_lengths=lens)["kv"]
    assert len(kv) == 2 * len(model.transformer.layers)
    for t in kv:
        assert t.untyped_storage().nbytes() == t.numel() * t.element_size()


def test_fine_tuning_mask_equals_the_spec_rule(rng, monkeypatch):
    """Spy on the rule's inputs during a teacher-forced pass; compare with docs/DESIGN.md §4."""
    d = make_dictionary()
    model = tiny_model(d)
    src, lens, prev, tgt = random_pairs(d, rng)
    seen = []
    real_rule = attention_rule.attention_allowed

    def spy(qk, qs, kk, ks):
        out = real_rule(qk, qs, kk, ks)
        seen.append((qk, qs, kk, ks, out))
        return out

    monkeypatch.setattr("fairseq_pmlm.modules.transformer.attention_allowed", spy)
    with torch.no_grad():
        model(src, src_lengths=lens, prev_output_tokens=prev)
    (_, _, _, _, src_allowed), (qk, qs, kk, ks, allowed) = seen  # encoder pass, then decoder pass
    # the keys come padded to a multiple of 8 columns (attention_bias); the padding is seen by nobody
    assert not src_allowed[:, :, src.size(1):].any()
    assert src_allowed[:, 0, : src.size(1)][src.ne(d.pad())].all()  # source rows see all real source tokens
    for b in range(src.size(0)):
        for i in range(qk.size(1)):
            if qk[b, i] == PAD:
                continue
            for j in range(kk.size(1)):
                q_kind, t, k_kind, u = int(qk[b, i]), int(qs[b, i]), int(kk[b, j]), int(ks[b, j])
                if k_kind == PAD:
                    expect = False
                elif k_kind == CONTEXT:
                    expect = True  # every query sees the whole source
                elif q_kind == ORIGINAL:  # target token t: targets <= t
                    expect = k_kind == ORIGINAL and u <= t
                else:  # [P] at t: targets < t and itself
                    expect = (k_kind == ORIGINAL and u < t) or (k_kind == PSEUDO and u == t)
                assert bool(allowed[b, i, j]) == expect, (b, i, j)
    assert int((qk == PSEUDO).sum()) == int(tgt.ne(d.pad()).sum())  # one [P] per target token, EOS included


def test_changing_target_token_t_changes_no_prediction_up_to_t(rng):
    d = make_dictionary()
    model = tiny_model(d)
    src, lens, prev, tgt = random_pairs(d, rng, src_lens=(9,) * 4, tgt_lens=(8,) * 4)
    with torch.no_grad():
        base = model(src, src_lengths=lens, prev_output_tokens=prev)[0]
        for t in range(1, prev.size(1)):  # prev[:, t] is target token t (1-based)
            changed = prev.clone()
            changed[:, t] = (changed[:, t] - 4 + 1 + torch.randint(0, 90, (4,))) % 96 + 4
            out = model(src, src_lengths=lens, prev_output_tokens=changed)[0]
            assert torch.allclose(out[:, :t], base[:, :t], atol=1e-5), t  # predictions of y_1..y_t
            assert not torch.allclose(out[:, t:], base[:, t:], atol=1e-5), t


@pytest.mark.parametrize("room", [None, 1], ids=["default-room", "cache-grows-every-step"])
def test_batched_beam_search_equals_one_sentence_at_a_time(room, rng, monkeypatch):
    """Sentences end at different steps, so the batch shrinks (the cache's every-slot reorder)
    between reorders among one sentence's beams (only the target's slots move)."""
    if room:
        monkeypatch.setattr(seq2seq_views, "CACHE_ROOM", room)
    d = make_dictionary()
    model = tiny_model(d, seed=3)
    src, lens, _, _ = random_pairs(d, rng)
    gen = SequenceGenerator([model], d, beam_size=4, max_len_b=8, min_len=2, no_repeat_ngram_size=3)
    with torch.no_grad():
        batched = gen.forward({"net_input": {"src_tokens": src, "src_lengths": lens}})
        for b in range(src.size(0)):
            one = src[b : b + 1, : int(lens[b])]
            alone = gen.forward({"net_input": {"src_tokens": one, "src_lengths": lens[b : b + 1]}})
            for hb, ha in zip(batched[b], alone[0]):
                assert torch.equal(hb["tokens"], ha["tokens"])
                assert abs(float(hb["score"]) - float(ha["score"])) < 1e-4


# EOS made a little likelier (its LM-head bias, for each model's logits): sentences end at several steps;
# or not, and the longest source (13 tokens) decoded for 12 steps, its last [P] at the last position (25)
@pytest.mark.parametrize("rel_pos,room,eos_bias,max_positions",
                         [(True, None, 0.1, 512), (True, 1, 0.1, 512), (False, 1, 0.35, 512), (True, None, 0.0, 26)],
                         ids=["relpos", "relpos-cache-grows", "no-relpos-cache-grows", "relpos-to-the-position-limit"])
def test_each_steps_bias_from_the_generations_table_equals_the_one_built_from_its_tokens(rel_pos, room, eos_bias,
                                                                                          max_positions, rng,
                                                                                          monkeypatch):
    """``StepBiases`` hands every decoding step the bias that ``attention_bias`` builds from the
    step's own descriptions (the rule and the relative positions), bit for bit and -inf where
    forbidden, its rows 8-aligned: beam search over sources of several lengths (padding), the batch
    shrinking as sentences end, the cache's room (so the table) growing."""
    if room:
        monkeypatch.setattr(seq2seq_views, "CACHE_ROOM", room)
    d = make_dictionary()
    model = tiny_model(d, seed=3, no_rel_pos=not rel_pos, max_positions=max_positions)
    real_forward = type(model.transformer).forward
    checked = collections.Counter()

    def checking(self, tokens, positions, segments, kinds, steps, prefix_len=None, past=None, return_kv=False,
                 bias=None, read=None):
        if bias is not None:
            q = TokenDescription(kinds, steps, positions)
            want = self.attention_bias(q, past.describe(q), torch.float32)
            got = bias(torch.float32)
            assert got.shape == want.shape and torch.equal(got, want)
            assert got.stride(-2) % 8 == 0
            checked[tokens.size(0)] += 1
        return real_forward(self, tokens, positions, segments, kinds, steps, prefix_len, past, return_kv, bias,
                            read)

    monkeypatch.setattr(type(model.transformer), "forward", checking)
    # the relative bias's windows over the model's limit, as on a GPU (where the batch's would cost a sync)
    monkeypatch.setattr(type(model.transformer), "position_bound", lambda self, q_pos, k_pos: max_positions)
    with torch.no_grad():
        model.transformer.lm_head.bias[d.eos()] = eos_bias
    src, lens, _, _ = random_pairs(d, rng)
    gen = SequenceGenerator([model], d, beam_size=3, max_len_b=12, min_len=2)
    with torch.no_grad():
        gen.forward({"net_input": {"src_tokens": src, "src_lengths": lens}})
    assert sum(checked.values()) >= 8  # steps past the room's growths
    assert len(checked) > 1 or not eos_bias  # the batch shrank


def test_beam_search_keeps_one_copy_of_the_source_keys_per_sentence_and_steps_write_in_place(rng):
    """fairseq's expansion to beam rows moves pointers, not the encoder's per-layer keys; a step
    writes its keys into the cache's room (no new buffer), and a reorder among one sentence's
    beams rewrites the target's slots only."""
    d = make_dictionary()
    model = tiny_model(d, seed=5)
    src, lens, _, _ = random_pairs(d, rng)
    beam = 3
    with torch.no_grad():
        enc = model.encoder(src, lens)
        expand = torch.arange(src.size(0)).repeat_interleave(beam)
        wide = model.encoder.reorder_encoder_out(enc, expand)
        assert all(a is b for a, b in zip(wide["kv"], enc["kv"])) and wide["kv"][0].size(0) == src.size(0)
        assert torch.equal(wide["rows"][0], expand) and torch.equal(wide["src_len"][0], lens[expand])
        prev, state = torch.full((len(expand), 1), d.eos()), {}
        for t in range(3):
            model.decoder(prev, wide, incremental_state=state)
            cache = model.decoder.get_incremental_state(state, "cache")
            if t == 0:
                buffer, S = cache.kv, cache.source_len
                source = buffer[..., :S, :].clone()
            assert cache.kv is buffer  # written in place
            order = torch.arange(len(expand)).view(-1, beam).flip(1).reshape(-1)  # beams swap within a sentence
            model.decoder.reorder_incremental_state(state, order)
            wide = model.encoder.reorder_encoder_out(wide, order)
            assert cache.kv is buffer and torch.equal(buffer[..., :S, :], source)  # the source's slots untouched
            prev = torch.cat([prev, torch.randint(4, 100, (len(expand), 1))], 1)


def test_no_repeat_ngram_size_blocks_every_repeated_ngram(tmp_path, rng):
    """This fairseq build's Python blocker bans nothing (fairseq #5206); the task's generator
    must never emit an n-gram twice, and the unfixed one shows the model would repeat."""
    task = seq2seq_task(tmp_path, max_source_positions=16)
    model = tiny_model(task.dictionary, seed=3)
    src, lens, _, _ = random_pairs(task.dictionary, rng)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lens}}

    def repeats(gen, n):
        with torch.no_grad():
            hyps = [h["tokens"].tolist() for beams in gen.forward(sample) for h in beams]
        return sum(len(g) - len(set(g)) for g in ([tuple(t[i:i + n]) for i in range(len(t) - n + 1)] for t in hyps))

    for n in (2, 3):
        args = GenerationConfig(beam=4, max_len_a=0, max_len_b=20, min_len=20, no_repeat_ngram_size=n)
        assert repeats(SequenceGenerator([model], task.dictionary, beam_size=4, max_len_b=20, min_len=20,
                                         no_repeat_ngram_size=n), n) > 0  # the bug this guards against
        assert repeats(task.build_generator([model], args), n) == 0


def test_no_repeat_ngram_size_1_bans_decoded_tokens_but_not_the_end(tmp_path, rng):
    """The start symbol (fairseq's EOS at position 0) is no decoded token: banning it as a
    "repeat" left no hypothesis an end, and the generator stopped on an AssertionError."""
    task = seq2seq_task(tmp_path, max_source_positions=16)
    model = tiny_model(task.dictionary, seed=3)
    src, lens, _, _ = random_pairs(task.dictionary, rng)
    gen = task.build_generator([model], GenerationConfig(beam=4, max_len_a=0, max_len_b=6, no_repeat_ngram_size=1))
    with torch.no_grad():
        hyps = [h["tokens"].tolist() for beams in gen.forward({"net_input": {"src_tokens": src, "src_lengths": lens}})
                for h in beams]
    assert len(hyps) == 4 * len(src)
    assert all(t[-1] == task.dictionary.eos() and len(set(t)) == len(t) for t in hyps)


def s2sft_banned(seq, n, ignore):
    """s2s-ft's rule (decode_seq2seq's --forbid_duplicate_ngrams with --forbid_ignore_word), over
    the decoded tokens ``seq``: the tokens that would repeat an n-gram, none if the n-1 newest
    tokens hold an ignored word, never an ignored word itself."""
    if len(seq) < n - 1 or any(t in ignore for t in seq[len(seq) - n + 1:]):
        return set()
    tail = seq[len(seq) - n + 1:]
    return {seq[i + n - 1] for i in range(len(seq) - n + 1) if seq[i:i + n - 1] == tail} - set(ignore)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_no_repeat_ngram_ignore_bans_what_s2s_ft_bans(n):
    """Over random decoded rows of a 4-word vocabulary (so repeats abound): the blocker bans
    exactly s2s-ft's candidates, with and without an ignored word, and the worked example of
    its docstring holds."""
    from fairseq_pmlm.modules.ngram_repeat_block import PrefixNGramRepeatBlock

    rng = np.random.default_rng(n)
    eos, dot = 2, 5
    for ignore in ((), (dot,)):
        block = PrefixNGramRepeatBlock(n, ignore)
        for _ in range(200):
            seq = rng.integers(4, 8, int(rng.integers(0, 12))).tolist()
            lprobs = block(torch.tensor([[eos] + seq]), torch.zeros(1, 8), 1, 1, len(seq))
            assert set(torch.nonzero(lprobs[0].isinf()).flatten().tolist()) == s2sft_banned(seq, n, ignore)
    a, b, c, x, y = 4, 6, 7, 6, 7
    block = PrefixNGramRepeatBlock(3, (dot,))
    for seq, banned in (([a, b, c, dot, a, b], {c}), ([a, b, dot, a, b], set()), ([x, dot, y, x, dot], set())):
        lprobs = block(torch.tensor([[eos] + seq]), torch.zeros(1, 8), 1, 1, len(seq))
        assert set(torch.nonzero(lprobs[0].isinf()).flatten().tolist()) == banned
        assert (s2sft_banned(seq, 3, ()) != banned) == (seq != [a, b, c, dot, a, b])  # "." made the difference


def test_no_repeat_ngram_ignore_lets_decoding_repeat_only_ngrams_holding_the_word(tmp_path, rng):
    """Decoding with --no-repeat-ngram-size 3: without --no-repeat-ngram-ignore no trigram comes
    twice; with a word ignored (one the model is made to like, so it recurs) trigrams holding it
    do come twice, the others still never."""
    src, lens, _, _ = random_pairs(make_dictionary(), rng)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lens}}
    args = GenerationConfig(beam=4, max_len_a=0, max_len_b=20, min_len=20, no_repeat_ngram_size=3)
    repeated = {}
    for ignore in ("", "w7"):
        task = seq2seq_task(tmp_path, max_source_positions=16, no_repeat_ngram_ignore=ignore)
        word = task.dictionary.index("w7")
        model = tiny_model(task.dictionary, seed=3)
        with torch.no_grad():
            model.transformer.lm_head.bias[word] += 2.0
            hyps = [h["tokens"].tolist() for beams in task.build_generator([model], args).forward(sample)
                    for h in beams]
        trigrams = [[tuple(t[i:i + 3]) for i in range(len(t) - 2)] for t in hyps]
        repeated[ignore] = [g for gs in trigrams for g in set(gs) if gs.count(g) > 1]
        assert all(word in g for g in repeated[ignore])
    assert not repeated[""] and repeated["w7"]


def test_no_repeat_ngram_ignore_refuses_a_word_not_in_the_dictionary_and_a_ban_that_is_off(tmp_path):
    model = tiny_model(make_dictionary(), seed=3)
    task = seq2seq_task(tmp_path, max_source_positions=16, no_repeat_ngram_ignore="w7 .")
    with pytest.raises(BadInput, match=r"^--no-repeat-ngram-ignore: neither '\.' nor '\u2581\.' is a symbol"):
        task.build_generator([model], GenerationConfig(beam=2, max_len_a=0, max_len_b=8, no_repeat_ngram_size=3))
    task = seq2seq_task(tmp_path, max_source_positions=16, no_repeat_ngram_ignore="w7")
    with pytest.raises(BadInput, match="--no-repeat-ngram-size, which is off"):
        task.build_generator([model], GenerationConfig(beam=2, max_len_a=0, max_len_b=8))
    d = task.dictionary  # sentencepiece's word-start form counts as the word
    d.add_symbol("\u2581w8")
    gen = task.build_generator([model], GenerationConfig(beam=2, max_len_a=0, max_len_b=8, no_repeat_ngram_size=3),
                               )
    assert gen.repeat_ngram_blocker.ignore == {d.index("w7")}
    task.cfg.no_repeat_ngram_ignore = "w8"
    gen = task.build_generator([model], GenerationConfig(beam=2, max_len_a=0, max_len_b=8, no_repeat_ngram_size=3))
    assert gen.repeat_ngram_blocker.ignore == {d.index("w8"), d.index("\u2581w8")}


@pytest.mark.parametrize("formula", ["fairseq", "gnmt"])
def test_eos_at_limit_free_scores_an_open_hypothesis_without_eos(formula, tmp_path, rng):
    """--eos-at-limit free (s2s-ft): a hypothesis that reaches --max-len-b tokens ends there with
    EOS's per-position score 0, and its score divides the sum by the divisor of L = its tokens
    without EOS; hypotheses that ended earlier score as with forced (fairseq's default), and the
    n-best list is ranked by the scores."""
    src, lens, _, _ = random_pairs(make_dictionary(), rng)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lens}}
    limit, kinds, forced = 6, set(), []
    for bias in (0.0, 0.2, 0.3):  # EOS about as likely as a word: hypotheses end early, at the limit, or both
        out = {}
        for mode in ("forced", "free"):
            task = seq2seq_task(tmp_path, max_source_positions=16, lenpen_formula=formula, eos_at_limit=mode)
            model = tiny_model(task.dictionary, seed=4)
            with torch.no_grad():
                model.transformer.lm_head.bias[task.dictionary.eos()] += bias
                out[mode] = task.build_generator([model], GenerationConfig(beam=4, max_len_a=0, max_len_b=limit,
                                                                           lenpen=0.6)).forward(sample)
        for beams in out["free"]:
            for h in beams:
                n, pos = len(h["tokens"]), h["positional_scores"]
                at_limit = n == limit + 1
                kinds.add(at_limit)
                length = n - 1 if at_limit else n
                divisor = ((5 + length) / 6) ** 0.6 if formula == "gnmt" else length ** 0.6
                assert (float(pos[-1]) == 0.0) == at_limit
                assert abs(float(h["score"]) - float(pos.sum()) / divisor) < 1e-5
            scores = [float(h["score"]) for h in beams]
            assert scores == sorted(scores, reverse=True)
        forced += [h for beams in out["forced"] for h in beams if len(h["tokens"]) == limit + 1]
    assert kinds == {True, False}
    assert forced and all(float(h["positional_scores"][-1]) < 0 for h in forced)  # fairseq's EOS costs


def s2sft_search_reference(model, d, src, length, beam, steps, lenpen, ignore=()):
    """s2s-ft's beam search for one source, written from its decode loop with plain lists and a
    full teacher-forced pass per slot and step (no incremental state, no batching): slots, the
    -10000 on an ended slot's offers, the beam x beam offers, the pick over every step's ended
    hypotheses and the last step's open ones with the GNMT penalty. Returns every candidate as
    (score, tokens), best first."""
    never = [d.bos(), d.pad(), d.index("[MASK]"), d.index("[P]")]

    def offers(seq):  # the slot's ``beam`` likeliest next tokens and their log-probabilities
        prev = torch.tensor([[d.eos()] + seq])
        with torch.no_grad():
            lp = model(src[None, :length], src_lengths=torch.tensor([length]), prev_output_tokens=prev)[0]
        lp = lp[0, -1].log_softmax(-1)
        lp[never] = -math.inf
        lp[sorted(s2sft_banned(seq, 3, ignore))] = -math.inf
        if not seq:  # min_len 1 (s2s-ft's default and fairseq's): no EOS first
            lp[d.eos()] = -math.inf
        top = lp.topk(beam)
        return list(zip(top.values.tolist(), top.indices.tolist()))

    frames = []  # per step: [(score, token, back pointer)] for each slot
    slots = [([], 0.0, False)]  # (tokens, summed log-probability, ended)
    for _ in range(steps):
        cands = []
        for back, (seq, total, ended) in enumerate(slots):
            cands += [(total + lp + (-10000.0 if ended else 0.0), tok, back) for lp, tok in offers(seq)]
        cands = sorted(cands, key=lambda c: -c[0])[:beam]  # (stable: ties keep the offers' order)
        frames.append(cands)
        slots = [(slots[back][0] + [tok], score, tok == d.eos()) for score, tok, back in cands]
        if all(tok == d.eos() for _, tok, _ in cands):
            break
    picks = []
    for t, cands in enumerate(frames):
        for k, (score, tok, _) in enumerate(cands):
            if (tok == d.eos() or t == len(frames) - 1) and score > -5000:  # not an ended slot's offer
                seq, j = [], k
                for s in range(t, -1, -1):
                    seq.append(frames[s][j][1])
                    j = frames[s][j][2]
                picks.append((score / ((5 + t + 1) / 6) ** lenpen, seq[::-1]))
    return sorted(picks, key=lambda p: -p[0])


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_beam_search_s2s_ft_finds_what_s2s_ft_finds(beam, tmp_path, rng):
    """--beam-search s2s-ft (incremental, batched, fairseq's reordering) picks, for each source, the
    tokens and score of s2s-ft's search written out plainly (s2sft_search_reference), with the
    trigram ban and "." exempt; hypotheses that end early and open ones at the limit both occur."""
    src, lens, _, _ = random_pairs(make_dictionary(), rng)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lens}}
    limit, kinds = 5, set()
    for bias in (0.0, 0.3, 0.6, 1.0):  # EOS from rarely to often chosen
        task = seq2seq_task(tmp_path, max_source_positions=16, lenpen_formula="gnmt", beam_search="s2s-ft",
                            no_repeat_ngram_ignore="w7")
        d = task.dictionary
        model = tiny_model(d, seed=4)
        with torch.no_grad():
            model.transformer.lm_head.bias[d.eos()] += bias
            model.transformer.lm_head.bias[d.index("w7")] += 1.0
            gen = task.build_generator([model], GenerationConfig(beam=beam, max_len_a=0, max_len_b=limit, lenpen=0.6,
                                                                 no_repeat_ngram_size=3))
            out = gen.forward(sample)
        for i, hypos in enumerate(out):
            want = s2sft_search_reference(model, d, src[i], int(lens[i]), beam, limit + 1, 0.6,
                                          ignore={d.index("w7")})
            assert len(hypos) == min(beam, len(want))
            for h, (score, _) in zip(hypos, want):  # the n-best list, ties (within 1e-4) in either order
                got = h["tokens"].tolist()
                assert abs(float(h["score"]) - score) < 1e-4, (bias, i)
                assert got in [w if w[-1] == d.eos() else w + [d.eos()] for v, w in want if abs(v - score) < 1e-4]
                length = len(got) - (float(h["positional_scores"][-1]) == 0.0)  # an open one's EOS scores 0
                assert abs(float(h["positional_scores"].sum()) - score * ((5 + length) / 6) ** 0.6) < 1e-4
            kinds.add(want[0][1][-1] == d.eos())
    assert kinds == {True, False}


def test_beam_search_s2s_ft_refuses_the_search_flags_it_has_no_counterpart_for(tmp_path):
    task = seq2seq_task(tmp_path, max_source_positions=16, beam_search="s2s-ft")
    model = tiny_model(task.dictionary, seed=4)
    for flags, name in ((dict(sampling=True), "--sampling"), (dict(match_source_len=True), "--match-source-len"),
                        (dict(diverse_beam_groups=2), "--diverse-beam-groups"), (dict(prefix_size=1), "--prefix-size"),
                        (dict(lm_path="lm.pt"), "--lm-path")):
        with pytest.raises(BadInput, match=f"^{name} with --beam-search s2s-ft"):
            task.build_generator([model], GenerationConfig(beam=2, max_len_a=0, max_len_b=8, **flags))


@pytest.mark.parametrize("formula", ["fairseq", "gnmt"])
def test_lenpen_formula_divides_the_summed_log_probs_as_named(formula, tmp_path, rng):
    """gnmt: sum(log p) / ((5 + L) / 6) ** lenpen (s2s-ft); fairseq: sum(log p) / L ** lenpen;
    L counts the EOS. The n-best list is ranked by that score."""
    task = seq2seq_task(tmp_path, max_source_positions=16, lenpen_formula=formula)
    model = tiny_model(task.dictionary, seed=4)
    with torch.no_grad():  # EOS a little likelier: hypotheses end at several lengths
        model.transformer.lm_head.bias[task.dictionary.eos()] += 0.3
    src, lens, _, _ = random_pairs(task.dictionary, rng)
    gen = task.build_generator([model], GenerationConfig(beam=4, max_len_a=0, max_len_b=12, lenpen=0.6))
    with torch.no_grad():
        out = gen.forward({"net_input": {"src_tokens": src, "src_lengths": lens}})
    lengths = set()
    for beams in out:
        for h in beams:
            n = len(h["tokens"])
            lengths.add(n)
            divisor = ((5 + n) / 6) ** 0.6 if formula == "gnmt" else n ** 0.6
            assert abs(float(h["score"]) - float(h["positional_scores"].sum()) / divisor) < 1e-4
        scores = [float(h["score"]) for h in beams]
        assert scores == sorted(scores, reverse=True)
    assert len(lengths) > 1  # hypotheses of several lengths were compared


def test_tokens_that_are_never_text_are_never_emitted(tmp_path, rng):
    """[P], [MASK] and <s> (and fairseq's <pad>) are in the output softmax; a model that
    prefers them still decodes only text tokens and EOS."""
    task = seq2seq_task(tmp_path, max_source_positions=16)
    d = task.dictionary
    never = [d.bos(), d.pad(), d.index("[MASK]"), d.index("[P]")]
    model = tiny_model(d, seed=2)
    with torch.no_grad():
        model.transformer.lm_head.bias[never] += 20.0
    src, lens, _, _ = random_pairs(d, rng)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lens}}
    with torch.no_grad():
        stock = SequenceGenerator([model], d, beam_size=4, max_len_b=8).forward(sample)
        ours = task.build_generator([model], GenerationConfig(beam=4, max_len_a=0, max_len_b=8)).forward(sample)
    def emitted(out):
        return {t for beams in out for h in beams for t in h["tokens"].tolist()}

    assert emitted(stock) & set(never)  # the stock generator does emit them
    assert not emitted(ours) & set(never)


def test_prefix_sampling_and_nbest_behave_as_for_fairseq_models(rng):
    d = make_dictionary()
    model = tiny_model(d, seed=5)
    src, lens, _, _ = random_pairs(d, rng)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lens}}
    prefix = torch.tensor([[7, 8], [9, 10], [11, 12], [13, 14]])
    with torch.no_grad():
        forced = SequenceGenerator([model], d, beam_size=3, max_len_b=6).forward(sample, prefix_tokens=prefix)
        nbest = SequenceGenerator([model], d, beam_size=4, max_len_b=6).forward(sample)
        torch.manual_seed(0)
        from fairseq.search import Sampling
        sampling = Sampling(d, sampling_topk=5)
        sampled = SequenceGenerator([model], d, beam_size=2, max_len_b=6, search_strategy=sampling).forward(sample)
    for b in range(4):
        assert all(torch.equal(h["tokens"][:2], prefix[b]) for h in forced[b])
        scores = [float(h["score"]) for h in nbest[b]]
        assert len(scores) == 4 and scores == sorted(scores, reverse=True)
        for h in sampled[b]:
            assert h["tokens"][-1] == d.eos() and len(h["tokens"]) <= 7


def test_position_table_extends_cyclically_for_longer_inputs():
    d = make_dictionary()
    short = tiny_model(d, max_positions=16)
    long = tiny_model(d, seed=1, max_positions=40)
    long.load_state_dict(short.state_dict())
    old, new = short.transformer.embed_positions.weight, long.transformer.embed_positions.weight
    assert torch.equal(new, torch.cat([old, old, old[:8]]))


def seq2seq_task(tmp_path, **cfg):
    d = make_dictionary()
    d.save(str(tmp_path / "dict.txt"))
    return PMLMSeq2SeqTask.setup_task(PMLMSeq2SeqConfig(data=str(tmp_path), **{"seed": 1, "train_subset": "train",
                                                                                **cfg}))


def test_training_and_inference_lay_the_source_out_alike(tmp_path):
    """``[SOS] SRC [EOS]``, truncated to --max-source-positions, has one builder: binarized lines
    (training) and fairseq-interactive's encoded lines (inference) come out the same."""
    from fairseq.data import ListDataset

    task = seq2seq_task(tmp_path, max_source_positions=6)
    d = task.dictionary
    lines = [torch.tensor(t + [d.eos()]) for t in ([5, 6, 7], [5, 6, 7, 8, 9, 10, 11], [])]
    train = task.source_view(ListDataset(lines, np.array([len(t) for t in lines])))
    infer = task.build_dataset_for_inference(lines, [len(t) for t in lines])
    want = [[d.bos(), 5, 6, 7, d.eos()], [d.bos(), 5, 6, 7, 8, d.eos()], [d.bos(), d.eos()]]
    assert [train[i].tolist() for i in range(3)] == [infer[i]["source"].tolist() for i in range(3)] == want


def test_word_drop_corrupts_target_inputs_80_10_10_never_the_start_symbol_and_alike_per_batch():
    """s2s-ft's word drop is pre-training's corruption (data/blockwise_masking.py, corrupt): about
    --target-mask-prob of the target inputs are hit, 80% become [MASK], 10% a random ordinary
    token, 10% stay; the start symbol, padding and the targets are untouched; the same batch
    (seed, epoch, ids) is dropped alike."""
    from fairseq.data import ListDataset

    from fairseq_pmlm.symbols import MASK_SYMBOL
    from fairseq_pmlm.tasks.pmlm_seq2seq import WordDropPairDataset

    d, rng, n = make_dictionary(), np.random.default_rng(0), 64
    src = [torch.tensor([d.bos(), 5, 6, d.eos()])] * n
    tgt = [torch.tensor(rng.integers(d.nspecial, d.nspecial + 100, int(rng.integers(20, 40))).tolist() + [d.eos()])
           for _ in range(n)]
    sizes = np.array([len(t) for t in tgt])

    def dataset(drop_prob):
        return WordDropPairDataset(ListDataset(src, np.full(n, 4)), np.full(n, 4), d, ListDataset(tgt, sizes), sizes,
                                   d, left_pad_source=False, left_pad_target=False, drop_prob=drop_prob,
                                   mask_idx=d.index(MASK_SYMBOL), seed=1)

    dropping, clean = dataset(0.5), dataset(0.0)
    samples = [dropping[i] for i in range(n)]
    batch, plain = dropping.collater(samples), clean.collater(samples)
    got, was = batch["net_input"]["prev_output_tokens"], plain["net_input"]["prev_output_tokens"]
    assert torch.equal(batch["target"], plain["target"]) and torch.equal(got[:, 0], was[:, 0])
    assert torch.equal(got[was == d.pad()], was[was == d.pad()])
    real = was.ne(d.pad())
    real[:, 0] = False
    changed = got != was
    n_real, n_mask = int(real.sum()), int((got[real] == d.index(MASK_SYMBOL)).sum())
    randoms = got[changed & (got != d.index(MASK_SYMBOL))]
    hit = n_mask / 0.8  # [MASK] is 80% of the hits
    assert abs(hit / n_real - 0.5) < 0.05
    assert abs(len(randoms) / hit - 0.1) < 0.04  # (a random draw equal to the original counts as kept)
    assert set(randoms.tolist()) <= set(range(d.nspecial, d.nspecial + 100))
    assert torch.equal(dropping.collater(samples)["net_input"]["prev_output_tokens"], got)
    dropping.set_epoch(2)
    assert not torch.equal(dropping.collater(samples)["net_input"]["prev_output_tokens"], got)


def test_pseudo_draw_feeds_each_p_a_draw_of_its_target_and_a_dropped_input_that_same_draw(tmp_path):
    """--pseudo-draw (s2s-ft's pseudo-masking): the [P] predicting target t is fed the pseudo token
    (PAD in the batch: the decoder puts it in) 80% of the time, a random ordinary token 10%, target t
    itself 10%; the input holding target t, when dropped, takes that same draw ([MASK] for the pseudo
    token). Training split only."""
    from fairseq.data import ListDataset

    from fairseq_pmlm.symbols import MASK_SYMBOL

    task = seq2seq_task(tmp_path, pseudo_draw=True, target_mask_prob=0.5)
    d, rng, n = task.dictionary, np.random.default_rng(0), 64
    lines = {s: ([torch.tensor([d.bos(), 5, 6, d.eos()])] * n,
                 [torch.tensor(rng.integers(d.nspecial, d.nspecial + 100, int(rng.integers(20, 40))).tolist()
                               + [d.eos()]) for _ in range(n)]) for s in ("train", "valid")}
    task._side = lambda split, lang: ListDataset(lines[split][lang == task.cfg.target_lang],
                                                 np.array([len(t) for t in lines[split][lang == task.cfg.target_lang]]))
    task.load_dataset("train")
    task.load_dataset("valid")
    ds = task.datasets["train"]
    batch = ds.collater([ds[i] for i in range(n)])
    assert "pseudo_tokens" not in task.datasets["valid"].collater([task.datasets["valid"][i] for i in range(n)])[
        "net_input"]
    target, draw = batch["target"], batch["net_input"]["pseudo_tokens"]
    got = batch["net_input"]["prev_output_tokens"]
    was = data_utils.collate_tokens([lines["train"][1][i] for i in batch["id"].tolist()], d.pad(), d.eos(),
                                    move_eos_to_beginning=True)
    real = target.ne(d.pad())
    assert torch.equal(draw[~real], target[~real])  # padding stays padding
    n_real = int(real.sum())
    as_pseudo, as_itself = draw[real].eq(d.pad()), draw[real].eq(target[real])
    assert abs(int(as_pseudo.sum()) / n_real - 0.8) < 0.03 and abs(int(as_itself.sum()) / n_real - 0.1) < 0.03
    assert set(draw[real][~as_pseudo & ~as_itself].tolist()) <= set(range(d.nspecial, d.nspecial + 100))
    own = torch.cat([torch.full_like(draw[:, :1], d.pad()), draw[:, :-1]], 1)  # input j is target j - 1
    own = own.masked_fill(own.eq(d.pad()), d.index(MASK_SYMBOL))
    inputs = was.ne(d.pad())
    inputs[:, 0] = False
    assert torch.equal(got[~inputs], was[~inputs])  # the start symbol and padding untouched
    assert bool(((got == was) | (got == own))[inputs].all())  # a dropped input is its [P]'s draw
    dropped = int(((got == own) & (own != was))[inputs].sum()) / int(((own != was) & inputs).sum())
    assert abs(dropped - 0.5) < 0.05


def test_the_split_named_by_train_subset_is_the_one_with_word_drop_draws_and_shuffling(tmp_path):
    """fairseq-train --train-subset NAME trains on NAME: that split, not one called "train", gets the
    word drop, the [P] draws and the shuffling (the others none)."""
    from fairseq.data import ListDataset

    task = seq2seq_task(tmp_path, train_subset="big", pseudo_draw=True, target_mask_prob=0.5)
    d = task.dictionary
    pairs = [torch.tensor([d.bos(), 5, 6, d.eos()])] * 4
    task._side = lambda split, lang: ListDataset(pairs, np.full(4, 4))
    for split in ("big", "train", "valid"):
        task.load_dataset(split)
    big, train, valid = (task.datasets[s] for s in ("big", "train", "valid"))
    assert (big.drop_prob, big.pseudo_draw, big.shuffle) == (0.5, True, True)
    assert [(ds.drop_prob, ds.pseudo_draw, ds.shuffle) for ds in (train, valid)] == [(0.0, False, False)] * 2


def test_a_p_fed_a_token_changes_only_its_own_prediction_and_the_pseudo_token_changes_nothing(rng):
    """The decoder reads --pseudo-draw's inputs: PAD there is the pseudo token (the same logits
    bit for bit as without them); a [P] fed a word changes its own prediction and no other (no
    other query sees a [P])."""
    d = make_dictionary()
    model = tiny_model(d)
    src, lens, prev, tgt = random_pairs(d, rng)
    with torch.no_grad():
        plain = model(src, src_lengths=lens, prev_output_tokens=prev)[0]
        draws = torch.full_like(tgt, d.pad())
        assert torch.equal(model(src, src_lengths=lens, prev_output_tokens=prev, pseudo_tokens=draws)[0], plain)
        draws[1, 2] = tgt[1, 2]
        fed = model(src, src_lengths=lens, prev_output_tokens=prev, pseudo_tokens=draws)[0]
    moved = (fed - plain).abs().amax(-1) > 0
    assert moved[1, 2] and int(moved.sum()) == 1


def test_source_plus_target_over_the_positions_is_a_clear_error(tmp_path):
    task = seq2seq_task(tmp_path, max_source_positions=480, max_target_positions=48)
    cfg = OmegaConf.structured(UniLMv2Config(_name="unilmv2", encoder_layers=1, encoder_embed_dim=16,
                                             encoder_ffn_embed_dim=16, encoder_attention_heads=2))
    with pytest.raises(ValueError, match=r"--max-source-positions 480 \+ --max-target-positions 48 exceed .* 512"):
        task.build_model(cfg)


def test_max_len_b_beyond_the_positions_left_is_a_clear_error(tmp_path):
    task = seq2seq_task(tmp_path, max_source_positions=464)
    model = tiny_model(task.dictionary)
    task.build_generator([model], GenerationConfig(max_len_b=47))  # 464 + 47 < 512: fine
    with pytest.raises(ValueError, match=r"--max-len-b 48 .* leave 47"):
        task.build_generator([model], GenerationConfig(max_len_b=48))


def test_rouge_scorer_hand_values():
    s = rouge_scores(["the cat sat on the mat"], ["the cat sat on the mat"])
    assert all(abs(v - 100) < 1e-6 for v in s.values())
    s = rouge_scores(["the cat sat"], ["dogs run fast"])
    assert all(v == 0 for v in s.values())
    s = rouge_scores(["a b c d"], ["a b x y"], use_stemmer=False)
    assert abs(s["rouge1"] - 50) < 1e-6 and abs(s["rouge2"] - 100 / 3) < 1e-6


def average_as_fairseq_does(paths):
    """fairseq's scripts/average_checkpoints.py (not in its wheel): the first file's state with each
    model entry summed over the files (fp16 ones as fp32), then divided by their number (floats) or
    floor-divided (any other dtype)."""
    states = [torch.load(p) for p in paths]
    summed = {k: v.float().clone() if v.dtype == torch.half else v.clone() for k, v in states[0]["model"].items()}
    for state in states[1:]:
        for k, v in state["model"].items():
            summed[k] += v
    for v in summed.values():
        if v.is_floating_point():
            v.div_(len(paths))
        else:
            v //= len(paths)
    return {**states[0], "model": summed}


def test_train_then_generate_learns_a_copy_task(tmp_path):
    """fairseq-train -> fairseq-generate -> fairseq-interactive -> the hub on a copy task, its data
    binarized with a translation user's language suffixes (src, tgt: dict.src.txt, no dict.txt).
    Also: pairs with an empty side are skipped and counted, no test sentence is lost to batching
    (45 is not a multiple of --required-batch-size-multiple 8), and the last checkpoints averaged as
    fairseq's average_checkpoints.py does load and decode (a uint8 or bool entry broke it)."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    for split, n in (("train", 600), ("valid", 45)):
        lines = [" ".join(rng.choice(words, 5)) for _ in range(n)]
        src, tgt = list(lines), list(lines)
        if split == "train":
            src[3], tgt[7] = "", ""  # an empty source line and an empty target line
        (tmp_path / f"{split}.src").write_text("\n".join(src) + "\n")
        (tmp_path / f"{split}.tgt").write_text("\n".join(tgt) + "\n")
    langs = ["--source-lang", "src", "--target-lang", "tgt"]
    run("fairseq-preprocess", *langs, "--joined-dictionary",
        "--trainpref", tmp_path / "train", "--validpref", tmp_path / "valid", "--destdir", tmp_path / "bin",
        "--workers", "1")
    user_dir = os.path.join(REPO, "fairseq_pmlm")
    assert not (tmp_path / "bin" / "dict.txt").exists()
    train = run("fairseq-train", tmp_path / "bin", "--user-dir", user_dir, *langs,
                "--task", "pmlm_seq2seq", "--arch", "unilmv2_tiny", "--criterion", "pmlm_seq2seq",
                "--optimizer", "adam", "--lr", "2e-3",
                "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "30", "--batch-size", "32", "--max-update", "400",
                "--dropout", "0.0", "--attention-dropout", "0.0", "--target-mask-prob", "0.2",
                "--max-source-positions", "16", "--max-target-positions", "16",
                "--save-dir", tmp_path / "ckpt", "--no-epoch-checkpoints", "--validate-interval", "1000",
                "--save-interval", "1000", "--save-interval-updates", "30", "--keep-interval-updates", "3",
                "--cpu", "--num-workers", "0", "--seed", "1", "--log-format", "json")
    assert "train: skipped 2 pairs with an empty source or target line" in train.stdout + train.stderr
    assert '"train_accuracy"' in train.stdout  # the criterion reports accuracy by default
    ckpt = tmp_path / "ckpt" / "checkpoint_last.pt"
    out = run("fairseq-generate", tmp_path / "bin", "--user-dir", user_dir, *langs,
              "--task", "pmlm_seq2seq", "--path", ckpt, "--gen-subset", "valid",
              "--beam", "4", "--batch-size", "16", "--max-len-b", "8", "--cpu", "--scoring", "rouge").stdout
    refs = {r.split("\t")[0][2:]: r.split("\t")[1] for r in out.splitlines() if r.startswith("T-")}
    hyps = {r.split("\t")[0][2:]: r.split("\t")[2] for r in out.splitlines() if r.startswith("H-")}
    assert len(hyps) == 45
    exact = sum(hyps[i] == refs[i] for i in refs) / len(refs)
    assert exact >= 0.9, (exact, [(refs[i], hyps[i]) for i in list(refs)[:5]])
    assert "ROUGE-1" in out
    queries = ["w1 w2 w3 w4 w5", "w9 w9 w0 w7 w3", "w11 w4 w4 w2 w8"]
    inter = run("fairseq-interactive", tmp_path / "bin", "--user-dir", user_dir, *langs, "--task", "pmlm_seq2seq",
                "--path", ckpt, "--beam", "4", "--max-len-b", "8", "--cpu", stdin="\n".join(queries) + "\n").stdout
    answers = [r.split("\t")[2] for r in inter.splitlines() if r.startswith("H-")]
    assert sum(a == q for a, q in zip(answers, queries)) >= 2, answers

    # the Python hub finds checkpoint_best.pt and the training data's dictionary (dict.src.txt, from
    # the recorded --source-lang) by itself and decodes as fairseq-interactive does (same generator,
    # same [SOS] SRC [EOS] input)
    from fairseq_pmlm.models.unilmv2 import UniLMv2Model

    hub = UniLMv2Model.from_pretrained(str(tmp_path / "ckpt"))
    assert hub.sample(queries, beam=4, max_len_b=8) == answers
    assert hub.sample(queries[0], beam=4, max_len_b=8) == answers[0]
    tokens = hub.encode(queries[0])
    assert tokens[0] == hub.src_dict.bos() and tokens[-1] == hub.src_dict.eos() and hub.decode(tokens) == queries[0]
    with pytest.raises(ValueError, match="fill_mask: this is a sequence-to-sequence fine-tuned checkpoint"):
        hub.fill_mask("w1 [MASK] w3")

    last3 = sorted((tmp_path / "ckpt").glob("checkpoint_*_*.pt"))
    assert len(last3) == 3 and all(int(p.stem.split("_")[-1]) > 200 for p in last3), last3
    torch.save(average_as_fairseq_does(last3), tmp_path / "ckpt" / "averaged.pt")
    averaged = UniLMv2Model.from_pretrained(str(tmp_path / "ckpt"), checkpoint_file="averaged.pt")
    assert averaged.model.lm_head_trained and torch.equal(averaged.model.dictionary_digest, hub.model.dictionary_digest)
    assert sum(a == q for a, q in zip(averaged.sample(queries, beam=4, max_len_b=8), queries)) >= 2


@pytest.mark.parametrize("preset", ["cnndm", "xsum", "qg", "demo"])
def test_each_presets_decoding_fits_the_positions_it_fine_tunes_with(preset, tmp_path):
    """generate.sh's --max-len-b (MAXLEN) after a source of SRC positions, in a model of POSITIONS
    (finetune.sh's), as the generator checks it; the paper presets' MAXLEN was TGT, one over (every
    generate.sh --preset cnndm, xsum or qg stopped before decoding)."""
    script = f"source {REPO}/scripts/s2s/presets.sh; preset {preset}; echo $SRC $TGT $POSITIONS $MAXLEN"
    src, tgt, positions, maxlen = map(int, subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                                                          check=True).stdout.split())
    assert maxlen == tgt - 1  # the longest target fine-tuning trains: TGT - 1 tokens and the EOS
    task = seq2seq_task(tmp_path, max_source_positions=src, max_target_positions=tgt)
    model = tiny_model(task.dictionary, max_positions=positions)
    task.build_generator([model], GenerationConfig(max_len_b=maxlen))
