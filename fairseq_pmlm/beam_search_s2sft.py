"""s2s-ft's beam search (``--beam-search s2s-ft``), on fairseq's incremental decoding.

fairseq's search keeps ``beam`` open hypotheses a step (it picks them from 2 x ``beam``
candidates, so an ended one never takes a place) and ends a sentence once ``beam`` hypotheses
have ended. Microsoft's s2s-ft decoder, which the paper's decoding settings were tuned on, keeps
``beam`` *slots* a step instead:

- step 0: the ``beam`` likeliest first tokens;
- step t: each slot offers its ``beam`` likeliest next tokens, its score added; a slot that
  ended in EOS offers them at -10000 below, so it drops out unless nothing else is left; the
  ``beam`` best of the ``beam`` x ``beam`` offers are the new slots. Ended hypotheses thus hold
  no slot after their step: the next slots all descend from the open ones, fewer than ``beam``
  when some ended;
- it runs to the length limit (or until a step whose every slot is EOS; here: until no slot is
  open, since an ended slot's descendants, near -10000, never win) and then picks, over
  every step up to there, the best of the hypotheses that ended (EOS included in their length)
  and of the last step's open ones (no EOS), each score divided by the length penalty.

The limit: ``--max-len-b`` + 1 steps, as many as fairseq's search takes, so a hypothesis has at
most ``--max-len-b`` tokens and EOS, as there, and an open one ``--max-len-b`` + 1 tokens (s2s-ft's
``max_tgt_length``, the target length, with the presets' ``--max-len-b`` of the target length - 1).

Worked example, beam 2. Step 2's slots: "a b EOS" (-2.0) and "a c" (-2.5). Step 3's offers:
"a c d" (-3.0), "a c e" (-3.4), and the ended slot's two at -10002.0 or below: the new slots are
"a c d" and "a c e" (fairseq's search would have kept a second open hypothesis from step 2 as
well). In the final pick, "a b EOS" (L = 3) meets every later ended hypothesis and the open ones
of the last step.

Each step feeds the slots' tokens (an ended slot's EOS too) through the decoder's incremental
state, reordered by the slots' back pointers as fairseq's generator reorders it.
"""
import math

import torch

from .errors import BadInput

DEAD = -10000.0  # what s2s-ft adds to an ended slot's offers


def s2sft_beam_search(gen, sample, prefix_tokens=None, constraints=None, bos_token=None):
    """fairseq's ``_generate`` output (per sentence, hypotheses best first) for ``gen`` (a
    PMLMSequenceGenerator: its model, beam, lengths, banned tokens, n-gram blocker, length
    penalty formula) searched as s2s-ft searches."""
    if prefix_tokens is not None or constraints is not None:
        raise BadInput("--beam-search s2s-ft takes no prefix tokens or constraints (--prefix-size, "
                       "--constraints, inference_step_args): decode with --beam-search fairseq")
    net = sample["net_input"]
    src_tokens = net["src_tokens"]
    bsz, src_len = src_tokens.shape[:2]
    K = gen.beam_size
    max_len = min(int(gen.max_len_a * src_len + gen.max_len_b), gen.max_len - 1)
    model = gen.model
    states = [{} for _ in range(model.models_size)]
    enc = model.forward_encoder(net)
    rows = torch.arange(bsz, device=src_tokens.device).repeat_interleave(K)
    enc = model.reorder_encoder_out(enc, rows)
    tokens = torch.full((bsz * K, 1), gen.eos if bos_token is None else bos_token, dtype=torch.long,
                        device=src_tokens.device)
    offsets = (torch.arange(bsz, device=src_tokens.device) * K).unsqueeze(1)
    ids, backs, totals, ended = [], [], [], []  # per step: [bsz, K]
    done = torch.zeros(bsz, dtype=torch.bool, device=src_tokens.device)  # no open slot left
    for step in range(max_len + 1):  # max_len + 1 tokens at most, EOS included, as fairseq's search
        lprobs, _ = model.forward_decoder(tokens, enc, states, gen.temperature)
        lprobs[lprobs != lprobs] = -math.inf
        lprobs[:, gen.pad] = -math.inf
        lprobs[:, gen.unk] -= gen.unk_penalty
        if step < gen.min_len:
            lprobs[:, gen.eos] = -math.inf
        if gen.token_indices_to_suppress is not None:
            lprobs[:, gen.token_indices_to_suppress] = -math.inf
        if gen.repeat_ngram_blocker is not None:
            lprobs = gen.repeat_ngram_blocker(tokens, lprobs, bsz, K, step)
        offer_scores, offer_ids = lprobs.topk(K, dim=-1)  # [bsz * K, K]
        if step == 0:  # every slot holds the same start: the first slot's offers
            score, pick = offer_scores.view(bsz, K, K)[:, 0].contiguous(), offer_ids.view(bsz, K, K)[:, 0].contiguous()
            back = torch.zeros_like(pick)
        else:
            offer_scores = offer_scores + (ended[-1].view(-1, 1) * DEAD + totals[-1].view(-1, 1))
            score, flat = offer_scores.view(bsz, K * K).topk(K, dim=-1)
            back = torch.div(flat, K, rounding_mode="floor")
            pick = offer_ids.view(bsz, K * K).gather(1, flat)
        ids.append(pick)
        backs.append(back)
        totals.append(score)
        ended.append(pick.eq(gen.eos).to(score.dtype))
        # a slot that descends from an ended one sits near DEAD: every hypothesis it could still
        # give loses to the one that ended, so a sentence without an open slot has its answer
        done |= ~(pick.ne(gen.eos) & score.gt(DEAD / 2)).any(dim=1)
        if bool(done.all()):
            break
        order = (back + offsets).view(-1)
        model.reorder_incremental_state(states, order)
        enc = model.reorder_encoder_out(enc, order)
        tokens = torch.cat([tokens[order], pick.reshape(-1, 1)], dim=1)
    return [_pick(gen, b, ids, backs, totals) for b in range(bsz)]


def _pick(gen, b, ids, backs, totals):
    """Sentence ``b``'s hypotheses, best first: every ended one and the last step's open ones
    (after a step whose slots all ended, s2s-ft's end, every slot is an ended one's offer, so the
    DEAD test below leaves those out); each as fairseq's generator gives it."""
    ids = [x[b].tolist() for x in ids]
    backs = [x[b].tolist() for x in backs]
    totals = [x[b].tolist() for x in totals]
    last = len(ids) - 1
    cands = []
    for t in range(last + 1):
        for k, token in enumerate(ids[t]):
            if (token == gen.eos or t == last) and totals[t][k] > DEAD / 2:  # (not an ended slot's offer)
                length = t + 1  # the tokens of steps 0..t: EOS included if it ended
                cands.append((totals[t][k] / gen.length_divisor(length), t, k))
    cands.sort(key=lambda c: -c[0])
    out = []
    for score, t, k in cands[: max(gen.beam_size, 1)]:
        path, cum = [], []
        for s in range(t, -1, -1):  # back along the slots' pointers
            path.append(ids[s][k])
            cum.append(totals[s][k])
            k = backs[s][k]
        path.reverse()
        cum.reverse()
        if path[-1] != gen.eos:  # open at the limit: ends as it stands, its EOS scored 0
            path.append(gen.eos)
            cum.append(cum[-1])
        cum = torch.tensor(cum)
        positional = torch.cat([cum[:1], cum[1:] - cum[:-1]])
        out.append({"tokens": torch.tensor(path), "score": torch.tensor(score), "attention": torch.empty(0),
                    "alignment": torch.empty(0), "positional_scores": positional})
    return out
