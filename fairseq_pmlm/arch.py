"""Architecture sizes and model defaults: the one table that ``models/unilmv2.py`` registers its
archs and config from, and that the weight converter and the recipes read (no fairseq import).
"""

# UniLMv2Config's names of the four sizes an arch fixes
SIZE_FIELDS = ("encoder_layers", "encoder_embed_dim", "encoder_ffn_embed_dim", "encoder_attention_heads")

# arch -> (layers, hidden, ffn, heads): the paper's sizes, plus small ones for the demo and the tests
ARCH_SIZES = {
    "unilmv2_base": (12, 768, 3072, 12),
    "unilmv2_large": (24, 1024, 4096, 16),
    "unilmv2_small": (4, 256, 1024, 4),
    "unilmv2_tiny": (2, 64, 128, 4),
}

# the model options besides the sizes, at their defaults (BERT's; T5's relative buckets)
OPTION_DEFAULTS = {
    "max_positions": 512,
    "type_vocab_size": 2,
    "layernorm_eps": 1e-12,
    "dropout": 0.1,
    "attention_dropout": 0.1,
    "rel_pos_buckets": 32,
    "max_rel_distance": 128,
}

# every default of UniLMv2Config: the sizes are unilmv2_base's
DEFAULTS = {**dict(zip(SIZE_FIELDS, ARCH_SIZES["unilmv2_base"])), **OPTION_DEFAULTS}
