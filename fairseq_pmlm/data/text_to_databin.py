"""Raw text -> fairseq data-bin, streamed and in parallel: the engine of ``prepare_data.sh``
(documents, optional shards) and ``s2s/prepare.sh`` (source/target pairs).

How it scales (numbers in docs/BENCHMARKS.md):
- each input is cut into parts of ~``PART_BYTES`` at line starts; ``--workers`` processes
  tokenise their parts in batches of lines (Hugging Face ``tokenizers`` for WordPiece,
  sentencepiece's batch encoder) and write the ids straight into a part file, so memory is
  bounded by a batch, not by the input, and no per-token Python string work is done;
- the parts are concatenated in order into fairseq's mmap format (``train.bin``/``.idx``)
  through a lookup table from tokeniser ids to dictionary rows; the index is written with
  numpy, never as a Python list.

The output is byte for byte what the old route gave (tokeniser -> text pieces ->
``fairseq-preprocess``), including a dictionary built from the training text (counts sorted
as fairseq's ``Dictionary.finalize`` sorts them, padded to a multiple of 8).

Lines end at ``\\n`` only, as ``wc -l`` counts them: a ``\\r`` before it is dropped and any other
``\\r`` is a space (Python's universal newlines would split a line there and shift every later
pair). Text must be UTF-8: a bad byte stops with ``FILE:LINE: ...``. Everything is built in a
temporary directory beside the output and renamed into place; nothing is left on an error,
Ctrl-C or SIGTERM.
"""
import argparse
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
from itertools import chain
from multiprocessing import get_context
from multiprocessing.connection import wait

import numpy as np

from ..interrupts import sigterm_as_interrupt
from ..symbols import SENTENCE_SEP, separator_symbol

PART_BYTES = 32 << 20  # a worker's unit of work; small enough to balance 2..64 workers
MIN_PART_BYTES = 1 << 20
BATCH_LINES = 2000  # lines per tokeniser call: memory ~ a few MB per worker
_IDX_MAGIC = b"MMIDIDX\x00\x00"
_DTYPE_CODE = {np.dtype(np.uint16): 8, np.dtype(np.uint32): 9, np.dtype(np.int64): 5}  # fairseq's codes


class PrepareError(Exception):
    """A bad input or environment; its message is the one line the user sees."""


# ------------------------------------------------------------------ reading lines
def line_number(path, offset, index_in_part):
    """1-based line number of the ``index_in_part``-th line of the part starting at ``offset``
    (only computed for error messages)."""
    newlines = 0
    with open(path, "rb") as f:
        remaining = offset
        while remaining > 0:
            block = f.read(min(remaining, 1 << 24))
            if not block:
                break
            newlines += block.count(b"\n")
            remaining -= len(block)
    return newlines + index_in_part + 1


def read_lines(path, start, end):
    """Decoded lines of ``path`` whose first byte lies in [start, end), in batches. A trailing
    ``\\r`` is dropped, any other ``\\r`` becomes a space; invalid UTF-8 -> PrepareError."""
    batch, n_done = [], 0
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        while pos < end:
            raw = f.readline()
            if not raw:
                break
            pos += len(raw)
            raw = raw.rstrip(b"\n")
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                line = line_number(path, start, n_done + len(batch))
                raise PrepareError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x} at column "
                                   f"{e.start + 1}); convert it, e.g. iconv -f latin1 -t utf-8") from None
            batch.append(text.replace("\r", " ") if "\r" in text else text)
            if len(batch) == BATCH_LINES:
                yield batch
                n_done += len(batch)
                batch = []
    if batch:
        yield batch


def count_lines(path):
    """Lines as this module splits them (``\\n`` only; a last line without one counts)."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def part_offsets(path, start, end, part_bytes=PART_BYTES):
    """Cut [start, end) of ``path`` at line starts into parts of about ``part_bytes``."""
    cuts = [start]
    with open(path, "rb") as f:
        target = start + part_bytes
        while target < end:
            f.seek(target)
            f.readline()  # to the next line start
            cut = f.tell()
            if cut >= end:
                break
            cuts.append(cut)
            target = cut + part_bytes
    return list(zip(cuts, cuts[1:] + [end]))


def next_document_start(path, offset, scan_limit=64 << 20):
    """The first byte after ``offset`` where a document starts (the line after a blank line),
    or the file's end; where no blank line comes within ``scan_limit`` bytes, the next line start."""
    with open(path, "rb") as f:
        f.seek(offset)
        f.readline()  # to a line start
        scanned = 0
        while True:
            pos = f.tell()
            line = f.readline()
            if not line:
                return pos
            if not line.strip(b"\r\n"):  # a blank line: the next line starts a document
                return f.tell()
            scanned += len(line)
            if scanned > scan_limit:
                return pos


# ------------------------------------------------------------------ tokenisers
# Both tokenisers give the sentence separator [X_SEP] (multi-sentence targets: CNN/DailyMail)
# one id of its own, the last one (``sep_id``), whatever the tokeniser would make of the text
# "[X_SEP]": the text between separators is encoded piece by piece. ``lookup_table`` sends that
# id to the dictionary's separator row (``symbols.separator_symbol``).
def encode_sentences(encode, lines, sep_id):
    """``encode`` of ``lines``, each separator between two sentences becoming ``sep_id``."""
    if not any(SENTENCE_SEP in line for line in lines):
        return encode(lines)
    pieces = [line.split(SENTENCE_SEP) for line in lines]
    flat = iter(encode([p for line in pieces for p in line]))
    out = []
    for line in pieces:
        ids = list(next(flat))
        for _ in line[1:]:
            ids += [sep_id] + list(next(flat))
        out.append(ids)
    return out


class SentencePieceIds:
    """sentencepiece ids; ``piece(i)`` names them as fairseq-preprocess would have seen them."""

    def __init__(self, model):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=model)
        self.sep_id = self.sp.get_piece_size()
        self.size = self.sep_id + 1

    def encode(self, lines):
        return encode_sentences(self._encode, lines, self.sep_id)

    def _encode(self, lines):
        stripped = [line.strip() for line in lines]
        return self.sp.encode(stripped, out_type=int, num_threads=1)

    def pieces(self):
        return [self.sp.id_to_piece(i) for i in range(self.sep_id)] + [SENTENCE_SEP]


class WordPieceIds:
    """BERT WordPiece ids (transformers' BertTokenizer, the Rust ``tokenizers`` backend);
    ``pieces()`` are the converted dictionary's symbols of those ids."""

    def __init__(self, vocab_path, cased):
        from ..weights.wordpiece import WordPieceEncoder

        enc = WordPieceEncoder(vocab_path, cased)
        self.cased, self.mapping = enc.cased, enc.mapping
        self.backend = enc.tokenizer.backend_tokenizer
        self.backend.no_truncation()
        self.backend.no_padding()
        self.symbols = enc.symbol_of
        self.sep_id = len(self.symbols)
        self.size = self.sep_id + 1

    def encode(self, lines):
        return encode_sentences(self._encode, lines, self.sep_id)

    def _encode(self, lines):
        ids = [[] for _ in lines]
        todo = [i for i, line in enumerate(lines) if line.strip()]
        # encode_batch_fast skips the character offsets we do not use (30 % faster)
        encode = getattr(self.backend, "encode_batch_fast", self.backend.encode_batch)
        for i, e in zip(todo, encode([lines[i] for i in todo], add_special_tokens=False)):
            ids[i] = e.ids
        return ids

    def pieces(self):
        return list(self.symbols) + [SENTENCE_SEP]


def make_tokenizer(spec):
    kind, path, cased = spec
    return SentencePieceIds(path) if kind == "spm" else WordPieceIds(path, cased)


# ------------------------------------------------------------------ workers
_TOKENIZER = None
_START = [time.time()]  # reset by main(): the summary's end-to-end time includes tokeniser training


def _default_signals():
    """In a child process: Ctrl-C is the parent's to handle, and the parent's SIGTERM (its
    ``terminate()``) ends the child at once, even inside a long C++ call."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _init_worker(spec):
    global _TOKENIZER
    _TOKENIZER = make_tokenizer(spec)


def _serve(conn, init, init_args):
    """A worker: ``(fn, args)`` in, ``(True, fn(*args))`` or ``(False, exception)`` out, until EOF."""
    _default_signals()
    if init is not None:
        init(*init_args)
    while True:
        try:
            fn, args = conn.recv()
        except EOFError:
            return
        try:
            conn.send((True, fn(*args)))
        except Exception as e:  # noqa: BLE001  (raised again in the parent)
            try:
                conn.send((False, e))
            except Exception:  # noqa: BLE001  (an exception that does not pickle)
                conn.send((False, PrepareError(f"{type(e).__name__}: {e}")))


class Workers:
    """Processes that each get their jobs over a pipe of their own. multiprocessing.Pool's workers
    share queues guarded by locks: a worker killed while holding one (a scheduler's SIGTERM goes
    to the whole process group, and an idle worker waits for work holding the queue's lock) left
    ``terminate()`` waiting for it forever. Here nothing is shared, so stopping never waits."""

    def __init__(self, n, init=None, init_args=()):
        ctx = get_context("fork")
        self.procs, self.conns = [], []
        for _ in range(n):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(theirs, init, init_args), daemon=True)
            self.procs.append(proc)
            self.conns.append(mine)
            proc.start()
            theirs.close()

    @staticmethod
    def _result(conn):
        try:
            ok, value = conn.recv()
        except EOFError:
            raise PrepareError("a worker process died (killed, or out of memory?)") from None
        if not ok:
            raise value
        return value

    def call(self, fn, *args):
        """fn(*args) in the first worker."""
        self.conns[0].send((fn, args))
        return self._result(self.conns[0])

    def imap(self, fn, jobs):
        """fn(job) for each of ``jobs``, spread over the workers, yielded in the order of ``jobs``."""
        todo, busy, done, n = iter(enumerate(jobs)), {}, {}, len(jobs)

        def feed(conn):
            i, job = next(todo, (None, None))
            if i is not None:
                conn.send((fn, (job,)))
                busy[conn] = i

        for conn in self.conns:
            feed(conn)
        for i in range(n):
            while i not in done:
                for conn in wait(list(busy)):
                    done[busy.pop(conn)] = self._result(conn)
                    feed(conn)
            yield done.pop(i)

    def close(self):
        """Stop the workers at once (they may be deep in a tokeniser call) and reap them."""
        for proc in self.procs:
            if proc.exitcode is None:
                proc.kill()
        for proc in self.procs:
            proc.join()
        for conn in self.conns:
            conn.close()
        self.procs, self.conns = [], []


def part_dtype(eos_code):
    """Parts hold tokeniser ids in 2 bytes where they fit: the temporary disk is one data-bin."""
    return np.uint16 if eos_code < 65535 else np.uint32


def encode_part(job):
    """Tokenise lines [start, end) of ``path`` into ``out``.ids (tokeniser ids, EOS as
    ``eos_code``) and ``out``.sizes (int32, EOS included); returns (lines, id counts)."""
    path, start, end, out, eos_code = job
    dtype = part_dtype(eos_code)
    tok = _TOKENIZER
    counts = np.zeros(eos_code + 1, dtype=np.int64)
    n_lines = 0
    try:
        with open(out + ".ids", "wb") as fi, open(out + ".sizes", "wb") as fs:
            for batch in read_lines(path, start, end):
                ids = tok.encode(batch)
                lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
                body = np.fromiter(chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum()))
                flat = np.insert(body, np.cumsum(lengths), eos_code)  # EOS after every line
                sizes = (lengths + 1).astype(np.int32)
                counts += np.bincount(flat, minlength=eos_code + 1)
                fi.write(flat.tobytes())
                fs.write(sizes.tobytes())
                n_lines += len(batch)
    except OSError as e:
        raise PrepareError(f"cannot write {os.path.dirname(out)}: {e.strerror}") from None
    return n_lines, counts


# ------------------------------------------------------------------ the dictionary
def dictionary_from_counts(pieces, counts, eos_code):
    """fairseq-preprocess's dictionary of these piece counts (``--thresholdsrc 0``)."""
    from fairseq.data import Dictionary

    d = Dictionary()
    for i in np.flatnonzero(counts[:eos_code]):
        d.add_symbol(pieces[i], int(counts[i]))
    # a row for the sentence separator even where the text has none, so that a model pre-trained
    # on it can be fine-tuned on multi-sentence targets (count 0: after every piece of the text)
    d.add_symbol(SENTENCE_SEP, 0)
    d.add_symbol(d.eos_word, int(counts[eos_code]))
    d.finalize(threshold=0, nwords=-1, padding_factor=8)
    return d


def lookup_table(pieces, dictionary):
    """tokeniser id -> dictionary row (pieces the dictionary lacks -> <unk>, the sentence separator
    -> the dictionary's separator row); EOS last."""
    sep = separator_symbol(dictionary.symbols) or SENTENCE_SEP
    table = np.array([dictionary.index(sep if p == SENTENCE_SEP else p) for p in pieces] + [dictionary.eos()],
                     dtype=np.int64)
    return table


# ------------------------------------------------------------------ writing the data-bin
def write_databin(parts, table, prefix, n_symbols):
    """Concatenate the parts (in order) into ``prefix``.bin/.idx, ids mapped through ``table``,
    deleting each part once copied (the disk holds the data-bin plus one part, not two copies).
    Returns (lines, tokens, unk count)."""
    dtype = np.dtype(np.uint16 if n_symbols < 65500 else np.uint32)
    unk = 3  # fairseq's Dictionary: <s> <pad> </s> <unk>
    tokens = unks = lines = 0
    with open(prefix + ".bin", "wb") as out:
        for part in parts:
            dtype_in = part_dtype(len(table) - 1)
            ids = np.memmap(part + ".ids", dtype=dtype_in, mode="r") if os.path.getsize(part + ".ids") else []
            for s in range(0, len(ids), 1 << 24):
                rows = table[ids[s:s + (1 << 24)]]
                unks += int(np.count_nonzero(rows == unk))
                out.write(rows.astype(dtype).tobytes())
            tokens += len(ids)
            del ids
            os.remove(part + ".ids")
    lines = write_index(prefix + ".idx", [p + ".sizes" for p in parts], dtype)
    for part in parts:
        os.remove(part + ".sizes")
    return lines, tokens, unks


def write_index(path, sizes_files, dtype):
    """fairseq's mmap ``.idx`` for items whose int32 sizes are in ``sizes_files`` (in order):
    header, sizes, byte pointers; streamed file by file. Returns the number of items."""
    lines = sum(os.path.getsize(f) // 4 for f in sizes_files)
    with open(path, "wb") as idx:
        idx.write(_IDX_MAGIC + struct.pack("<Q", 1) + struct.pack("<B", _DTYPE_CODE[np.dtype(dtype)]))
        idx.write(struct.pack("<Q", lines))
        for f in sizes_files:
            idx.write(np.fromfile(f, dtype=np.int32).tobytes())
        address = 0
        for f in sizes_files:  # pointers: a running sum of the sizes in bytes
            sizes = np.fromfile(f, dtype=np.int32).astype(np.int64) * np.dtype(dtype).itemsize
            pointers = np.cumsum(sizes) - sizes + address
            address += int(sizes.sum())
            idx.write(pointers.tobytes())
    return lines


# ------------------------------------------------------------------ the recipe
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
        part_bytes = min(PART_BYTES, max(MIN_PART_BYTES, total // (4 * self.workers)))  # >= 4 parts a worker
        for start, end in ranges:
            for s, e in part_offsets(path, start, end, part_bytes):
                jobs.append((path, s, e, os.path.join(self.tmp, f"part{self.n_parts:06d}"), self.eos_code))
                self.n_parts += 1
        counts = np.zeros(self.eos_code + 1, dtype=np.int64)
        lines, done, t0, shown = 0, 0, time.time(), time.time()
        self.text_bytes += total
        if self.workers > 1 and len(jobs) > 1:
            if self.pool is None:
                self.pool = Workers(self.workers, _init_worker, (self.spec,))
            results = self.pool.imap(encode_part, jobs)
        else:
            global _TOKENIZER
            _TOKENIZER = self.tokenizer
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


def train_sentencepiece(files, model, vocab_size, prog):
    import sentencepiece as spm

    try:
        spm.SentencePieceTrainer.train(
            input=",".join(files), model_prefix=model[: -len(".model")], vocab_size=vocab_size,
            model_type="bpe", character_coverage=1.0,
            input_sentence_size=2_000_000, shuffle_input_sentence=True,  # a sample caps memory on big corpora
            minloglevel=2,
        )
    except RuntimeError as e:
        msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        if "Vocabulary size too high" in msg:  # "... Please set it to a value <= N."
            raise PrepareError(f"--vocab-size {vocab_size} is too large for {', '.join(files)} "
                               f"(sentencepiece: {msg[msg.index('Vocabulary size too high'):]})") from None
        raise PrepareError(f"sentencepiece training on {', '.join(files)} failed: {msg}") from None


def print_stats(prep, label, lines, tokens, unks):
    share = 100.0 * unks / tokens if tokens else 0.0
    prep.say(f"  {label}: {lines:,} lines, {tokens:,} tokens, {share:.2f}% <unk>")


def prepare_corpus(a):
    """prepare_data.sh: documents -> DEST/NAME (one data-bin) or DEST/NAME/shard0..K-1."""
    train_files = a.train
    inputs = train_files + [a.valid] + [p for p in (a.spm_model, a.srcdict, a.wordpiece_vocab) if p]
    for path in inputs:
        if not os.path.isfile(path):
            raise PrepareError(f"file not found: {path}")
    if not any(_has_text(p) for p in train_files):
        raise PrepareError(f"training file has no text (only blank lines or empty): {', '.join(train_files)}")
    if not _has_text(a.valid):
        raise PrepareError(f"validation file has no text (only blank lines or empty): {a.valid}")
    if a.shards < 1:
        raise PrepareError("--shards must be at least 1")
    tmp_spm = None
    if a.wordpiece_vocab:
        spec = ("wp", os.path.abspath(a.wordpiece_vocab), {"cased": True, "uncased": False}.get(a.wordpiece_case))
    else:
        spec = ("spm", None, None)
    prep = None
    try:
        if spec[0] == "spm":
            if a.spm_model:
                spec = ("spm", os.path.abspath(a.spm_model), None)
            else:
                check_output(os.path.abspath(a.out), a.force, inputs)
                parent = os.path.dirname(os.path.abspath(a.out))
                os.makedirs(parent, exist_ok=True)  # the trainer's temp dir goes there, before Preparer makes it
                tmp_spm = tempfile.mkdtemp(prefix=".spm.", dir=parent)
                model = os.path.join(tmp_spm, "spm.model")
                print(f"prepare_data: training sentencepiece (bpe, vocab {a.vocab_size}) on {', '.join(train_files)}",
                      flush=True)
                # in a child process: the trainer's sample (up to 2M sentences, ~1 GB) is freed
                # before the workers fork, instead of staying in every process
                trainer = Workers(1)
                try:
                    trainer.call(train_sentencepiece, train_files, model, a.vocab_size, a.prog)
                finally:  # on Ctrl-C or SIGTERM too: the trainer stops at once
                    trainer.close()
                spec = ("spm", model, None)
        prep = Preparer(a.prog, a.out, spec, a.workers, a.force, inputs)
        tok = prep.tokenizer
        if spec[0] == "wp":
            prep.say(f"{'cased' if tok.cased else 'uncased'} WordPiece of {a.wordpiece_vocab}, "
                     f"{a.workers} worker(s)")
        else:
            prep.say(f"sentencepiece {a.spm_model or '(trained here)'}, {a.workers} worker(s)")
        # shards: the training text cut at document boundaries into K pieces of about equal size
        shard_ranges = shard_plan(train_files, a.shards)
        shard_parts = []
        counts = np.zeros(prep.eos_code + 1, dtype=np.int64)
        for k, ranges in enumerate(shard_ranges):
            parts = []
            for path, start, end in ranges:
                p, _, c = prep.encode(f"train{' shard %d' % k if a.shards > 1 else ''}", path, [(start, end)])
                parts += p
                counts += c
            shard_parts.append(parts)
        valid_parts, _, _ = prep.encode("valid", a.valid, [(0, os.path.getsize(a.valid))])
        pieces = tok.pieces()
        if a.srcdict:
            dictionary = load_dictionary(a.srcdict)
            if spec[0] == "wp":
                check_dict_is_vocab_cut(dictionary, tok, a.srcdict, a.wordpiece_vocab)
        elif spec[0] == "wp":
            dictionary = load_dictionary_text(tok.mapping.dict_txt())
        else:
            dictionary = dictionary_from_counts(pieces, counts, prep.eos_code)
        for reserved in ("[MASK]", "[P]"):  # a text piece spelled like the task's symbols would become them
            if dictionary.indices.get(reserved, -1) >= dictionary.nspecial:
                raise PrepareError(f"dict.txt already holds {reserved}")
        table = lookup_table(pieces, dictionary)
        built = os.path.join(prep.tmp, "out")
        os.makedirs(built)
        dirs = [built] if a.shards == 1 else [os.path.join(built, f"shard{k}") for k in range(a.shards)]
        for k, d in enumerate(dirs):
            os.makedirs(d, exist_ok=True)
            dictionary.save(os.path.join(d, "dict.txt"))
            write_tokenizer_files(spec, d)
            stats = prep.write(shard_parts[k], table, os.path.join(d, "train"), len(dictionary))
            if stats[0] == 0 or stats[1] == stats[0]:
                raise PrepareError(f"shard {k} would hold no text: use fewer --shards than {a.shards} "
                                   f"for {', '.join(train_files)}")
            print_stats(prep, f"train{' shard %d' % k if a.shards > 1 else ''}", *stats)
        print_stats(prep, "valid", *prep.write(valid_parts, table, os.path.join(dirs[0], "valid"),
                                                   len(dictionary)))
        prep.finish(built)
        prep.close()
        prep.summary()
        final = [prep.out] if a.shards == 1 else [os.path.join(prep.out, f"shard{k}") for k in range(a.shards)]
        prep.say(f"wrote {prep.out} ({len(dictionary) - dictionary.nspecial} dictionary entries"
                 f"{', %d shards' % a.shards if a.shards > 1 else ''})")
        if a.shards > 1:
            prep.say(f"train with: fairseq-train {':'.join(final)} ...")
    finally:
        if prep is not None:
            prep.close()
        if tmp_spm:
            shutil.rmtree(tmp_spm, ignore_errors=True)


def shard_plan(files, k):
    """[[(path, start, end), ...] per shard]: the files' bytes in order, as one stream, cut into
    k shards of about equal size at document boundaries (the end of a file is one)."""
    sizes = [os.path.getsize(f) for f in files]
    starts = np.cumsum([0] + sizes)
    cuts = [(0, 0)]  # (file, offset)
    for i in range(1, k):
        target = int(starts[-1]) * i // k
        j = int(np.searchsorted(starts, target, side="right")) - 1
        j = min(j, len(files) - 1)
        cuts.append(max(cuts[-1], (j, next_document_start(files[j], target - int(starts[j])))))
    cuts.append((len(files) - 1, sizes[-1]))
    shards = []
    for (fa, oa), (fb, ob) in zip(cuts, cuts[1:]):
        ranges = [(files[j], oa if j == fa else 0, ob if j == fb else sizes[j]) for j in range(fa, fb + 1)]
        shards.append([r for r in ranges if r[2] > r[1]])
    return shards


def _has_text(path):
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            if block.strip():
                return True
    return False


def load_dictionary(path):
    from fairseq.data import Dictionary

    try:
        return Dictionary.load(path)
    except (ValueError, RuntimeError, UnicodeDecodeError) as e:
        raise PrepareError(f"{path}: not a fairseq dict.txt ({str(e).splitlines()[0] if str(e) else e})") from None


def load_dictionary_text(text):
    import io

    from fairseq.data import Dictionary

    return Dictionary.load(io.StringIO(text))


def check_dict_is_vocab_cut(dictionary, tok, srcdict, vocab):
    known = set(tok.pieces())
    extra = [s for s in dictionary.symbols[dictionary.nspecial:] if s not in known and not s.startswith("madeupword")]
    if extra:
        raise PrepareError(f"{srcdict} is not the dictionary of {vocab} (e.g. {extra[0]!r} is not one of its "
                           "pieces; use the dict.txt convert_checkpoint.py wrote beside it)")


def write_tokenizer_files(spec, directory):
    from ..weights import tokenizer_files

    kind, path, cased = spec
    if kind == "spm":
        shutil.copy(path, os.path.join(directory, tokenizer_files.SENTENCEPIECE))
    else:
        shutil.copy(path, os.path.join(directory, tokenizer_files.WORDPIECE))
        if cased is not None:
            tokenizer_files.write_casing(directory, cased)


def prepare_pairs(a):
    """s2s/prepare.sh: RAW/{train,valid,test}.{source,target} -> DEST/NAME in fairseq-preprocess's
    pair layout ({split}.source-target.{source,target}.{bin,idx}, dict.{source,target}.txt),
    the pre-training dictionary on both sides."""
    from ..weights import tokenizer_files

    raw, pre = a.raw, a.pretrain_data
    if not os.path.isdir(raw):
        raise PrepareError(f"raw directory not found: {raw}")
    if not os.path.isfile(os.path.join(pre, "dict.txt")):
        raise PrepareError(f"file not found: {os.path.join(pre, 'dict.txt')} (run scripts/prepare_data.sh "
                           "or convert_checkpoint.py import)")
    try:
        tok_files = tokenizer_files.find(pre)
    except ValueError as e:
        raise PrepareError(str(e)) from None
    splits = {}
    for split in ("train", "valid", "test"):
        src, tgt = (os.path.join(raw, f"{split}.{side}") for side in ("source", "target"))
        if not (os.path.isfile(src) or os.path.isfile(tgt)):
            raise PrepareError(f"no {split} split: {src} and {tgt} are missing (train, valid and test are needed)")
        for path in (src, tgt):
            if not os.path.isfile(path):
                raise PrepareError(f"file not found: {path}")
        ns, nt = count_lines(src), count_lines(tgt)
        if ns != nt:
            raise PrepareError(f"{src} has {ns} lines but {tgt} has {nt}")
        if ns == 0 or not (_has_text(src) or _has_text(tgt)):
            raise PrepareError(f"{src} and {tgt} hold no example")
        splits[split] = (src, tgt)
    inputs = [p for pair in splits.values() for p in pair] + [os.path.join(pre, "dict.txt"), tok_files.path]
    if tok_files.kind == "sentencepiece":
        spec = ("spm", tok_files.path, None)
    else:
        spec = ("wp", tok_files.path, tok_files.cased)
    prep = Preparer(a.prog, a.out, spec, a.workers, a.force, inputs)
    try:
        tok = prep.tokenizer
        prep.say(f"{tok_files.kind} of {tok_files.path}, {a.workers} worker(s)")
        encoded, separators = {}, {}
        for split, pair in splits.items():
            for side, path in zip(("source", "target"), pair):
                parts, _, counts = prep.encode(f"{split}.{side}", path, [(0, os.path.getsize(path))])
                encoded[split, side] = parts
                separators[path] = int(counts[tok.sep_id])
        # fairseq (and torch) are imported only now, after the workers were forked: they stay small
        dictionary = load_dictionary(os.path.join(pre, "dict.txt"))
        if spec[0] == "wp":
            check_dict_is_vocab_cut(dictionary, tok, os.path.join(pre, "dict.txt"), tok_files.path)
        if any(separators.values()):
            sep = separator_symbol(dictionary.symbols)
            path = next(p for p, n in separators.items() if n)
            if sep is None:
                # a literal "[X_SEP]" in ordinary text (a docstring that names it) is no reason to stop; in
                # summaries it would be, so say it where the user sees it
                prep.say(f"note: {path} holds {SENTENCE_SEP} ({sum(separators.values()):,} in the text) but "
                         f"{os.path.join(pre, 'dict.txt')} has no row for it (neither {SENTENCE_SEP} nor a "
                         f"WordPiece [unusedN] row): it becomes <unk>; for sentence-separated summaries use a "
                         f"dictionary that has one")
            else:
                prep.say(f"sentence separator {SENTENCE_SEP}: {sum(separators.values()):,} in the text, one token "
                         f"each ({sep if sep != SENTENCE_SEP else 'its own row'})")
        table = lookup_table(tok.pieces(), dictionary)
        built = os.path.join(prep.tmp, "out")
        os.makedirs(built)
        for (split, side), parts in encoded.items():
            stats = prep.write(parts, table, os.path.join(built, f"{split}.source-target.{side}"), len(dictionary))
            print_stats(prep, f"{split}.{side}", *stats)
        for side in ("source", "target"):
            dictionary.save(os.path.join(built, f"dict.{side}.txt"))
        tokenizer_files.copy(pre, built)
        prep.finish(built)
        prep.close()
        prep.summary()
        prep.say(f"wrote {prep.out}")
    finally:
        prep.close()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prog", default="text_to_databin", help="name used in messages")
    p.add_argument("--out", required=True, help="output directory (DEST/NAME)")
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument("--workers", type=int, default=1)
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("--train", nargs="+", required=True)
    c.add_argument("--valid", required=True)
    c.add_argument("--spm-model")
    c.add_argument("--vocab-size", type=int, default=8000)
    c.add_argument("--srcdict")
    c.add_argument("--wordpiece-vocab")
    c.add_argument("--wordpiece-case", choices=["auto", "cased", "uncased"], default="auto")
    c.add_argument("--shards", type=int, default=1)
    s = sub.add_parser("pairs")
    s.add_argument("--raw", required=True)
    s.add_argument("--pretrain-data", required=True)
    a = p.parse_args(argv)
    if a.workers < 1:
        p.error("--workers must be at least 1")
    _START[0] = time.time()
    # one tokenising thread per process, --workers processes: what --workers says is what runs
    os.environ["TOKENIZERS_PARALLELISM"] = "false"

    sigterm_as_interrupt()  # the temporary directory is removed on SIGTERM as on Ctrl-C
    try:
        (prepare_corpus if a.mode == "corpus" else prepare_pairs)(a)
    except PrepareError as e:
        print(f"{a.prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{a.prog}: interrupted: nothing written", file=sys.stderr)
        return 130
    except OSError as e:
        print(f"{a.prog}: error: {e.filename or a.out}: {e.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
