"""fairseq task ``pmlm_seq2seq``: UniLMv2 sequence-to-sequence fine-tuning and generation
(docs/DESIGN.md §4: s2s-ft's pseudo-masking).

Data: ``fairseq-preprocess --source-lang source --target-lang target --srcdict DICT
--tgtdict DICT`` with the pre-training dictionary, so ``dict.txt`` (or ``dict.source.txt``)
is the one dictionary of both sides. Batches are fairseq's usual encoder-decoder batches
(``src_tokens``, ``src_lengths``, ``prev_output_tokens``, ``target``); the model turns
them into the pseudo-masked layout, so fairseq's generator, scorers and
``label_smoothed_cross_entropy`` all work unchanged.
"""
import logging
import os
from dataclasses import dataclass, field

import numpy as np
import torch
from fairseq import utils
from fairseq.data import (
    AppendTokenDataset,
    LanguagePairDataset,
    ListDataset,
    PrependTokenDataset,
    StripTokenDataset,
    TruncateDataset,
    data_utils,
)
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import FairseqTask, register_task
from omegaconf import II, MISSING

from ..data.blockwise_masking import MaskingConfig, corrupt
from ..data.databin_checks import check_complete, check_files
from ..data.dict_files import dict_names
from ..data.pmlm_dictionary import load_pmlm_dictionary
from ..errors import BadInput, InputNotFound
from ..sequence_generator import BEAM_SEARCHES, EOS_AT_LIMIT, LENPEN_FORMULAS, PMLMSequenceGenerator
from ..symbols import MASK_SYMBOL, PSEUDO_SYMBOL, random_token_candidates
from ..text import tokenizer_files
from ..text.input_text import ValidUnicodeBPE, tolerant_stdin
from .autocast import AutocastConfig, BF16AutocastMixin
from .pseudo_masked_lm import PMLMDictionaryMixin

logger = logging.getLogger(__name__)
# s2s-ft's word drop replaces a chosen target input as pre-training corrupts a masked token
WORD_DROP = MaskingConfig()  # 80% [MASK], 10% a random token, 10% kept


def check_language_pair(directory, src, tgt):
    """fairseq-preprocess names pair files SPLIT.SRC-TGT.LANG.{bin,idx}. When the flags' pair (the
    task's defaults: source-target) is not there, pairs with other suffixes (fairseq's translation
    convention: src-tgt, de-en) are named with the flags that read them."""
    if not os.path.isdir(directory):
        return  # (the dictionary's loader names it)
    pairs = set()
    for name in os.listdir(directory):
        parts = name.split(".")
        if len(parts) == 4 and parts[3] == "idx" and parts[1].count("-") == 1 and parts[1].split("-")[0] == parts[2]:
            pairs.add(tuple(parts[1].split("-")))
    if pairs and (src, tgt) not in pairs:
        theirs = " or ".join(f"--source-lang {a} --target-lang {b}" for a, b in sorted(pairs))
        raise BadInput(f"{directory} has no {src}-{tgt} pairs (--source-lang {src} --target-lang {tgt}): "
                       f"its pairs are read with {theirs}")


@dataclass
class PMLMSeq2SeqConfig(AutocastConfig):
    data: str = field(default=MISSING, metadata={"help": "fairseq-preprocess output of source/target pairs"})
    source_lang: str = field(default="source", metadata={"help": "source suffix of the binarized files"})
    target_lang: str = field(default="target", metadata={"help": "target suffix of the binarized files"})
    max_source_positions: int = field(
        default=464, metadata={"help": "source tokens kept, [SOS] and [EOS] included (longer ones are truncated)"}
    )
    max_target_positions: int = field(
        default=48, metadata={"help": "target tokens kept, [EOS] included (longer train/valid targets are "
                                      "truncated; test targets are kept whole as references)"}
    )
    target_mask_prob: float = field(
        default=0.5, metadata={"help": "probability of corrupting each target input token (s2s-ft word drop; "
                                       "80% [MASK], 10% random, 10% kept)"}
    )
    pseudo_draw: bool = field(
        default=False, metadata={"help": "training: feed each [P] a draw of the target token it predicts "
                                         "(80% the pseudo token, 10% a random token, 10% the token itself) "
                                         "and give a dropped target input (--target-mask-prob) that same "
                                         "draw, as s2s-ft's pseudo-masking does; off: every [P] is the "
                                         "pseudo token and a dropped input draws its own"}
    )
    lenpen_formula: ChoiceEnum(LENPEN_FORMULAS) = field(
        default="fairseq", metadata={"help": "generation: divide a hypothesis' score by len ** lenpen (fairseq) "
                                             "or by ((5 + len) / 6) ** lenpen (gnmt: s2s-ft and the paper)"}
    )
    no_repeat_ngram_ignore: str = field(
        default="", metadata={"help": "generation: words whose n-grams --no-repeat-ngram-size never bans, "
                                      "space-separated dictionary symbols (a word also matches its "
                                      "sentencepiece form, '.' also '\u2581.'), as s2s-ft's "
                                      "--forbid_ignore_word: e.g. '.'"}
    )
    eos_at_limit: ChoiceEnum(EOS_AT_LIMIT) = field(
        default="forced", metadata={"help": "generation: at the length limit fairseq forces EOS and adds its "
                                            "log-probability (forced); free: a hypothesis still open there ends "
                                            "as it stands, its score and length without EOS (s2s-ft)"}
    )
    beam_search: ChoiceEnum(BEAM_SEARCHES) = field(
        default="fairseq", metadata={"help": "generation: fairseq's beam search, or s2s-ft's (beam slots a "
                                             "step, ended hypotheses included, so the open beam narrows; "
                                             "open hypotheses at the length limit end unscored)"}
    )
    seed: int = II("common.seed")
    train_subset: str = II("dataset.train_subset")  # the split that trains: word drop, draws, shuffling


class WordDropPairDataset(LanguagePairDataset):
    """LanguagePairDataset that corrupts the target *inputs* (``prev_output_tokens``) with
    s2s-ft's word drop (the targets stay intact), with ``pseudo_draw`` also gives the [P]s their
    draws (``pseudo_tokens``), and skips the pairs with an empty side of the
    training and validation splits, counted in the log. A test split keeps every pair, so that
    fairseq-generate writes one hypothesis per reference line: an empty source is decoded from
    ``[SOS] [EOS]``, an empty reference simply scores 0."""

    def __init__(self, *args, empty=None, drop_prob=0.0, pseudo_draw=False, mask_idx=None, seed=1, split="train",
                 **kwargs):
        """``empty``: bool per pair, True where the source or the target line had no token."""
        super().__init__(*args, **kwargs)
        self.empty = np.zeros(len(self), dtype=bool) if empty is None else empty
        self.drop_prob, self.pseudo_draw, self.mask_idx, self.seed, self.split = (
            drop_prob, pseudo_draw, mask_idx, seed, split)
        self.epoch = 1
        self.random_candidates = random_token_candidates(self.tgt_dict)

    def set_epoch(self, epoch):
        super().set_epoch(epoch)
        self.epoch = epoch

    @property
    def can_reuse_epoch_itr_across_epochs(self):
        # the word drop draws from the epoch: a reused iterator keeps its loader workers, whose copy
        # of the dataset stays at the epoch they started in (the resumed one, for a rerun)
        return not (self.drop_prob or self.pseudo_draw)

    def ordered_indices(self):
        # fairseq makes the batches once, when a run builds its iterator, with numpy seeded by
        # --seed + that epoch: 1 for a run from the start, the epoch it resumed in for a rerun, whose
        # batches then differed. The permutation a run from the start gets, whatever the epoch:
        # a resumed run trains on the same batches (pre-training's dataset seeds its own, too).
        if not self.shuffle:
            return super().ordered_indices()
        with data_utils.numpy_seed(self.seed + 1):
            return super().ordered_indices()

    def collater(self, samples, pad_to_length=None):
        batch = super().collater(samples, pad_to_length)
        if not (self.drop_prob > 0 or self.pseudo_draw) or not batch or "prev_output_tokens" not in batch["net_input"]:
            return batch
        pad, net_input = self.tgt_dict.pad(), batch["net_input"]
        prev = net_input["prev_output_tokens"].numpy()
        # a function of (seed, epoch, the batch's first ids): a resumed run drops the same words
        rng = np.random.default_rng([self.seed, self.epoch, *batch["id"].tolist()[:4]])
        real = prev != pad
        real[:, 0] = False  # the start symbol is not fed to the model
        if not self.pseudo_draw:
            hit = np.flatnonzero(real & (rng.random(prev.shape) < self.drop_prob))
            dropped = corrupt(rng, prev.ravel(), hit, WORD_DROP, self.mask_idx, self.random_candidates)
            net_input["prev_output_tokens"] = torch.from_numpy(dropped.reshape(prev.shape))
            return batch
        # s2s-ft's pseudo-masking: one draw per target token, PAD standing for the model's pseudo
        # token (which the decoder puts in); a dropped input takes its own token's draw. Worked
        # example, targets [a b EOS], inputs [EOS a b], draws [r PAD EOS]: the [P]s predicting a, b,
        # EOS are fed a random r, [P] and EOS itself; dropping input a feeds r, dropping b [MASK].
        target = batch["target"].numpy()
        draw = corrupt(rng, target.ravel(), np.flatnonzero(target.ravel() != pad), WORD_DROP, pad,
                       self.random_candidates).reshape(target.shape)
        net_input["pseudo_tokens"] = torch.from_numpy(draw)
        if self.drop_prob > 0:
            own = np.concatenate([np.full((len(prev), 1), pad), draw[:, :-1]], 1)  # input j is target j - 1
            hit = real & (rng.random(prev.shape) < self.drop_prob)
            net_input["prev_output_tokens"] = torch.from_numpy(
                np.where(hit, np.where(own == pad, self.mask_idx, own), prev))
        return batch

    def filter_indices_by_size(self, indices, max_sizes):
        empty = self.empty[indices]
        if self.split.startswith("test"):
            if empty.any():
                logger.warning(f"{self.split}: {int(empty.sum())} pairs with an empty source or target line "
                               "are decoded too (an empty reference scores 0)")
            if isinstance(max_sizes, tuple):
                max_sizes = (max_sizes[0], float("inf"))  # whole references (see load_dataset)
            return super().filter_indices_by_size(indices, max_sizes)
        if empty.any():
            logger.warning(f"{self.split}: skipped {int(empty.sum())} pairs with an empty source or target line")
        return super().filter_indices_by_size(indices[~empty], max_sizes)


@register_task("pmlm_seq2seq", dataclass=PMLMSeq2SeqConfig)
class PMLMSeq2SeqTask(BF16AutocastMixin, PMLMDictionaryMixin, FairseqTask):
    cfg: PMLMSeq2SeqConfig

    def __init__(self, cfg, dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        self.mask_idx = dictionary.index(MASK_SYMBOL)
        # inference input without --bpe (build_bpe), and whether its <unk>s were looked into (once)
        self._without_bpe, self._bpe_hint_done = False, False

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        if not 0 <= cfg.target_mask_prob < 1:
            raise BadInput("--target-mask-prob must be in [0, 1)")
        try:
            dictionary = load_pmlm_dictionary(cfg.data, dict_names(cfg.source_lang))
        except InputNotFound:
            check_language_pair(utils.split_paths(cfg.data)[0], cfg.source_lang, cfg.target_lang)
            raise
        return cls(cfg, dictionary)

    def _side(self, split, lang):
        paths = utils.split_paths(self.cfg.data)
        prefix = os.path.join(paths[0], f"{split}.{self.cfg.source_lang}-{self.cfg.target_lang}.{lang}")
        check_files(prefix)  # (fairseq: a traceback for a cut .idx, "cannot mmap" for a 0-byte .bin)
        ds = data_utils.load_indexed_dataset(prefix, self.dictionary)
        if ds is None:
            check_language_pair(paths[0], self.cfg.source_lang, self.cfg.target_lang)
            raise InputNotFound(f"dataset not found: {prefix}.{{bin,idx}}")
        check_complete(prefix, ds)
        return ds

    def source_view(self, src):
        """``[SOS] SRC [EOS]`` of a dataset of token lines (binarized, or encoded by
        fairseq-interactive and the hub: with or without their [EOS]), truncated to
        --max-source-positions: the one layout of the source, in training and in inference."""
        eos = self.dictionary.eos()
        src = TruncateDataset(StripTokenDataset(src, eos), self.cfg.max_source_positions - 2)
        return PrependTokenDataset(AppendTokenDataset(src, eos), self.dictionary.bos())

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        src, tgt = self._side(split, self.cfg.source_lang), self._side(split, self.cfg.target_lang)
        if len(src) != len(tgt):
            raise BadInput(f"{split}: {len(src)} source lines but {len(tgt)} target lines")
        empty = (src.sizes <= 1) | (tgt.sizes <= 1)  # an empty line is binarized as its EOS alone
        eos = self.dictionary.eos()
        if not split.startswith("test"):
            # train/valid targets carry a loss, so they must fit the positions; test targets are
            # only references for --scoring, and a truncated reference would inflate the score
            limit = self.cfg.max_target_positions
            cut = int((tgt.sizes > limit).sum())  # (sizes count the EOS)
            if cut:
                logger.info(f"{split}: {cut} of {len(tgt)} targets are longer than --max-target-positions "
                            f"{limit} and cut to it (EOS included); a --scoring of this split reads them cut")
            tgt = AppendTokenDataset(TruncateDataset(StripTokenDataset(tgt, eos), limit - 1), eos)
        src = self.source_view(src)
        training = split == self.cfg.train_subset  # (a --train-subset of another name trains alike)
        self.datasets[split] = WordDropPairDataset(
            src, src.sizes, self.dictionary, tgt, tgt.sizes, self.dictionary,
            left_pad_source=False, left_pad_target=False, shuffle=training,
            empty=empty, drop_prob=self.cfg.target_mask_prob if training else 0.0,
            pseudo_draw=self.cfg.pseudo_draw and training, mask_idx=self.mask_idx, seed=self.cfg.seed, split=split,
        )

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        """fairseq-interactive and the hub: encoded lines, laid out as in training."""
        self._hint_bpe_flags(src_tokens)
        src = self.source_view(ListDataset(src_tokens, np.asarray(src_lengths)))
        return LanguagePairDataset(
            src, src.sizes, self.dictionary, tgt_dict=self.dictionary, left_pad_source=False, constraints=constraints,
        )

    def build_bpe(self, args):
        """fairseq-interactive's and fairseq-generate's tokenizer; raw stdin lines with bytes that
        are not UTF-8 are tokenised with U+FFFD in their place instead of ending the session."""
        tolerant_stdin()
        bpe = super().build_bpe(args)
        self._without_bpe = bpe is None
        return None if bpe is None else ValidUnicodeBPE(bpe)

    def _hint_bpe_flags(self, src_tokens):
        """fairseq-interactive tokenises its input only with --bpe flags (as for any fairseq model):
        without them raw words meet a dictionary of pieces, mostly as <unk> ("the" is "▁the" to
        sentencepiece), and the output is noise. Said once, with the flags the data's tokenizer takes."""
        if not self._without_bpe or self._bpe_hint_done:
            return
        d = self.dictionary
        unk = sum(int(t.eq(d.unk()).sum()) for t in src_tokens)
        if not unk:
            return
        self._bpe_hint_done = True
        words = sum(int((t.ne(d.eos()) & t.ne(d.bos()) & t.ne(d.pad())).sum()) for t in src_tokens)
        try:
            flags = tokenizer_files.find(str(self.cfg.data).split(os.pathsep)[0]).fairseq_flags()
        except ValueError:  # no tokenizer beside the data: the input is already the dictionary's symbols
            return
        logger.warning(f"{unk} of {words} source tokens are <unk>: the input is raw "
                       f"text and no --bpe was given; this data's tokenizer: {' '.join(flags)}")

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        need = self.cfg.max_source_positions + self.cfg.max_target_positions
        if need > model.max_positions():
            raise BadInput(
                f"--max-source-positions {self.cfg.max_source_positions} + --max-target-positions "
                f"{self.cfg.max_target_positions} exceed the model's --max-positions {model.max_positions()}"
            )
        return model

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None, **kwargs):
        """fairseq's generator with s2s-ft's conventions (sequence_generator.py: the length
        penalty formula, tokens that are never text banned, a working n-gram blocker), after
        checking that the longest target it may produce still has positions left after the
        longest source (else it would fail mid-run)."""
        limit = min(m.max_positions() for m in models)
        src = self.cfg.max_source_positions
        # the [P] of the last step (forced EOS) sits at position src + longest
        if getattr(args, "score_reference", False):  # (fairseq's scorer decodes nothing: no --max-len-a/b)
            self._check_references_fit(limit)
        elif getattr(args, "match_source_len", False):  # (then fairseq ignores --max-len-a/b)
            longest = src - 1  # the source's tokens but [SOS] (sequence_generator.py)
            if src + longest >= limit:
                raise BadInput(
                    f"--match-source-len allows targets as long as a source, up to {longest} tokens "
                    f"(--max-source-positions {src}), and the model's {limit} positions leave "
                    f"{limit - src - 1} after it: lower --max-source-positions to {limit // 2}"
                )
        else:
            longest = int(args.max_len_a * src + args.max_len_b)
            if src + longest >= limit:
                raise BadInput(
                    f"--max-len-b {args.max_len_b} (with --max-len-a {args.max_len_a}) "
                    f"allows {longest} target tokens, but after a source of up to {src} positions "
                    f"(--max-source-positions) the model's {limit} positions leave {limit - src - 1}"
                )
            if not args.max_len_a and args.max_len_b < args.min_len:  # (fairseq asserts it at the first batch)
                raise BadInput(f"--max-len-b {args.max_len_b} allows fewer target tokens than --min-len {args.min_len}")
        if getattr(args, "retain_dropout", False):
            # (fairseq switches on its FairseqDropout modules; the layers here drop out in training only)
            raise BadInput("--retain-dropout: a unilmv2 model applies dropout in training only, "
                           "so it would decode without it: decode without --retain-dropout")
        if getattr(args, "print_alignment", None):
            # (fairseq's aligning generator would read attention weights the model does not return)
            raise BadInput("--print-alignment: a unilmv2 model has no source-target attention weights "
                           "to align with (its attention kernels return none): decode without it")
        if seq_gen_cls is None:
            d = self.dictionary
            seq_gen_cls = PMLMSequenceGenerator
            extra_gen_cls_kwargs = {
                "lenpen_formula": self._decoding_flag(args, "lenpen_formula"),
                "banned_tokens": [d.bos(), self.mask_idx, d.index(PSEUDO_SYMBOL)],
                "ngram_ignore": self._ngram_ignore(args),
                "eos_at_limit": self._decoding_flag(args, "eos_at_limit"),
                "beam_search": self._beam_search(args),
                **(extra_gen_cls_kwargs or {}),
            }
        return super().build_generator(models, args, seq_gen_cls, extra_gen_cls_kwargs, **kwargs)

    def _decoding_flag(self, args, name):
        """A decoding flag of this task: the generation call's value (the hub's keyword) if it has
        one, else the task's (fairseq-generate's command line), as a string."""
        return str(getattr(args, name, None) or getattr(self.cfg, name) or "")

    def _beam_search(self, args):
        """--beam-search, refused with the search flags s2s-ft's search has no counterpart for."""
        search = self._decoding_flag(args, "beam_search")
        if search == "s2s-ft":
            for flag, on in (("--sampling", getattr(args, "sampling", False)),
                             ("--diverse-beam-groups", getattr(args, "diverse_beam_groups", -1) > 0),
                             ("--diversity-rate", getattr(args, "diversity_rate", -1) > 0),
                             ("--match-source-len", getattr(args, "match_source_len", False)),
                             ("--prefix-size", getattr(args, "prefix_size", 0) > 0),
                             ("--lm-path", getattr(args, "lm_path", None)),
                             ("--constraints", getattr(args, "constraints", None))):
                if on:
                    raise BadInput(f"{flag} with --beam-search s2s-ft: s2s-ft's search has no such option "
                                   "(decode with --beam-search fairseq)")
        return search

    def _ngram_ignore(self, args):
        """--no-repeat-ngram-ignore's words as token ids: each symbol itself and its sentencepiece
        word-start form ('.' and '\u2581.'), those the dictionary has; a word with neither is an error."""
        words = self._decoding_flag(args, "no_repeat_ngram_ignore").split()
        if words and not getattr(args, "no_repeat_ngram_size", 0):
            raise BadInput(f"--no-repeat-ngram-ignore {' '.join(words)}: it exempts words from the n-gram ban "
                           "of --no-repeat-ngram-size, which is off: set --no-repeat-ngram-size N as well")
        ids = []
        for word in words:
            forms = (word, "\u2581" + word)
            found = [self.dictionary.indices[s] for s in forms if s in self.dictionary.indices]
            if not found:
                raise BadInput(f"--no-repeat-ngram-ignore: neither {forms[0]!r} nor {forms[1]!r} is a symbol of "
                               f"the model's dictionary ({len(self.dictionary)} symbols)")
            ids += found
        return ids

    def _check_references_fit(self, limit):
        """--score-reference reads each test reference after its source, and test references are
        kept whole (load_dataset): each pair's must fit (the model raised at the first batch that
        did not, after printing the ones before it)."""
        for split, ds in self.datasets.items():
            if not (split.startswith("test") and getattr(ds, "tgt_sizes", None) is not None and len(ds.tgt_sizes)):
                continue
            need = ds.src_sizes.astype(np.int64) + ds.tgt_sizes  # positions: [SOS] source [EOS], then the reference
            over = np.flatnonzero(need > limit)
            if len(over):
                i = int(over[np.argmax(need[over])])
                room = limit - int(ds.tgt_sizes[over].max())  # the longest source that lets them all fit
                raise BadInput(
                    f"--score-reference: {split} pair {i}'s source ({ds.src_sizes[i]} positions with [SOS] and "
                    f"[EOS]) and reference, kept whole ({ds.tgt_sizes[i]} tokens with EOS), need {need[i]} "
                    f"positions, the model has {limit} ({len(over)} such pair(s)): " + (
                        f"lower --max-source-positions to {room}" if room >= 3 else
                        "no source fits before the longest (score a split without it)"))

    def max_positions(self):
        return (self.cfg.max_source_positions, self.cfg.max_target_positions)
