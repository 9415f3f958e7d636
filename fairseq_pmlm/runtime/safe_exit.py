"""Park fairseq's data-prefetch threads before the interpreter exits.

fairseq's ``BufferedIterator`` fills its queue from a daemon thread that runs the collater
(torch ops, which release the GIL). When training stops mid-epoch (``--max-update``) that
thread is still collating; a daemon thread that takes the GIL back during interpreter
finalisation is ended with ``pthread_exit``, which unwinds through torch's C++ frames and
aborts the process ("terminate called without an active exception", exit 134) after a
successful run. An ``atexit`` hook runs before finalisation: it lets each such thread finish
the batch in hand and then park on an Event, outside torch.
"""
import atexit
import queue
import threading
import time

from fairseq.data.iterators import BackgroundConsumer


def park_prefetch_threads(timeout=10.0):
    parked = []
    for thread in threading.enumerate():
        if not (isinstance(thread, BackgroundConsumer) and thread.is_alive()):
            continue
        arrived, never = threading.Event(), threading.Event()

        def park(*args, _arrived=arrived, _never=never, **kwargs):
            _arrived.set()
            _never.wait()

        thread._queue.put = park  # its next put parks instead of queueing
        try:  # a producer blocked on a full queue gets room, moves on and parks
            thread._queue.get_nowait()
        except queue.Empty:
            pass
        parked.append((thread, arrived))
    deadline = time.monotonic() + timeout
    for thread, arrived in parked:
        while thread.is_alive() and not arrived.wait(0.05) and time.monotonic() < deadline:
            pass


atexit.register(park_prefetch_threads)
