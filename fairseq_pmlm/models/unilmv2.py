"""fairseq model ``unilmv2``: the UniLMv2 Transformer behind a dataclass config.

Dataclass registration (not legacy ``add_args``) keeps checkpoints loadable under torch's
``weights_only=True`` default.
"""
import copy
import hashlib
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
import torch.nn as nn
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.models import BaseFairseqModel, register_model, register_model_architecture
from fairseq.utils import safe_getattr

from ..arch import ARCH_SIZES, SIZE_FIELDS, TransformerShape
from ..data.dict_files import dictionary_in
from ..errors import BadInput
from ..modules.attention_rule import CONTEXT
from ..modules.relative_position import table_problem
from ..modules.transformer import ReadCells, UniLMv2Transformer
from ..runtime import checkpoint_files
from ..runtime.process_group_guard import require_process_group
from ..symbols import FAIRSEQ_MASK_SYMBOL, MASK_SYMBOL, PSEUDO_SYMBOL
from .heads import SentenceClassificationHead, SpanPredictionHead
from .seq2seq_views import UniLMv2Decoder, UniLMv2Encoder

HEAD_KINDS = ("classification_heads", "span_heads")
LM_HEAD_TRAINED = "lm_head_trained"  # the state-dict record of a trained LM head (see __init__)
PSEUDO_TOKENS = {"p": PSEUDO_SYMBOL, "mask": MASK_SYMBOL}  # --pseudo-token -> the symbol fed

logger = logging.getLogger(__name__)


@dataclass
class UniLMv2Config(FairseqDataclass, TransformerShape):
    # the Transformer's shape (--encoder-layers etc.) is TransformerShape's fields (fairseq_pmlm/arch.py)
    pooler_dropout: float = field(
        default=0.1, metadata={"help": "dropout of the sentence classification head (after the [SOS] pooler)"}
    )
    attention_impl: ChoiceEnum(["auto", "flex", "triton", "sdpa", "reference"]) = field(
        default="auto",
        metadata={"help": "auto: the measured-fastest path, today sdpa (flex was slower on an H200, in training "
                          "and forward only); flex: one flex_attention call per layer wherever it can run "
                          "(training without attention dropout; on the CPU, forward only); triton: as sdpa, but "
                          "pre-training's shared context block by a Triton flash kernel reading the bias per distance "
                          "(CUDA; not yet measured faster); sdpa: PyTorch fused "
                          "attention; reference: explicit softmax (for checks)"},
    )
    compile_layers: bool = field(
        default=False,
        metadata={"help": "training on a CUDA device: run each layer through torch.compile (fused residual, "
                          "dropout, LayerNorm and GELU kernels); where it fails to compile, and on the CPU, the layers "
                          "run eagerly (one log line)"},
    )
    # a model option, not a task one: the cfg.model a checkpoint records is what fairseq-generate,
    # the hub and the exporter rebuild the decoder from (the task's cfg comes from the command line)
    pseudo_token: ChoiceEnum(list(PSEUDO_TOKENS)) = field(
        default="p",
        metadata={"help": "sequence-to-sequence: the token fed to predict each target token, p ([P]) or mask "
                          "([MASK], as s2s-ft)"},
    )


def model_dictionary(dictionary):
    """The dictionary the embedding table is laid out for: dict.txt's symbols, [MASK], [P].

    Our tasks add [MASK] and [P] to dict.txt; fairseq's own ``sentence_prediction`` adds just
    ``<mask>``, at the same index as our [MASK]. Reading that ``<mask>`` as [MASK] and adding
    [P] gives the pre-training layout, so a pre-trained checkpoint (digest, embedding size)
    loads under fairseq's task unchanged; [P] simply never occurs in its inputs.
    """
    if dictionary.index(PSEUDO_SYMBOL) != dictionary.unk():
        return dictionary
    if dictionary.symbols[-1] == FAIRSEQ_MASK_SYMBOL and MASK_SYMBOL not in dictionary.indices:
        canonical = copy.deepcopy(dictionary)
        canonical.symbols[-1] = MASK_SYMBOL
        canonical.indices = {s: i for i, s in enumerate(canonical.symbols)}
        canonical.add_symbol(PSEUDO_SYMBOL)
        return canonical
    raise ValueError(f"the dictionary has no {PSEUDO_SYMBOL} symbol (load it with the plugin's tasks "
                     "or fairseq's sentence_prediction)")


def nlu_layout(tokens, pad, eos):
    """(positions, segments, kinds, steps) of plain ``[SOS] A [EOS] (B [EOS])`` rows, right padded.

    fairseq's sentence_prediction passes only ``src_tokens``, so the segment ids are read off
    the tokens: everything after the first [EOS] is segment B (docs/DESIGN.md §6).
    Every real token is CONTEXT at step 0: the whole input sees itself bidirectionally.
    """
    real = tokens.ne(pad)
    is_eos = tokens.eq(eos).long()
    segments = ((is_eos.cumsum(1) - is_eos) > 0).long() * real
    positions = torch.arange(tokens.size(1), device=tokens.device).expand_as(tokens)
    kinds = real.long() * CONTEXT
    return positions, segments, kinds, torch.zeros_like(tokens)


def dictionary_file(task):
    """The file the task's dictionary was read from, for messages; None if none is found."""
    cfg = getattr(task, "cfg", None)
    return dictionary_in(str(safe_getattr(cfg, "data", "") or "").split(os.pathsep)[0],
                         safe_getattr(cfg, "source_lang", None))


# The state dict's two records (the digest, the head's) are float32 numbers, read rounded: fairseq's
# tools treat every state-dict entry as a weight. scripts/average_checkpoints.py sums the N files'
# entries and divides by N (floor-divides a non-float: a bool fails, a uint8 sum wraps at 256);
# --store-ema decays each entry in place toward the model's (v * d + v * (1 - d): a non-float
# fails, a float comes back within rounding). 0-255 survive both, and fp16 and bf16 casts, exactly
# once rounded. Older files hold uint8 and bool: they load as before.
def dictionary_digest(dictionary):
    """16 bytes identifying a dictionary's symbols, stored in every checkpoint (as 16 floats)."""
    h = hashlib.md5("\n".join(dictionary.symbols).encode("utf-8")).digest()
    return torch.tensor(list(h), dtype=torch.float32)


def same_digest(theirs, ours):
    """Whether two digests are equal, whatever dtype each was saved in, after averaging or EMA."""
    return torch.equal(theirs.detach().cpu().double().round(), ours.detach().cpu().double().round())


def dictionary_misfit(state_dict, digest, rows):
    """How a checkpoint's weights disagree with a dictionary of ``rows`` rows (with [MASK] and [P])
    and ``digest``: "N rows against M", "both M rows, other symbols or order", or None where they
    fit (a checkpoint without a digest is judged by its embedding rows alone)."""
    theirs, embed = state_dict.get("dictionary_digest"), state_dict.get("transformer.embed_tokens.weight")
    their_rows = None if embed is None else embed.size(0)
    if (theirs is None or same_digest(theirs, digest)) and their_rows in (None, rows):
        return None
    return f"{their_rows} rows against {rows}" if their_rows != rows else f"both {rows} rows, other symbols or order"


@register_model("unilmv2", dataclass=UniLMv2Config)
class UniLMv2Model(BaseFairseqModel):
    def __init__(self, cfg: UniLMv2Config, dictionary):
        super().__init__()
        self.cfg = cfg
        dictionary = model_dictionary(dictionary)
        self.pad, self.bos, self.eos = dictionary.pad(), dictionary.bos(), dictionary.eos()
        self.transformer = UniLMv2Transformer(TransformerShape.of(cfg), len(dictionary), str(cfg.attention_impl),
                                              bool(safe_getattr(cfg, "compile_layers", False)))
        # a checkpoint remembers its dictionary, so loading it with another one fails loudly
        self.register_buffer("dictionary_digest", dictionary_digest(dictionary))
        # whether the LM head has trained on top of this body: the pre-training task warms an
        # untrained one first (tasks/pseudo_masked_lm.py). The importer writes False for weights
        # that came without a head; a model built here trains its head from its first update.
        # 1.0 or 0.0 (a float: see dictionary_digest; load_state_dict rounds what averaging or EMA made of it)
        self.register_buffer(LM_HEAD_TRAINED, torch.tensor(1.0))
        pseudo_idx = dictionary.index(PSEUDO_TOKENS[str(safe_getattr(cfg, "pseudo_token", "p"))])
        # task heads, registered by the fine-tuning tasks (fairseq's sentence_prediction, pmlm_squad)
        self.classification_heads = nn.ModuleDict()
        self.span_heads = nn.ModuleDict()
        # encoder/decoder views for fairseq's generator and encoder-decoder criteria
        self.encoder = UniLMv2Encoder(dictionary, self.transformer)
        self.decoder = UniLMv2Decoder(dictionary, self.transformer, pseudo_idx)

    @classmethod
    def build_model(cls, cfg, task):
        # every training entry point (fairseq's and ours) builds the model after the process
        # group would have been formed: the one place to refuse a torchrun rank that trains alone
        require_process_group()
        pseudo = str(safe_getattr(cfg, "pseudo_token", "p"))
        if pseudo != "p" and safe_getattr(task.cfg, "_name", None) == "pseudo_masked_lm":
            raise BadInput(f"--pseudo-token {pseudo} is for sequence-to-sequence fine-tuning (--task "
                           "pmlm_seq2seq): pre-training appends [P] tokens")
        problem = None if cfg.no_rel_pos else table_problem(cfg.rel_pos_buckets, cfg.max_rel_distance)
        if problem:
            raise BadInput(f"--rel-pos-buckets {cfg.rel_pos_buckets} --max-rel-distance {cfg.max_rel_distance}: "
                           f"{problem} (--no-rel-pos turns the relative position bias off)")
        need = safe_getattr(task.cfg, "tokens_per_sample", None)
        if need is not None and need > cfg.max_positions:
            raise BadInput(f"--tokens-per-sample {need} exceeds the model's --max-positions {cfg.max_positions}")
        model = cls(cfg, task.source_dictionary)
        model.dictionary_file = dictionary_file(task)  # named when a checkpoint of another dictionary is loaded
        return model

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file=None, data_name_or_path=None, **kwargs):
        """A hub interface (models/hub_interface.py): a directory or a checkpoint file; the
        checkpoint, dictionary and tokenizer are found as that module's docstring says."""
        from .hub_interface import from_pretrained

        return from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, **kwargs)

    def register_classification_head(self, name, num_classes=None, inner_dim=None, **kwargs):
        """fairseq's sentence_prediction task calls this (as for RoBERTa)."""
        dim = self.cfg.encoder_embed_dim
        self.classification_heads[name] = SentenceClassificationHead(
            dim, inner_dim or dim, num_classes, safe_getattr(self.cfg, "pooler_dropout", 0.1)
        )

    def register_span_head(self, name, **kwargs):
        """Start/end logits per token (extractive QA, the plugin's pmlm_squad task)."""
        self.span_heads[name] = SpanPredictionHead(self.cfg.encoder_embed_dim)

    def forward(self, src_tokens, positions=None, segments=None, kinds=None, steps=None, prefix_len=None,
                masked_tokens=None, features_only=False, prev_output_tokens=None, src_lengths=None,
                classification_head_name=None, span_head_name=None, pseudo_tokens=None, **kwargs):
        """Pre-training batches (``kinds``/``steps`` given): hidden states, or LM logits only
        where ``masked_tokens`` is True (a bool [B, T], as fairseq's; or its ``ReadCells``, which
        the pmlm criterion makes in the one device sync of its forward), in B x T order: then the
        last layer computes those cells alone. Sequence-to-sequence batches (``prev_output_tokens``
        given): the logits of the [P] tokens, one per target token, as fairseq's
        encoder-decoder models return them. ``prefix_len``: see ``attention_plan``.
        Plain ``[SOS] A [EOS] (B [EOS])`` batches (only ``src_tokens``, as fairseq's
        sentence_prediction gives): with ``classification_head_name`` that head's output on
        [SOS]; with ``span_head_name`` that head's (start, end) logits; else hidden states."""
        if prev_output_tokens is not None:
            return self.decoder(prev_output_tokens, self.encoder(src_tokens, src_lengths), features_only=features_only,
                                pseudo_tokens=pseudo_tokens)
        if kinds is None:
            positions, segments, kinds, steps = nlu_layout(src_tokens, self.pad, self.eos)
            segments = segments.clamp(max=self.cfg.type_vocab_size - 1)
        heads = classification_head_name is not None or span_head_name is not None
        if masked_tokens is not None and not (features_only or heads):
            # the last layer computes the read cells alone (``ReadCells``)
            read = masked_tokens if isinstance(masked_tokens, ReadCells) else ReadCells.of(masked_tokens)
            x = self.transformer(src_tokens, positions, segments, kinds, steps, prefix_len=prefix_len,
                                 read=read.columns)
            return self.transformer.lm_head(x.flatten(0, 1).index_select(0, read.index)), {}
        x = self.transformer(src_tokens, positions, segments, kinds, steps, prefix_len=prefix_len)
        if classification_head_name is not None:
            if not bool(src_tokens[:, 0].eq(self.bos).all()):
                # fairseq's sentence_prediction prepends [SOS] only with --init-token
                raise ValueError(f"classification inputs must start with [SOS] (sentence_prediction: "
                                 f"pass --init-token {self.bos})")
            return self.classification_heads[classification_head_name](x[:, 0]), {}
        if span_head_name is not None:
            return self.span_heads[span_head_name](x), {}
        if features_only:
            return x, {}
        return self.transformer.lm_head(x), {}

    def autocast_weights(self):
        """The transformer's, for ``tasks/autocast.py``: see ``UniLMv2Transformer.autocast_weights``."""
        return self.transformer.autocast_weights()

    def max_positions(self):
        return self.cfg.max_positions

    def max_decoder_positions(self):
        return self.cfg.max_positions

    def upgrade_state_dict_named(self, state_dict, name):
        """Task heads, as RoBERTa handles them: a head the checkpoint lacks (a pre-trained
        checkpoint has none) starts from this model's fresh weights; a checkpoint head of
        other dimensions is dropped with a warning; one this model lacks is added to it. And
        the LM head's record (``lm_head_trained``), which older checkpoints lack."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = name + "." if name else ""
        # a checkpoint from before the record: its head counts as trained, as it did then (no
        # warm-up unless --head-warmup-updates asks), whatever wrote it
        state_dict.setdefault(prefix + LM_HEAD_TRAINED, torch.tensor(1.0))
        for kind in HEAD_KINDS:
            heads = getattr(self, kind)
            start = f"{prefix}{kind}."
            names = {k[len(start):].split(".")[0] for k in state_dict if k.startswith(start)}
            for head in names:
                theirs = {k[len(start) + len(head) + 1:]: v for k, v in state_dict.items()
                          if k.startswith(f"{start}{head}.")}
                if head not in heads:
                    if kind == "classification_heads":
                        self.register_classification_head(head, theirs["out_proj.weight"].size(0),
                                                          theirs["dense.weight"].size(0))
                    else:
                        self.register_span_head(head)
                mine = heads[head].state_dict()
                if any(k not in mine or mine[k].shape != v.shape for k, v in theirs.items()):
                    logger.warning(f"dropping {kind[:-1].replace('_', ' ')} {head!r} from the checkpoint: "
                                   "its dimensions differ from the current model's")
                    for k in theirs:
                        del state_dict[f"{start}{head}.{k}"]
            for k, v in heads.state_dict().items():
                if start + k not in state_dict:
                    logger.info(f"{start + k}: not in the checkpoint, starts from fresh weights")
                    state_dict[start + k] = v

    def dictionary_mismatch(self, state_dict, checkpoint=None):
        """The one-line error for a checkpoint of another dictionary (digest, or embedding rows
        where it has no digest), naming it, the data's dictionary file and both sizes; None if it
        fits. fairseq-train asks before it loads anything (runtime/checkpoint_files.py: its trainer would
        replace any error raised while loading by "please ensure that the architectures match")."""
        sizes = dictionary_misfit(state_dict, self.dictionary_digest, self.transformer.embed_tokens.weight.size(0))
        if sizes is None:
            return None
        ours = getattr(self, "dictionary_file", None) or "the task's dictionary"
        return (f"{checkpoint or 'the checkpoint'} was trained with a different dictionary than {ours} + [MASK] + "
                f"[P] ({sizes}): binarize the data with the checkpoint's dictionary (fairseq-preprocess --srcdict)")

    def architecture_mismatch(self, state_dict, checkpoint=None):
        """The one-line error for a checkpoint of another size than this model's --arch (layers, a
        tensor's shape), naming what differs; None if the body fits. Asked before fairseq loads, as
        ``dictionary_mismatch`` (its trainer words any load error as "please ensure that the
        architectures match", after a traceback). The position table and task heads are adapted
        on load (``load_state_dict``, ``upgrade_state_dict_named``), so they are not compared."""
        own, where = self.state_dict(), checkpoint or "the checkpoint"
        fix = "give the checkpoint's --arch and size flags (the hub and fairseq-generate read them from it)"

        def layers(keys):
            return len({k.split(".")[2] for k in keys if k.startswith("transformer.layers.")})

        theirs, ours = layers(state_dict), layers(own)
        if theirs != ours:
            return f"{where} has {theirs} layers, this model {ours}: {fix}"
        for k, v in state_dict.items():
            if (k.startswith("transformer.") and k != "transformer.embed_positions.weight" and k in own
                    and tuple(v.shape) != tuple(own[k].shape)):
                return f"{where}: {k} is {list(v.shape)} there, {list(own[k].shape)} in this model: {fix}"
        return None

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        mismatch = self.dictionary_mismatch(state_dict, checkpoint_files.LOADING["path"])
        if mismatch:  # one line (errors.py): fairseq-generate and the hub load through here
            raise BadInput(mismatch)
        # the records as written, whatever averaging or EMA made of them: the digest fits (above), and
        # the head's record is the nearer of 1 (trained) and 0. A copy that keeps torch's _metadata
        state_dict, metadata = OrderedDict(state_dict), getattr(state_dict, "_metadata", None)
        if metadata is not None:
            state_dict._metadata = metadata
        if "dictionary_digest" in state_dict:
            state_dict["dictionary_digest"] = self.dictionary_digest.clone()
        if LM_HEAD_TRAINED in state_dict:
            state_dict[LM_HEAD_TRAINED] = torch.tensor(float(state_dict[LM_HEAD_TRAINED].float() >= 0.5))
        key = "transformer.embed_positions.weight"
        old, new_rows = state_dict.get(key), self.transformer.embed_positions.weight.size(0)
        if old is not None and old.size(0) < new_rows:
            # longer inputs than pre-training: copy the trained rows cyclically (as s2s-ft)
            logger.info(f"extending the position table from {old.size(0)} to {new_rows} rows")
            state_dict[key] = old.repeat((new_rows + old.size(0) - 1) // old.size(0), 1)[:new_rows]
        elif old is not None and old.size(0) > new_rows:
            # fine-tuning with a smaller --max-positions: the first rows are the ones it uses
            logger.info(f"keeping the first {new_rows} of the checkpoint's {old.size(0)} position rows")
            state_dict[key] = old[:new_rows]
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)


def _sizes_in_words(sizes):
    layers, dim, ffn, heads = sizes
    return f"{layers} layers x {dim} (FFN {ffn}, {heads} heads)"


_TOLD_SIZES = set()  # (arch, sizes) said once a process: fairseq calls an arch function per build


def _register_arch(name, sizes):
    @register_model_architecture("unilmv2", name)
    def arch(args):
        for field_name, size in zip(SIZE_FIELDS, sizes, strict=True):
            setattr(args, field_name, safe_getattr(args, field_name, size))
        got = tuple(getattr(args, f) for f in SIZE_FIELDS)
        if got != sizes and (name, got) not in _TOLD_SIZES:
            # fairseq-hydra-train fills a dataclass model's config with its defaults (base sizes)
            # before the arch function runs, so model._name alone could not resize it: said, not silent
            _TOLD_SIZES.add((name, got))
            logger.warning(f"{name}: building {_sizes_in_words(got)}, not the arch's {_sizes_in_words(sizes)}: "
                           "the sizes given win (--encoder-layers etc.; under fairseq-hydra-train the config's "
                           "model.* sizes, which model._name does not change)")

    return arch


for _name, _sizes in ARCH_SIZES.items():  # unilmv2_base, _large, _small, _tiny (fairseq_pmlm/arch.py)
    _register_arch(_name, _sizes)
