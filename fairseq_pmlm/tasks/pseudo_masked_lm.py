"""fairseq task ``pseudo_masked_lm``: UniLMv2 pre-training data (docs/DESIGN.md §3)."""
import logging
import os
from dataclasses import dataclass, field

from fairseq import utils
from fairseq.data import data_utils
from fairseq.dataclass import ChoiceEnum
from fairseq.optim.fp16_optimizer import FP16Optimizer
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II, MISSING

from .. import objectives
from ..data.blockwise_masking import MaskingConfig
from ..data.databin_checks import check_complete, check_files, check_shards
from ..data.pmlm_dataset import PseudoMaskedLMDataset
from ..data.pmlm_dictionary import load_pmlm_dictionary
from ..errors import BadInput, InputNotFound
from ..symbols import MASK_SYMBOL, PSEUDO_SYMBOL
from .autocast import AutocastConfig, BF16AutocastMixin

logger = logging.getLogger(__name__)

# --head-warmup-updates on an untrained LM head: docs/RESULTS.md measured 50 for AE and AE+PAR
NEW_HEAD_WARMUP_UPDATES = 50


class PMLMDictionaryMixin:
    """The plugin's tasks read and write one dictionary, ``self.dictionary`` (load_pmlm_dictionary)."""

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary


@dataclass
class PseudoMaskedLMConfig(AutocastConfig):
    data: str = field(
        default=MISSING,
        metadata={"help": "colon-separated data directories (fairseq-preprocess --only-source "
                          "output), used round-robin across epochs"},
    )
    tokens_per_sample: int = field(
        default=512, metadata={"help": "max context length, [SOS] S1 [EOS] S2 [EOS]"}
    )
    objective: ChoiceEnum(list(objectives.NAMES)) = field(
        default="ae+par",
        metadata={"help": objectives.HELP},
    )
    mask_prob: float = field(
        default=0.15, metadata={"help": "fraction of the context's non-special tokens to mask (docs/DESIGN.md §3)"}
    )
    block_mask_prob: float = field(
        default=0.4, metadata={"help": "probability that a masked block is an n-gram (else 1 token)"}
    )
    min_block_len: int = field(default=2, metadata={"help": "shortest n-gram block"})
    max_block_len: int = field(default=6, metadata={"help": "longest n-gram block"})
    leave_unmasked_prob: float = field(
        default=0.1, metadata={"help": "probability that a masked context token is kept"}
    )
    random_token_prob: float = field(
        default=0.1, metadata={"help": "probability that a masked context token is replaced by a random token"}
    )
    head_warmup_updates: int = field(
        default=-1,
        metadata={"help": f"train only the LM head for the first N updates; -1: {NEW_HEAD_WARMUP_UPDATES} if the "
                          "start's head is untrained, else 0"},
    )
    max_update: int = II("optimization.max_update")
    seed: int = II("common.seed")
    train_subset: str = II("dataset.train_subset")  # the split every shard must have


@register_task("pseudo_masked_lm", dataclass=PseudoMaskedLMConfig)
class PseudoMaskedLMTask(BF16AutocastMixin, PMLMDictionaryMixin, FairseqTask):
    cfg: PseudoMaskedLMConfig

    def __init__(self, cfg: PseudoMaskedLMConfig, dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        self._head_warmup = None  # decided when training starts (head_warmup)
        self.mask_idx = dictionary.index(MASK_SYMBOL)
        self.pseudo_idx = dictionary.index(PSEUDO_SYMBOL)
        if not 0 < cfg.mask_prob < 1:  # 0 masks nothing: no loss, every update a no-op
            raise BadInput(f"--mask-prob {cfg.mask_prob}: must be in (0, 1), the fraction of tokens to mask")
        if not 0 <= cfg.block_mask_prob <= 1:
            raise BadInput(f"--block-mask-prob {cfg.block_mask_prob}: must be in [0, 1]")
        if not 1 <= cfg.min_block_len <= cfg.max_block_len:
            raise BadInput("need 1 <= --min-block-len <= --max-block-len")
        for flag, prob in (("--leave-unmasked-prob", cfg.leave_unmasked_prob),
                           ("--random-token-prob", cfg.random_token_prob)):
            if not 0 <= prob <= 1:  # (a negative one made every masked token [MASK], silently)
                raise BadInput(f"{flag} {prob}: must be in [0, 1]")
        if cfg.leave_unmasked_prob + cfg.random_token_prob > 1:
            raise BadInput("--leave-unmasked-prob + --random-token-prob must be <= 1")
        if cfg.tokens_per_sample < 5:
            raise BadInput("--tokens-per-sample must be at least 5")
        if cfg.head_warmup_updates < -1:
            raise BadInput("--head-warmup-updates must be -1 (by the start's LM head), 0 (none) or N > 0")

    @classmethod
    def setup_task(cls, cfg: PseudoMaskedLMConfig, **kwargs):
        dictionary = load_pmlm_dictionary(cfg.data)
        paths = utils.split_paths(cfg.data)
        if len(paths) > 1:  # a bad shard is found now, not at the epoch that first reads it
            check_shards(paths, split=cfg.train_subset)
        return cls(cfg, dictionary)

    def begin_epoch(self, epoch, model):
        """fairseq calls this after it has loaded the start checkpoint: the head's record is read now."""
        super().begin_epoch(epoch, model)
        self.head_warmup(model)

    def head_warmup(self, model):
        """The number of first updates that train the LM head alone, decided once a run from the
        flag and the loaded weights' record (models/unilmv2.py) and logged."""
        if self._head_warmup is None:
            n, trained = self.cfg.head_warmup_updates, bool(model.lm_head_trained)
            # a model built here records its head trained: from random weights nothing is older than it
            state = "trained (or as new as the rest of the model)" if trained else "new"
            if n == -1:
                n = 0 if trained else NEW_HEAD_WARMUP_UPDATES
            if n == 0:
                logger.info(f"LM head is {state}: no head warm-up"
                            + ("" if trained else " (--head-warmup-updates 0)"))
            else:
                logger.info(f"LM head is {state}: training it alone for the first {n} update{'s' if n > 1 else ''} "
                            "(counted in --max-update; --head-warmup-updates 0: none)")
                if 0 < self.cfg.max_update <= n:
                    logger.warning(f"--max-update {self.cfg.max_update}: within the {n} head warm-up updates, "
                                   "only the LM head trains in this run")
            self._head_warmup = n
        return self._head_warmup

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        n = self.head_warmup(model)
        if update_num < n and isinstance(optimizer, FP16Optimizer):
            # its fp32 copy (flat or not) gives a missing gradient zeros, which Adam steps
            raise BadInput(
                f"--head-warmup-updates: the LM head trains alone for {n} updates, but --fp16's optimizer "
                "steps every parameter, a frozen one too (weight decay, Adam's step count): use "
                "--memory-efficient-fp16 or --bf16-autocast for this run, or --head-warmup-updates 0")
        out = super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        if update_num < n:
            # no gradient, no update: Adam skips a parameter whose .grad is None (weight decay too).
            # By identity, not by name: under DDP the names gain the wrappers' "module." prefixes
            head = {id(p) for p in self.head_parameters(model)}
            for p in model.parameters():
                if id(p) not in head:
                    p.grad = None
        if update_num + 1 >= n:
            # the head has had its warm-up (or needs none): a checkpoint saved from now on records it
            # trained, so a start from it gets no warm-up, and a resume before this point goes on with it
            model.lm_head_trained.fill_(1.0)
        return out

    @staticmethod
    def head_parameters(model):
        """The LM head's own parameters (dense, LayerNorm, bias), not the tied output embedding."""
        lm_head = model.transformer.lm_head  # fairseq's DDP wrappers pass attributes through
        return [p for p in lm_head.parameters() if p is not model.transformer.embed_tokens.weight]

    def masking_config(self):
        c = self.cfg
        return MaskingConfig(
            mask_prob=c.mask_prob, block_prob=c.block_mask_prob, min_block=c.min_block_len,
            max_block=c.max_block_len, random_token_prob=c.random_token_prob,
            leave_unmasked_prob=c.leave_unmasked_prob,
        )

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        paths = utils.split_paths(self.cfg.data)
        # one shard per epoch, round-robin (fairseq loads the valid split once, with epoch 1: the first)
        split_path = os.path.join(paths[(epoch - 1) % len(paths)], split)
        check_files(split_path)  # (fairseq: a traceback for a cut .idx, "cannot mmap" for a 0-byte .bin)
        lines = data_utils.load_indexed_dataset(split_path, self.dictionary, combine=combine)
        if lines is None:
            raise InputNotFound(f"dataset not found: {split_path}.{{bin,idx}}")
        if len(lines) == 0:
            raise BadInput(f"dataset is empty: {split_path}")
        check_complete(split_path, lines)
        try:
            dataset = PseudoMaskedLMDataset(
                lines, self.dictionary, self.cfg.tokens_per_sample, self.masking_config(),
                objectives.objective(str(self.cfg.objective)), self.mask_idx, self.pseudo_idx, self.cfg.seed,
                split=split,
            )
        except ValueError as e:  # name the file the user has to fix
            raise BadInput(f"{split_path}: {e}") from None
        self.datasets[split] = dataset

    def get_batch_iterator(self, dataset, max_tokens=None, *args, **kwargs):
        """fairseq's, after checking --max-tokens: a PAR example counts its appended tokens too (a
        context of --tokens-per-sample 512 and its [P]s and original copies: up to 672 tokens at
        --mask-prob 0.15), and below that fairseq's batching stops on an assertion."""
        if max_tokens is not None and isinstance(dataset, PseudoMaskedLMDataset) and max_tokens < dataset.most_tokens():
            # fairseq batches the other splits by --max-tokens-valid (which defaults to --max-tokens)
            train = dataset is self.datasets.get(self.cfg.train_subset)
            flag, sentences = ("--max-tokens", "--batch-size") if train else ("--max-tokens-valid",
                                                                              "--batch-size-valid")
            raise BadInput(
                f"{flag} {max_tokens}: an example of --tokens-per-sample {self.cfg.tokens_per_sample} counts "
                f"up to {dataset.most_tokens()} tokens with --objective {self.cfg.objective} (its context and "
                f"appended tokens): give {flag} {dataset.most_tokens()} or more, or {sentences}")
        return super().get_batch_iterator(dataset, max_tokens, *args, **kwargs)

    def max_positions(self):
        return self.cfg.tokens_per_sample
