"""The warm process behind warm.py: ``python tests/warm_server.py`` (warm.py starts it).

It imports the libraries every fairseq console script imports (torch, sklearn, scipy, hydra) and
what fairseq-train's optimizer imports on its first call (torch._dynamo): ~6 s of a 2-core
machine's time, paid here once. Then, for each request (one JSON line on stdin: id, argv, cwd,
env, stdout and stderr paths), it forks a child that becomes that command's process: the
environment, working directory and output files of the request, ``sys.argv``, and the console
script's entry point called as the script calls it (for ``python SCRIPT ARGS``: the script run as
``__main__``), then Python's own end of a program (threads joined, atexit hooks, streams flushed)
and its exit status. Replies, one JSON line each on the stdout it was given: ``{"id", "pid"}``
when the child starts, ``{"id", "rc"}`` when it ends (rc < 0: killed by that signal, as
subprocess reports it). Its stdin closed (the tests' process ended): it kills what still runs
and exits.

Nothing that configures logging is imported before the fork: fairseq itself (~0.6 s more) and
the plugin (by the command's own ``--user-dir``) are imported by the child, as in a fresh process.
"""
import atexit
import json
import os
import runpy
import select
import signal
import sys
import threading
from importlib.metadata import entry_points

# the libraries fairseq imports (~4 s of the ~4.6 s of importing it) and torch._dynamo, which
# torch.optim.Optimizer's first call imports (~2 s); not fairseq itself, whose import configures
# logging unless the console script did first (fairseq_cli/train.py does, generate.py does not)
import hydra  # noqa: F401
import omegaconf  # noqa: F401
import scipy.stats  # noqa: F401
import sklearn.metrics  # noqa: F401
import torch  # noqa: F401
import torch._dynamo  # noqa: F401


def exit_status(code):
    """What ``sys.exit(code)`` makes the process's status: None 0, an int itself, else 1
    (after printing it, as Python does)."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


def become(request):
    """In the forked child: run the request's command as its own process would; never returns."""
    rc = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        exe = request["argv"][0]
        if exe == sys.executable:  # python SCRIPT ARGS
            sys.argv = list(request["argv"][1:])
            sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # the script's directory, as python's
            runpy.run_path(sys.argv[0], run_name="__main__")
            rc = 0
        else:  # a console script
            sys.argv = list(request["argv"])
            sys.path[0] = os.path.dirname(exe)
            (entry,) = entry_points(group="console_scripts", name=os.path.basename(exe))
            rc = exit_status(entry.load()())
    except SystemExit as e:
        rc = exit_status(e.code)
    except BaseException:
        try:  # an uncaught exception: the hook (the plugin's may end on one line, status 2), then 1
            sys.excepthook(*sys.exc_info())
        except SystemExit as e:
            rc = exit_status(e.code)
    try:  # the end of a Python program: non-daemon threads, then the atexit hooks
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(rc)


def main():
    requests, replies = os.dup(0), os.dup(1)
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # a child's stdin is empty, and nothing of this process's lands in its output
        os.dup2(quiet, fd)
    running, pending = {}, b""

    def reply(message):
        os.write(replies, (json.dumps(message) + "\n").encode())

    while True:
        if select.select([requests], [], [], 0.05)[0]:
            data = os.read(requests, 1 << 16)
            if not data:
                break
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    os.close(requests)
                    os.close(replies)
                    become(request)
                running[pid] = request["id"]
                reply({"id": request["id"], "pid": pid})
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            reply({"id": running.pop(pid), "rc": os.waitstatus_to_exitcode(status)})
    for pid in running:
        os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
