"""The data-bin engine's worker processes, and the job each runs: ``encode_part`` tokenises the
lines of one part of an input into a part file of tokeniser ids (plus the lines' sizes), which
``writer.write_databin`` later maps to dictionary rows. With one worker the parent runs the jobs
itself (``set_tokenizer``: the tokeniser ``encode_part`` uses in this process)."""
import signal
from itertools import chain
from multiprocessing import get_context
from multiprocessing.connection import wait

import numpy as np

from ...text.token_ids import make_tokenizer
from . import PrepareError
from .reading import read_lines

_TOKENIZER = None


def _default_signals():
    """In a child process: Ctrl-C is the parent's to handle, and the parent's SIGTERM (its
    ``terminate()``) ends the child at once, even inside a long C++ call."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def set_tokenizer(tokenizer):
    """The tokeniser ``encode_part`` uses in this process."""
    global _TOKENIZER
    _TOKENIZER = tokenizer


def init_worker(spec):
    set_tokenizer(make_tokenizer(spec))


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
    except OSError as e:  # named (the parent shows a scratch file as the run's output, one_line_exit)
        raise OSError(e.errno, e.strerror, e.filename or out + ".ids") from None
    return n_lines, counts
