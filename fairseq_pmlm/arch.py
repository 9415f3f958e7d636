"""The Transformer's shape and the architecture sizes: the one description that the model's config,
the model, the weight converter and the exporters read, and the recipes too (no fairseq import).
"""
from dataclasses import dataclass, field, fields

# TransformerShape's names of the four sizes an arch fixes
SIZE_FIELDS = ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads")

# arch -> (layers, hidden, ffn, heads): the paper's sizes, plus small ones for the demo and the tests
ARCH_SIZES = {
    "unilmv2_base": (12, 768, 3072, 12),
    "unilmv2_large": (24, 1024, 4096, 16),
    "unilmv2_small": (4, 256, 1024, 4),
    "unilmv2_tiny": (2, 64, 128, 4),
}

_BASE = dict(zip(SIZE_FIELDS, ARCH_SIZES["unilmv2_base"], strict=True))


@dataclass
class TransformerShape:
    """What the Transformer is built from. The names are the model's fairseq options (``UniLMv2Config``
    inherits these fields, so ``--encoder-layers`` etc. set them and checkpoints record them);
    the weight converter reads them from and writes them to config.json. Defaults: unilmv2_base's
    sizes, BERT's options, T5's relative buckets. The relative position bias is off only by
    ``no_rel_pos``; ``rel_pos_buckets`` and ``max_rel_distance`` then mean nothing."""

    encoder_layers: int = field(default=_BASE["encoder_layers"], metadata={"help": "number of layers"})
    encoder_embed_dim: int = field(default=_BASE["encoder_embed_dim"], metadata={"help": "hidden size"})
    encoder_ffn_embed_dim: int = field(default=_BASE["encoder_ffn_embed_dim"], metadata={"help": "FFN inner size"})
    encoder_attention_heads: int = field(default=_BASE["encoder_attention_heads"],
                                         metadata={"help": "attention heads"})
    dropout: float = field(default=0.1, metadata={"help": "dropout probability"})
    attention_dropout: float = field(default=0.1, metadata={"help": "attention dropout"})
    max_positions: int = field(default=512, metadata={"help": "learned absolute positions"})
    type_vocab_size: int = field(default=2, metadata={"help": "number of segment ids"})
    layernorm_eps: float = field(default=1e-12, metadata={"help": "LayerNorm epsilon (BERT's)"})
    rel_pos_buckets: int = field(default=32, metadata={"help": "relative position buckets"})
    max_rel_distance: int = field(default=128, metadata={"help": "relative position max distance"})
    no_rel_pos: bool = field(
        default=False, metadata={"help": "disable the relative position bias ('-- rel pos' ablation)"}
    )

    @classmethod
    def of(cls, cfg):
        """The shape of a model config: a ``UniLMv2Config``, the DictConfig fairseq builds from one,
        or a checkpoint's ``cfg["model"]`` dict."""
        if isinstance(cfg, dict):
            return cls(**{f.name: cfg[f.name] for f in fields(cls)})
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls)})
