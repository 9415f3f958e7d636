"""UniLMv2 for Hugging Face ``transformers``: the modeling code an exported directory ships.

``convert_checkpoint.py export`` copies this file into the export as ``modeling_unilmv2.py`` and
names it in ``config.json``'s ``auto_map``, so ``AutoModel`` / ``AutoModelForMaskedLM
.from_pretrained(DIR, trust_remote_code=True)`` compute what the fairseq-pmlm model computes:

- BERT's post-LayerNorm encoder (exact GELU), token + absolute position + segment embeddings,
  LayerNorm; Hugging Face BERT's parameter names, so the weights are a ``BertForMaskedLM``'s;
- one T5 relative-position bias, bidirectional buckets of ``position[key] - position[query]``,
  a ``[heads, buckets]`` table shared by all layers (``bert.encoder.rel_pos_bias.weight``);
  ``rel_pos_bins`` 0 means none, and the model is then exactly a BERT;
- the MLM head: dense -> GELU -> LayerNorm -> the word embeddings (tied) + a bias.

Self-contained on purpose (torch and transformers only): it travels without the plugin.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, MaskedLMOutput

# bound of the relative bias, as the plugin clamps it: finite in fp16 with room for q.k
BIAS_LIMIT = torch.finfo(torch.float16).max / 2


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    """Bidirectional T5 buckets of ``key_pos - query_pos``: keys to the right in the upper half;
    half of each half exact distances, the rest log-spaced up to ``max_distance``."""
    num_buckets //= 2
    bucket = (relative_position > 0).long() * num_buckets
    n = relative_position.abs()
    max_exact = num_buckets // 2
    is_small = n < max_exact
    # clamp to 1 before log: small distances (is_small) must not produce -inf
    large = max_exact + (
        torch.log(n.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).long()
    large = large.clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, n, large)


class UniLMv2Config(BertConfig):
    """A BertConfig plus s2s-ft's relative-table keys ``rel_pos_bins`` and ``max_rel_pos``."""

    model_type = "unilmv2"


def _rel_pos(config):
    return int(getattr(config, "rel_pos_bins", 0) or 0), int(getattr(config, "max_rel_pos", 0) or 0)


class UniLMv2Embeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids, position_ids):
        x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(x + self.token_type_embeddings(token_type_ids)))


class UniLMv2SelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.heads, self.head_dim = config.num_attention_heads, config.hidden_size // config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = config.attention_probs_dropout_prob

    def forward(self, x, bias):
        B, T, _ = x.shape

        def split(t):
            return t.view(B, T, self.heads, self.head_dim).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=self.dropout if self.training else 0.0)
        return y.transpose(1, 2).reshape(B, T, -1)


class UniLMv2Output(nn.Module):
    """Post-LayerNorm residual: LayerNorm(x + dropout(dense(y))), after attention and after the FFN."""

    def __init__(self, config, in_dim):
        super().__init__()
        self.dense = nn.Linear(in_dim, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, y, x):
        return self.LayerNorm(x + self.dropout(self.dense(y)))


class UniLMv2Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = UniLMv2SelfAttention(config)
        self.output = UniLMv2Output(config, config.hidden_size)

    def forward(self, x, bias):
        return self.output(self.self(x, bias), x)


class UniLMv2Intermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)

    def forward(self, x):
        return F.gelu(self.dense(x))


class UniLMv2Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = UniLMv2Attention(config)
        self.intermediate = UniLMv2Intermediate(config)
        self.output = UniLMv2Output(config, config.intermediate_size)

    def forward(self, x, bias):
        x = self.attention(x, bias)
        return self.output(self.intermediate(x), x)


class UniLMv2Encoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([UniLMv2Layer(config) for _ in range(config.num_hidden_layers)])
        buckets, self.max_distance = _rel_pos(config)
        # Linear(buckets -> heads, no bias), used as a [heads, buckets] lookup table (UniLMv2's key)
        self.rel_pos_bias = nn.Linear(buckets, config.num_attention_heads, bias=False) if buckets > 0 else None

    def attention_bias(self, attention_mask, position_ids, dtype):
        """One additive bias shared by every layer: the relative bias, -inf at padding keys."""
        keep = attention_mask.bool()[:, None, None, :]  # [B, 1, 1, Tk]
        if self.rel_pos_bias is None:
            return keep
        rel = position_ids.unsqueeze(-2) - position_ids.unsqueeze(-1)  # pos[key] - pos[query]
        bucket = relative_position_bucket(rel, self.rel_pos_bias.in_features, self.max_distance)
        bias = self.rel_pos_bias.weight[:, bucket].transpose(0, 1)  # [B, H, Tq, Tk]
        bias = bias.clamp(-BIAS_LIMIT, BIAS_LIMIT).to(dtype)
        return bias.masked_fill(~keep, float("-inf"))

    def forward(self, x, attention_mask, position_ids, output_hidden_states=False):
        bias = self.attention_bias(attention_mask, position_ids, x.dtype)
        states = [x]
        for layer in self.layer:
            x = layer(x, bias)
            states.append(x)
        return x, (tuple(states) if output_hidden_states else None)


class UniLMv2PreTrainedModel(PreTrainedModel):
    config_class = UniLMv2Config
    base_model_prefix = "bert"


class UniLMv2Model(UniLMv2PreTrainedModel):
    """Final hidden states, as the plugin's ``extract_features``: position ids default to
    0..T-1 and segment ids to 0, as BERT's; padding keys are masked by ``attention_mask``."""

    _keys_to_ignore_on_load_unexpected = [r"^cls\."]  # the MLM head of a full export: not the base model's

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = UniLMv2Embeddings(config)
        self.encoder = UniLMv2Encoder(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
                output_hidden_states=None, return_dict=None, **kwargs):
        B, T = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if position_ids is None:
            position_ids = torch.arange(T, device=input_ids.device).expand(B, T)
        x = self.embeddings(input_ids, token_type_ids, position_ids)
        x, states = self.encoder(x, attention_mask, position_ids, bool(output_hidden_states))
        return BaseModelOutput(last_hidden_state=x, hidden_states=states)


class UniLMv2PredictionHeadTransform(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, x):
        return self.LayerNorm(F.gelu(self.dense(x)))


class UniLMv2LMPredictionHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.transform = UniLMv2PredictionHeadTransform(config)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, x, word_embeddings):
        # the projection is the word embedding itself (tied), read at call time: no copy to tie
        return F.linear(self.transform(x), word_embeddings) + self.bias


class UniLMv2OnlyMLMHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.predictions = UniLMv2LMPredictionHead(config)

    def forward(self, x, word_embeddings):
        return self.predictions(x, word_embeddings)


class UniLMv2ForMaskedLM(UniLMv2PreTrainedModel):
    """The autoencoding (MLM) head's logits over the vocabulary, for every position."""

    def __init__(self, config):
        super().__init__(config)
        self.bert = UniLMv2Model(config)
        self.cls = UniLMv2OnlyMLMHead(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.bert.embeddings.word_embeddings

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, labels=None,
                output_hidden_states=None, return_dict=None, **kwargs):
        out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, output_hidden_states)
        logits = self.cls(out.last_hidden_state, self.bert.embeddings.word_embeddings.weight)
        loss = None
        if labels is not None:  # -100: no loss, as Hugging Face's MLM heads
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), labels.view(-1), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)
