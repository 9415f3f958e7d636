"""How Microsoft's s2s-ft decodes a model (its decode_seq2seq.py, greedy path), re-implemented from
an s2s-ft directory (``pytorch_model.bin`` in the released UniLMv2 layout, ``config.json``,
``vocab.txt``), for the tests that an export decodes there as in the plugin. Written from s2s-ft's
input layout and the key names, not from the plugin's code:

- the source is tokenised by BERT's WordPiece tokenizer over ``vocab.txt``, cut to
  ``max_source_len - 2`` pieces, as ``[CLS] SRC [SEP]``: segment 0, positions 0..s-1;
- step t (0-based) feeds the pseudo token that predicts target t, which is always **[MASK]'s id**
  (s2s-ft's ``mask_word_id``), at position s + t, segment 1, after the targets chosen so far
  (positions s..s+t-1, segment 1); earlier pseudo tokens are gone (s2s-ft keeps the states of the
  chosen tokens only, and the next chosen token takes the pseudo token's place);
- who sees whom: the source sees the source; a target position sees the source and the target
  positions up to itself (s2s-ft's lower-triangular mask over the target part);
- each layer: BERT's post-LayerNorm block with the fused ``qkv_linear`` (``q_bias``, ``v_bias``, no
  key bias), scores plus the relative table's bias at T5's bucket of position(key) -
  position(query); the MLM head tied to the word embedding, plus its bias. Greedy: argmax, until
  [SEP] or ``max_len`` tokens; each chosen token's log-probability is returned with it.

Recomputing the whole sequence at each step gives what s2s-ft's cached states give: a chosen
token's states depend only on what it may see, which the next steps do not change.
"""
import json
import os

import torch

f = torch.nn.functional


class S2SFTGreedy:
    def __init__(self, directory, lower_case=True, eps=None):
        """``eps``: LayerNorm epsilon (default config.json's; s2s-ft's decoder hard-codes 1e-5)."""
        from transformers import BertTokenizer
        from transformers.models.t5.modeling_t5 import T5Attention

        self.sd = {k: v.float() for k, v in torch.load(os.path.join(directory, "pytorch_model.bin")).items()}
        with open(os.path.join(directory, "config.json")) as fh:
            self.config = json.load(fh)
        self.eps = self.config["layer_norm_eps"] if eps is None else eps
        self.tokenizer = BertTokenizer(os.path.join(directory, "vocab.txt"), do_lower_case=lower_case)
        with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as fh:
            self.vocab = [line.rstrip("\n") for line in fh]
        self.ids = {t: i for i, t in enumerate(self.vocab)}
        self.bucket = T5Attention._relative_position_bucket

    def _ln(self, x, p):
        return f.layer_norm(x, x.shape[-1:], self.sd[p + ".weight"], self.sd[p + ".bias"], self.eps)

    def _lin(self, x, p):
        return f.linear(x, self.sd[p + ".weight"], self.sd[p + ".bias"])

    def logits(self, ids, types, positions, allowed):
        """MLM logits of the last position; ``allowed[i, j]``: position i may see position j."""
        sd, c = self.sd, self.config
        T, dim, heads = len(ids), c["hidden_size"], c["num_attention_heads"]
        ids, types, positions = (torch.tensor(v) for v in (ids, types, positions))
        e = "bert.embeddings."
        x = (sd[e + "word_embeddings.weight"][ids] + sd[e + "position_embeddings.weight"][positions]
             + sd[e + "token_type_embeddings.weight"][types])
        x = self._ln(x, e + "LayerNorm")
        bias = torch.where(allowed, 0.0, -10000.0)[None]  # s2s-ft's (1 - mask) * -10000
        if c.get("rel_pos_bins"):
            rel = self.bucket(positions[None, :] - positions[:, None], True, c["rel_pos_bins"], c["max_rel_pos"])
            bias = bias + sd["bert.encoder.rel_pos_bias.weight"][:, rel]
        for i in range(c["num_hidden_layers"]):
            p = f"bert.encoder.layer.{i}."
            a = p + "attention.self."
            qkv_bias = torch.cat([sd[a + "q_bias"], torch.zeros_like(sd[a + "v_bias"]), sd[a + "v_bias"]])
            q, k, v = f.linear(x, sd[a + "qkv_linear.weight"], qkv_bias).view(T, 3, heads, -1).permute(1, 2, 0, 3)
            att = (q @ k.transpose(-1, -2) / q.size(-1) ** 0.5 + bias).softmax(-1) @ v
            x = self._ln(x + self._lin(att.transpose(0, 1).reshape(T, dim), p + "attention.output.dense"),
                         p + "attention.output.LayerNorm")
            x = self._ln(x + self._lin(f.gelu(self._lin(x, p + "intermediate.dense")), p + "output.dense"),
                         p + "output.LayerNorm")
        h = self._ln(f.gelu(self._lin(x[-1], "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
        return h @ sd[e + "word_embeddings.weight"].T + sd["cls.predictions.bias"]

    def decode(self, text, max_source_len, max_len, banned=(), min_len=0, pseudo="[MASK]"):
        """(pieces, log-probabilities) of the target s2s-ft's greedy decoder gives for ``text``
        (without the final [SEP]). ``banned`` tokens and ``min_len`` are the plugin generator's
        conventions (it never emits [CLS], [PAD], [MASK], [P]; with min_len 1 no empty output),
        which s2s-ft's greedy path lacks: passing them compares the two layouts alone. ``pseudo``:
        the token fed as the pseudo token (s2s-ft's is [MASK])."""
        pieces = self.tokenizer.tokenize(text.strip())[:max_source_len - 2]
        source = [self.ids["[CLS]"]] + self.tokenizer.convert_tokens_to_ids(pieces) + [self.ids["[SEP]"]]
        s, out, scores, banned_ids = len(source), [], [], [self.ids[t] for t in banned]
        while len(out) < max_len:
            T = s + len(out) + 1
            ids = source + out + [self.ids[pseudo]]
            allowed = torch.zeros(T, T, dtype=torch.bool)
            allowed[:, :s] = True
            allowed[s:, s:] = torch.ones(T - s, T - s, dtype=torch.bool).tril()
            logp = self.logits(ids, [0] * s + [1] * (T - s), list(range(T)), allowed).log_softmax(-1)
            allowed_next = logp.clone()
            allowed_next[banned_ids] = float("-inf")
            if len(out) < min_len:
                allowed_next[self.ids["[SEP]"]] = float("-inf")
            best = int(allowed_next.argmax())
            if best == self.ids["[SEP]"]:
                break
            out.append(best)
            scores.append(float(logp[best]))
        return [self.vocab[i] for i in out], scores
