"""One run of the data-bin engine (``Preparer``): the tokeniser, a temporary directory beside the
output (refusing to replace an input, or an output without ``--force``), the pool of workers, the
progress lines and the closing summary of what it cost; moving the built directory into place."""
import os
import shutil
import tempfile
import time

import numpy as np

from ...text.token_ids import make_tokenizer
from . import PrepareError, reading
from .reading import part_offsets
from .workers import Workers, encode_part, init_worker, set_tokenizer
from .writer import write_databin

_START = [time.time()]  # reset by cli.main(): the summary's end-to-end time includes tokeniser training


class Preparer:
    """One run: the tokeniser, a temp dir beside the output, a pool of workers."""

    def __init__(self, prog, out, tokenizer_spec, workers, force, inputs):
        self.prog, self.out, self.spec, self.workers = prog, os.path.abspath(out), tokenizer_spec, workers
        check_output(self.out, force, inputs)
        parent = os.path.dirname(self.out)
        os.makedirs(parent, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(self.out)}.", dir=parent)
        self.tokenizer = make_tokenizer(tokenizer_spec)
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

    def finish(self, built):
        """Move the built directory into place (replacing an old one only after it is whole)."""
        old = None
        if os.path.lexists(self.out):
            old = os.path.join(self.tmp, "replaced")
            os.rename(self.out, old)
        os.rename(built, self.out)
        if old:
            shutil.rmtree(old, ignore_errors=True)

    def close(self):
        """Stop the workers (waiting for them, so their peak RSS is counted) and remove the temp dir."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        shutil.rmtree(self.tmp, ignore_errors=True)


def check_output(out, force, inputs):
    """Refuse to replace an output that holds an input (even with --force), or any existing
    output without --force."""
    real_out = os.path.realpath(out)
    for path in inputs:
        real = os.path.realpath(path)
        if real == real_out or real.startswith(real_out + os.sep):
            raise PrepareError(f"the output {out} holds the input {path}: choose another --name or --destdir "
                               "(it would be deleted)")
        if real_out.startswith(real + os.sep):
            raise PrepareError(f"the output {out} lies inside the input {path}")
    if os.path.lexists(out) and not force:
        raise PrepareError(f"{out} exists: pass --force to replace it")


def print_stats(prep, label, lines, tokens, unks):
    share = 100.0 * unks / tokens if tokens else 0.0
    prep.say(f"  {label}: {lines:,} lines, {tokens:,} tokens, {share:.2f}% <unk>")
