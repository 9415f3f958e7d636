"""One run of the data-bin engine (``Preparer``): the tokeniser, the output directory (built and
swapped in by the rule of ``runtime/output_dir.py``), the pool of workers, the progress lines and
the closing summary of what it cost."""
import os
import time

import numpy as np

from ...runtime import output_dir
from ...symbols import SENTENCE_SEP, separator_symbol
from ...text.token_ids import make_tokenizer
from . import PrepareError, reading
from .reading import part_offsets
from .workers import Workers, encode_part, init_worker, part_dtype, set_tokenizer
from .writer import write_databin

_START = [time.time()]  # reset by cli.main(): the summary's end-to-end time includes tokeniser training


class Preparer:
    """One run: the tokeniser, the output (``open_output``), a pool of workers."""

    def __init__(self, prog, output, tokenizer_spec, workers):
        self.prog, self.output, self.spec, self.workers = prog, output, tokenizer_spec, workers
        self.out, self.tmp, self.built = output.out, output.staging, output.path  # scratch files in tmp
        try:
            self.tokenizer = make_tokenizer(tokenizer_spec)
        except (RuntimeError, ValueError) as e:  # (UnicodeDecodeError too: a binary file given as vocab.txt)
            kind = "sentencepiece model" if tokenizer_spec[0] == "spm" else "WordPiece vocab.txt"
            why = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise PrepareError(f"{tokenizer_spec[1]}: not a usable {kind} ({why})") from None
        self.eos_code = self.tokenizer.size
        self.pool = None
        self.n_parts = 0
        self.t0, self.text_bytes, self.encode_s, self.write_s = _START[0], 0, 0.0, 0.0

    def say(self, msg):
        print(f"{self.prog.replace('.sh', '')}: {msg}", flush=True)

    def encode(self, label, path, ranges):
        """Encode byte ranges of ``path``; returns (part prefixes, lines, id counts)."""
        jobs = []
        total = sum(e - s for s, e in ranges)
        # >= 4 parts a worker; the tunables are read from ``reading`` at each call (tests lower them)
        part_bytes = min(reading.PART_BYTES, max(reading.MIN_PART_BYTES, total // (4 * self.workers)))
        for start, end in ranges:
            for s, e in part_offsets(path, start, end, part_bytes):
                jobs.append((path, s, e, os.path.join(self.tmp, f"part{self.n_parts:06d}"), self.eos_code))
                self.n_parts += 1
        counts = np.zeros(self.eos_code + 1, dtype=np.int64)
        lines, done, t0, shown = 0, 0, time.time(), time.time()
        self.text_bytes += total
        if self.workers > 1 and len(jobs) > 1:
            if self.pool is None:
                self.pool = Workers(self.workers, init_worker, (self.spec,))
            results = self.pool.imap(encode_part, jobs)
        else:
            set_tokenizer(self.tokenizer)
            results = map(encode_part, jobs)
        for job, (n, c) in zip(jobs, results):
            lines += n
            counts += c
            done += job[2] - job[1]
            if time.time() - shown > 10 and done < total:
                shown = time.time()
                self.say(f"  {label}: {done / 2**20:,.0f} of {total / 2**20:,.0f} MB "
                         f"({done / 2**20 / (shown - t0):.1f} MB/s)")
        self.encode_s += time.time() - t0
        return [j[3] for j in jobs], lines, counts

    @staticmethod
    def ends_document(part):
        """Whether the last line of ``part`` is blank (an item of size 1: a document boundary); a
        part without lines has no document to end."""
        sizes = np.fromfile(part + ".sizes", dtype=np.int32)
        return sizes.size == 0 or int(sizes[-1]) <= 1

    def document_boundary(self):
        """A part of one blank line (just EOS): the document boundary between two training files."""
        part = os.path.join(self.tmp, f"part{self.n_parts:06d}")
        self.n_parts += 1
        try:  # (a full disk: named as the workers' part files are, as the run's output)
            with open(part + ".ids", "wb") as f:
                f.write(np.array([self.eos_code], dtype=part_dtype(self.eos_code)).tobytes())
            with open(part + ".sizes", "wb") as f:
                f.write(np.array([1], dtype=np.int32).tobytes())
        except OSError as e:
            raise OSError(e.errno, e.strerror, e.filename or part + ".ids") from None
        return part

    def write(self, parts, table, prefix, n_symbols):
        t = time.time()
        stats = write_databin(parts, table, prefix, n_symbols)
        self.write_s += time.time() - t
        return stats

    def summary(self):
        """One line of what it cost: MB/s end to end and of tokenisation, peak RSS."""
        import resource

        total = time.time() - self.t0
        mb = self.text_bytes / 2**20
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        self.say(f"{mb:,.1f} MB of text in {total:.1f} s: {mb / total:.2f} MB/s end to end; tokenising "
                 f"{self.encode_s:.1f} s ({mb / max(self.encode_s, 1e-9):.2f} MB/s, {self.workers} worker(s)), "
                 f"writing the data-bin {self.write_s:.1f} s ({mb / max(self.write_s, 1e-9):.1f} MB/s); "
                 f"peak RSS {own:,.0f} MB"
                 + (f" (the largest child process: {child:,.0f} MB)" if child else ""))

    def finish(self):
        """The built directory into place (the old one replaced only once the new one is whole)."""
        self.output.commit()

    def close(self):
        """Stop the workers (waiting for them, so their peak RSS is counted) and remove the temp dir."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self.output.close()


def open_output(out, force, inputs):
    """The run's ``output_dir.Output``: refused if it would replace an input (even with --force),
    or an existing output without --force."""
    return output_dir.Output(out, force, inputs=inputs, error=PrepareError, hint="--name or --destdir")


def print_stats(prep, label, lines, tokens, unks):
    share = 100.0 * unks / tokens if tokens else 0.0
    prep.say(f"  {label}: {lines:,} lines, {tokens:,} tokens, {share:.2f}% <unk>")


def say_separators(prep, where, n, dictionary, dict_name, why_unk):
    """The one line on ``[X_SEP]`` in the text (``n`` of them, first seen in ``where``): each is one
    token, the dictionary's separator row, or <unk> where it has none (``why_unk``: why that matters
    to this route). Said for pre-training text and pairs alike, so that a literal "[X_SEP]" never
    changes the data silently."""
    if not n:
        return
    sep = separator_symbol(dictionary.symbols)
    if sep is None:
        prep.say(f"note: {where} holds {SENTENCE_SEP} ({n:,} in the text) but {dict_name} has no row for it "
                 f"(neither {SENTENCE_SEP} nor a WordPiece [unusedN] row): it becomes <unk>; {why_unk}")
    else:
        prep.say(f"sentence separator {SENTENCE_SEP}: {n:,} in the text ({where}), one token each "
                 f"({sep if sep != SENTENCE_SEP else 'its own row'})")
