"""The warm process behind warm.py: ``python tests/warm_server.py`` (warm.py starts it).

It imports the libraries every fairseq console script imports (torch, sklearn, scipy, hydra) and
what fairseq-train's optimizer imports on its first call (torch._dynamo): ~6 s of a 2-core
machine's time, paid here once. Then, for each request (one JSON line on stdin: id, argv, cwd,
env, stdout and stderr paths, a stdin path if given), it forks a child that becomes that command's process: the
environment, working directory and output files of the request, ``sys.argv``, and the console
script's entry point called as the script calls it (for ``python SCRIPT ARGS``: the script run as
``__main__``), then Python's own end of a program (threads joined, atexit hooks, streams flushed)
and its exit status. Replies, one JSON line each on the stdout it was given: ``{"id", "pid"}``
when the child starts, ``{"id", "rc"}`` when it ends (rc < 0: killed by that signal, as
subprocess reports it). Its stdin closed (the tests' process ended): it kills what still runs
and exits.

With ``--listen-fd FD`` (a listening AF_UNIX SOCK_SEQPACKET socket, warm.py's) it also takes
commands from the Python processes that tests/warm_site/sitecustomize.py hands over: one message
(the same JSON, without output paths) carrying the process's stdin, stdout and stderr; the child
takes those three as its own, and the replies go back on that connection. The connection closed
while its child runs (the process that handed over was killed): the child is killed too.

Nothing that configures logging is imported before the fork: fairseq itself (~0.6 s more) and
the plugin (by the command's own ``--user-dir``) are imported by the child, as in a fresh process.
"""
import atexit
import json
import os
import runpy
import select
import signal
import socket
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
        for fd, path, mode in ((0, request.get("stdin"), os.O_RDONLY),
                               (1, request.get("stdout"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                               (2, request.get("stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            if path:  # else the handed-over process's own (or an empty stdin), already in place
                opened = os.open(path, mode, 0o644)
                os.dup2(opened, fd)
                os.close(opened)
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
    listener = socket.socket(fileno=int(sys.argv[2])) if sys.argv[1:2] == ["--listen-fd"] else None
    # running: child pid -> its request's id (stdin's requests) or the connection it was handed over on;
    # conns: each open connection -> the pid of its child (None before its request)
    running, conns, pending = {}, {}, b""

    def reply(message):
        os.write(replies, (json.dumps(message) + "\n").encode())

    def start(request, fds=()):
        """Fork the request's child (``fds`` its stdin, stdout and stderr if given): its pid."""
        pid = os.fork()
        if pid == 0:
            for fd in (requests, replies, *[c.fileno() for c in conns], *([listener.fileno()] if listener else [])):
                os.close(fd)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            become(request)
        for fd in fds:  # the child's now; held here too, a pipe it writes would never end
            os.close(fd)
        return pid

    def close(conn):
        del conns[conn]
        conn.close()

    while True:
        ready = select.select([requests, *conns, *([listener] if listener else [])], [], [], 0.05)[0]
        if requests in ready:
            data = os.read(requests, 1 << 16)
            if not data:  # the tests ended
                break
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = start(request)
                running[pid] = request["id"]
                reply({"id": request["id"], "pid": pid})
        if listener in ready:
            conns[listener.accept()[0]] = None
        for conn in [c for c in ready if c in conns]:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            if message and conns[conn] is None:  # a handed-over process's request
                pid = conns[conn] = start(json.loads(message), fds)
                running[pid] = conn
                conn.send(json.dumps({"pid": pid}).encode())
            elif not message:  # it ended; before its child: it was killed, and so is its child
                if conns[conn] in running:
                    os.kill(conns[conn], signal.SIGKILL)
                    running[conns[conn]] = None
                close(conn)
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            whom = running.pop(pid)
            if isinstance(whom, socket.socket):
                try:
                    whom.send(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode())
                except OSError:  # it is ending itself
                    pass
                close(whom)
            elif whom is not None:
                reply({"id": whom, "rc": os.waitstatus_to_exitcode(status)})
    for pid in running:
        os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
