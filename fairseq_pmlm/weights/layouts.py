"""Key layouts: Hugging Face BERT and released UniLMv2 state dicts <-> this model's keys.

Both source layouts use Hugging Face BERT names (``bert.embeddings.*``,
``bert.encoder.layer.N.*``, ``cls.predictions.*``; a bare ``BertModel`` has no ``bert.``
prefix and no head). UniLMv2's release differs (docs/DESIGN.md §7): per layer one fused
``attention.self.qkv_linear.weight`` (q, k, v stacked along dim 0) with ``q_bias`` and
``v_bias`` and no key bias (a key bias adds the same number to every score of a query row,
which the softmax cancels, so it is zero here), and the relative table
``bert.encoder.rel_pos_bias.weight`` [heads, buckets] (s2s-ft's fine-tuned checkpoints put
it at ``bert.rel_pos_bias.weight``; both are read).

Everything is checked against ``config.json`` before any tensor is used; errors are one
line and name the offending keys.
"""
import json

import torch

from ..arch import TransformerShape
from ..errors import BadInput
from ..modules.relative_position import table_problem


class ConversionError(BadInput):
    """A checkpoint, config or vocabulary that cannot be converted (message: one line)."""


def read_json_object(path):
    """A source's JSON file (train_opt.json, tokenizer_config.json, ...) as a dict; else one line naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError) as e:
        raise ConversionError(f"{path}: not readable JSON ({type(e).__name__})") from None
    if not isinstance(spec, dict):
        raise ConversionError(f"{path}: not a JSON object")
    return spec


# present in ordinary BERT checkpoints, not part of this model: dropped on import
IGNORED_PREFIXES = ("pooler.", "cls.seq_relationship.")
IGNORED_KEYS = ("embeddings.position_ids", "embeddings.token_type_ids")
REL_TABLE_KEYS = ("encoder.rel_pos_bias.weight", "rel_pos_bias.weight")
HEAD = "cls.predictions."
# what s2s-ft's fine-tuning save adds (its BertForSequenceToSequence): the output projection as a
# tied copy of the word embedding (checked, dropped), and its label-smoothing loss's constant
# target distribution, a buffer and no weight (dropped)
S2SFT_TIED = HEAD + "decoder_weight"
S2SFT_LOSS_BUFFERS = ("crit_mask_lm_smoothed.one_hot",)


# config.json model types whose weights are BERT's layout: BERT, an ELECTRA discriminator, s2s-ft's
# UniLMv2 and the plugin's export
BERT_LIKE_TYPES = {"bert", "electra", "unilm", "unilmv2"}


def _need(config, key, where):
    if key not in config:
        raise ConversionError(f"{where} lacks {key!r}")
    return config[key]


def read_config(config, where="config.json"):
    """A BERT/UniLMv2 config.json (as a dict) -> (TransformerShape, vocab size); every value read,
    none assumed. ``rel_pos_bins``/``max_rel_pos`` are s2s-ft's names for the relative table
    (``rel_pos_bins`` 0 or absent: none)."""
    kind = config.get("model_type")
    if kind is not None and kind not in BERT_LIKE_TYPES:
        # a bare RoBERTa's keys read like a BERT's, and it converted without a word (its positions
        # start at pad + 1: every output off)
        raise ConversionError(f"{where}: model_type {kind!r} is not BERT's layout (converted: "
                              f"{', '.join(sorted(BERT_LIKE_TYPES))})")
    act = _need(config, "hidden_act", where)
    if act != "gelu":
        raise ConversionError(f"{where}: hidden_act {act!r} is not supported (this model uses exact GELU, 'gelu')")
    pos_type = config.get("position_embedding_type", "absolute")  # Hugging Face's default when absent
    if pos_type != "absolute":
        raise ConversionError(f"{where}: position_embedding_type {pos_type!r} is not supported (only 'absolute')")
    buckets = int(config.get("rel_pos_bins", 0) or 0)
    max_rel = int(config.get("max_rel_pos", 0) or 0)
    if buckets > 0 and max_rel <= 0:
        raise ConversionError(f"{where} has rel_pos_bins {buckets} but no positive max_rel_pos")
    if buckets > 0:
        check_rel_table(buckets, max_rel, f"{where}: rel_pos_bins {buckets}, max_rel_pos {max_rel}")
    shape = TransformerShape(
        encoder_layers=int(_need(config, "num_hidden_layers", where)),
        encoder_embed_dim=int(_need(config, "hidden_size", where)),
        encoder_ffn_embed_dim=int(_need(config, "intermediate_size", where)),
        encoder_attention_heads=int(_need(config, "num_attention_heads", where)),
        max_positions=int(_need(config, "max_position_embeddings", where)),
        type_vocab_size=int(_need(config, "type_vocab_size", where)),
        layernorm_eps=float(_need(config, "layer_norm_eps", where)),
        dropout=float(_need(config, "hidden_dropout_prob", where)),
        attention_dropout=float(_need(config, "attention_probs_dropout_prob", where)),
        **({"rel_pos_buckets": buckets, "max_rel_distance": max_rel} if buckets > 0 else {"no_rel_pos": True}),
    )
    if shape.encoder_embed_dim % shape.encoder_attention_heads:
        raise ConversionError(
            f"{where}: hidden_size {shape.encoder_embed_dim} is not a multiple of num_attention_heads "
            f"{shape.encoder_attention_heads}"
        )
    return shape, int(_need(config, "vocab_size", where))


def check_rel_table(buckets, max_distance, what):
    """A table the bucket function can index (its rule: modules/relative_position.py), else one line naming ``what``."""
    problem = table_problem(buckets, max_distance)
    if problem:
        raise ConversionError(f"{what}: {problem}")


def _first(names, n=3):
    names = list(names)
    more = f" (and {len(names) - n} more)" if len(names) > n else ""
    return ", ".join(names[:n]) + more


class _Source:
    """A source state dict with the ``bert.`` prefix removed; remembers which keys were
    used and which were wanted but absent, so both can be reported in one line."""

    def __init__(self, state):
        bert = any(k.startswith("bert.") for k in state)
        self.prefix = "bert." if bert else ""
        self.sd, self.spelled = {}, {}
        for k, v in state.items():
            if not torch.is_tensor(v):
                raise ConversionError(f"{k!r} is not a tensor: not a state dict of weights")
            name = k[len("bert."):] if bert and k.startswith("bert.") else k
            # TF-era BERT checkpoints call LayerNorm's weight/bias gamma/beta
            if ".LayerNorm.gamma" in name or ".LayerNorm.beta" in name:
                name = name.replace(".gamma", ".weight").replace(".beta", ".bias")
            self.sd[name], self.spelled[name] = v, k
        self.used, self.missing = set(), []

    def name(self, key):
        """The key as the checkpoint spells it (for messages)."""
        return self.spelled.get(key) or (key if key.startswith(HEAD) else self.prefix + key)

    def has(self, key):
        return key in self.sd

    def take(self, key):
        if key not in self.sd:
            self.missing.append(self.name(key))
            return None
        self.used.add(key)
        return self.sd[key].float()

    def check_complete(self):
        if self.missing:
            raise ConversionError(f"missing key(s) for the BERT/UniLMv2 layout: {_first(self.missing)}")
        unknown = [
            self.name(k) for k in self.sd
            if k not in self.used and k not in IGNORED_KEYS and not k.startswith(IGNORED_PREFIXES)
        ]
        if unknown:
            raise ConversionError(f"unknown key(s), neither Hugging Face BERT nor UniLMv2 layout: {_first(unknown)}")


def layout_name(state):
    if S2SFT_TIED in state:
        return "s2s-ft"  # a fine-tuned save of s2s-ft (its separate q/k/v are BERT's keys)
    return "unilmv2" if any(k.endswith("attention.self.qkv_linear.weight") for k in state) else "bert"


def to_plugin(state, shape: TransformerShape, vocab_size):
    """Source state dict -> {plugin key: tensor} in the source's vocab order (the caller
    permutes the vocab rows), plus a list of notes for the log. Raises ConversionError."""
    src, out, origin, notes = _Source(state), {}, {}, []

    def put(ours, theirs):
        out[ours], origin[ours] = src.take(theirs), src.name(theirs)

    put("embed_tokens.weight", "embeddings.word_embeddings.weight")
    put("embed_positions.weight", "embeddings.position_embeddings.weight")
    put("embed_segments.weight", "embeddings.token_type_embeddings.weight")
    put("embed_ln.weight", "embeddings.LayerNorm.weight")
    put("embed_ln.bias", "embeddings.LayerNorm.bias")
    tables = [k for k in REL_TABLE_KEYS if src.has(k)]
    if len(tables) > 1:
        raise ConversionError(f"two relative tables: {_first(src.name(k) for k in tables)}")
    if tables and shape.no_rel_pos:
        raise ConversionError(f"{src.name(tables[0])} is present but config.json has no rel_pos_bins/max_rel_pos")
    if tables or not shape.no_rel_pos:  # absent but announced by the config: reported as missing
        put("rel_pos_bias.weight", tables[0] if tables else REL_TABLE_KEYS[0])
    layers = sorted({int(k.split(".")[2]) for k in src.sd if k.startswith("encoder.layer.")})
    if layers != list(range(shape.encoder_layers)):
        raise ConversionError(
            f"config.json says num_hidden_layers {shape.encoder_layers} but the checkpoint has "
            f"layers {_first(map(str, layers), 5) or 'none'}"
        )
    for i in range(shape.encoder_layers):
        s, d = f"encoder.layer.{i}.", f"layers.{i}."
        fused = s + "attention.self.qkv_linear.weight"
        if src.has(fused):
            qkv = src.take(fused)
            if qkv.dim() != 2 or qkv.size(0) % 3:
                raise ConversionError(f"{src.name(fused)} has shape {list(qkv.shape)}, not [3 x hidden, hidden]")
            for p, w in zip(("query", "key", "value"), qkv.chunk(3, 0)):
                out[d + f"attn.{p}.weight"], origin[d + f"attn.{p}.weight"] = w, src.name(fused)
            put(d + "attn.query.bias", s + "attention.self.q_bias")
            put(d + "attn.value.bias", s + "attention.self.v_bias")
            v_bias = out[d + "attn.value.bias"]
            out[d + "attn.key.bias"] = None if v_bias is None else torch.zeros_like(v_bias)
            origin[d + "attn.key.bias"] = src.name(s + "attention.self.v_bias")
        else:
            for p in ("query", "key", "value"):
                put(d + f"attn.{p}.weight", s + f"attention.self.{p}.weight")
                put(d + f"attn.{p}.bias", s + f"attention.self.{p}.bias")
        for ours, theirs in (("attn.out", "attention.output.dense"), ("attn_ln", "attention.output.LayerNorm"),
                             ("fc1", "intermediate.dense"), ("fc2", "output.dense"), ("ffn_ln", "output.LayerNorm")):
            put(d + ours + ".weight", s + theirs + ".weight")
            put(d + ours + ".bias", s + theirs + ".bias")
    if any(k.startswith(HEAD) for k in src.sd):
        put("lm_head.dense.weight", HEAD + "transform.dense.weight")
        put("lm_head.dense.bias", HEAD + "transform.dense.bias")
        put("lm_head.ln.weight", HEAD + "transform.LayerNorm.weight")
        put("lm_head.ln.bias", HEAD + "transform.LayerNorm.bias")
        put("lm_head.bias", HEAD + "bias")
        _check_tied(src, out)
    else:
        notes.append("no MLM head in the checkpoint (a bare BertModel): the LM head starts freshly initialised, "
                     "recorded as untrained: pre-training from it trains the head alone first (--head-warmup-updates)")
    src.check_complete()
    # a BertModel's pooler (transformers' pooler_output), BertForPreTraining's next-sentence head
    left_out = [next(src.spelled[k][:-len(k)] + p + "*" for k in src.sd if k.startswith(p))
                for p in IGNORED_PREFIXES if any(k.startswith(p) for k in src.sd)]
    if left_out:
        notes.append(f"left out {' and '.join(left_out)} (weights this model has no place for: a classification "
                     "head on it starts fresh)")
    want = expected_shapes(shape, vocab_size)
    for k, v in out.items():
        if list(v.shape) != want[k]:
            raise ConversionError(f"{origin[k]} has shape {list(v.shape)} but config.json implies {want[k]}")
    if shape.type_vocab_size < 2:
        # the tasks use segment 1 for S2 and for targets: zero rows change nothing already learnt
        rows = out["embed_segments.weight"]
        out["embed_segments.weight"] = torch.cat([rows, rows.new_zeros(2 - rows.size(0), rows.size(1))])
        notes.append(f"type_vocab_size {shape.type_vocab_size} < 2: segment rows padded with zeros to 2")
    return {k: v.contiguous() for k, v in out.items()}, notes


def _check_tied(src, out):
    """The model ties its output projection to the token embedding: an untied decoder
    cannot be represented, a tied copy (older checkpoints and s2s-ft's saves hold one) is only
    checked. s2s-ft's loss buffer is not a weight: dropped."""
    dec_w, dec_b = HEAD + "decoder.weight", HEAD + "decoder.bias"
    for key in (dec_w, S2SFT_TIED):
        if src.has(key):
            src.used.add(key)
            emb = out["embed_tokens.weight"]
            if emb is not None and not torch.equal(src.sd[key].float(), emb):
                raise ConversionError(f"{key} differs from the word embedding: untied output layers are not supported")
    src.used.update(k for k in S2SFT_LOSS_BUFFERS if src.has(k))
    if src.has(dec_b):
        src.used.add(dec_b)
        if out["lm_head.bias"] is not None and not torch.equal(src.sd[dec_b].float(), out["lm_head.bias"]):
            raise ConversionError(f"{dec_b} differs from {HEAD}bias")


def expected_shapes(shape: TransformerShape, vocab_size):
    V, C, F, H = vocab_size, shape.encoder_embed_dim, shape.encoder_ffn_embed_dim, shape.encoder_attention_heads
    want = {
        "embed_tokens.weight": [V, C], "embed_positions.weight": [shape.max_positions, C],
        "embed_segments.weight": [shape.type_vocab_size, C], "embed_ln.weight": [C], "embed_ln.bias": [C],
        "rel_pos_bias.weight": [H, shape.rel_pos_buckets],
        "lm_head.dense.weight": [C, C], "lm_head.dense.bias": [C], "lm_head.ln.weight": [C],
        "lm_head.ln.bias": [C], "lm_head.bias": [V],
    }
    for i in range(shape.encoder_layers):
        d = f"layers.{i}."
        for p in ("attn.query", "attn.key", "attn.value", "attn.out"):
            want[d + p + ".weight"], want[d + p + ".bias"] = [C, C], [C]
        for p in ("attn_ln", "ffn_ln"):
            want[d + p + ".weight"], want[d + p + ".bias"] = [C], [C]
        want[d + "fc1.weight"], want[d + "fc1.bias"] = [F, C], [F]
        want[d + "fc2.weight"], want[d + "fc2.bias"] = [C, F], [C]
    return want


def from_plugin(tensors, shape: TransformerShape):
    """{plugin key: tensor} (vocab rows already in the export order) -> Hugging Face
    ``BertForMaskedLM`` keys (separate q/k/v, so ``from_pretrained`` reads it as is) plus the
    relative table at the UniLMv2 key ``bert.encoder.rel_pos_bias.weight``."""
    sd = {
        "bert.embeddings.word_embeddings.weight": tensors["embed_tokens.weight"],
        "bert.embeddings.position_embeddings.weight": tensors["embed_positions.weight"],
        "bert.embeddings.token_type_embeddings.weight": tensors["embed_segments.weight"],
        "bert.embeddings.LayerNorm.weight": tensors["embed_ln.weight"],
        "bert.embeddings.LayerNorm.bias": tensors["embed_ln.bias"],
        HEAD + "transform.dense.weight": tensors["lm_head.dense.weight"],
        HEAD + "transform.dense.bias": tensors["lm_head.dense.bias"],
        HEAD + "transform.LayerNorm.weight": tensors["lm_head.ln.weight"],
        HEAD + "transform.LayerNorm.bias": tensors["lm_head.ln.bias"],
        HEAD + "bias": tensors["lm_head.bias"],
    }
    if "rel_pos_bias.weight" in tensors:
        sd["bert." + REL_TABLE_KEYS[0]] = tensors["rel_pos_bias.weight"]
    for i in range(shape.encoder_layers):
        s, d = f"bert.encoder.layer.{i}.", f"layers.{i}."
        for ours, theirs in (("attn.query", "attention.self.query"), ("attn.key", "attention.self.key"),
                             ("attn.value", "attention.self.value"), ("attn.out", "attention.output.dense"),
                             ("attn_ln", "attention.output.LayerNorm"), ("fc1", "intermediate.dense"),
                             ("fc2", "output.dense"), ("ffn_ln", "output.LayerNorm")):
            sd[s + theirs + ".weight"] = tensors[d + ours + ".weight"]
            sd[s + theirs + ".bias"] = tensors[d + ours + ".bias"]
    return {k: v.detach().clone().contiguous() for k, v in sd.items()}


def fuse_qkv(sd, n_layers):
    """``from_plugin``'s keys -> the released UniLMv2 layout (what s2s-ft reads with ``--model_type
    unilm``): per layer one ``qkv_linear.weight`` (q, k, v stacked) with ``q_bias`` and ``v_bias``.
    That layout has no key bias (the softmax cancels it): returns the layers whose key bias is not
    zero, whose outputs then agree up to rounding only."""
    out, dropped = dict(sd), []
    for i in range(n_layers):
        p = f"bert.encoder.layer.{i}.attention.self."
        out[p + "qkv_linear.weight"] = torch.cat([out.pop(p + n + ".weight") for n in ("query", "key", "value")])
        out[p + "q_bias"], out[p + "v_bias"] = out.pop(p + "query.bias"), out.pop(p + "value.bias")
        if out.pop(p + "key.bias").any():
            dropped.append(i)
    return out, dropped


# config.json's record of the MLM head: False where it was never trained (a source without one,
# all-MiniLM-L6-v2), so that importing the export again keeps the head warm-up and fill_mask's warning
HEAD_TRAINED_KEY = "pmlm_lm_head_trained"
# config.json's record of a sequence-to-sequence model (a pmlm_seq2seq checkpoint): importing the
# export again gives that task back, with the lengths, pseudo token and length penalty it decoded with
SEQ2SEQ_KEY = "pmlm_seq2seq"
SEQ2SEQ_FIELDS = ("max_source_positions", "max_target_positions", "pseudo_token", "lenpen_formula")


def hf_config(shape: TransformerShape, vocab_size, pad_token_id):
    """config.json of an export: Hugging Face BertConfig keys plus s2s-ft's relative-table
    keys (``rel_pos_bins`` 0 when the model has none)."""
    return {
        "architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_act": "gelu",
        "vocab_size": vocab_size, "hidden_size": shape.encoder_embed_dim,
        "num_hidden_layers": shape.encoder_layers, "num_attention_heads": shape.encoder_attention_heads,
        "intermediate_size": shape.encoder_ffn_embed_dim, "max_position_embeddings": shape.max_positions,
        "type_vocab_size": shape.type_vocab_size, "layer_norm_eps": shape.layernorm_eps,
        "hidden_dropout_prob": shape.dropout, "attention_probs_dropout_prob": shape.attention_dropout,
        "initializer_range": 0.02, "position_embedding_type": "absolute", "pad_token_id": pad_token_id,
        "tie_word_embeddings": True, "rel_pos_bins": 0 if shape.no_rel_pos else shape.rel_pos_buckets,
        "max_rel_pos": 0 if shape.no_rel_pos else shape.max_rel_distance,
    }
