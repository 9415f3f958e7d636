"""Hands a process over to a warm process (tests/warm.py's site_env puts this folder on PYTHONPATH).

Python imports this module at every start. In an environment with PMLM_TEST_WARM_BROKER set, a
fairseq console script (fairseq-train, ...) or ``python SCRIPT.py`` of this repository, started
by anything (a recipe's bash, a driver script), asks that broker (in the tests' process) for the
warm process of its environment and hands itself over to it: its argv, environment, working
directory, and its stdin, stdout and stderr, which the forked child takes as its own. This
process stays as the command's stand-in until the child ends: a signal it gets goes on to the
child, and it ends with the child's status (killed by the same signal, if the child was). Anything
else (``python -c``, ``-m``, interpreter flags, another python) runs here as usual, as does
everything when the broker or the warm process it names is gone.
"""
import os
import sys


def _handed_over():
    """The command's warm child, started: its pid and the connection its status comes on; or None."""
    broker, argv = os.environ.get("PMLM_TEST_WARM_BROKER"), sys.argv
    if not broker or sys.orig_argv[1:] != argv or not argv or not argv[0]:
        return None
    name, repo = os.path.basename(argv[0]), os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if name.startswith("fairseq-") and os.path.dirname(os.path.abspath(argv[0])) == os.path.dirname(sys.executable):
        request = list(argv)  # a console script of this environment
    elif name.endswith(".py") and os.path.abspath(argv[0]).startswith(os.path.join(repo, "scripts") + os.sep):
        request = [sys.executable, *argv]
    else:
        return None
    import json
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as asking:
            asking.connect(broker)
            asking.send(json.dumps({"env": dict(os.environ), "cwd": os.getcwd(), "python": sys.executable}).encode())
            where = json.loads(asking.recv(1 << 16))["socket"]
    except (OSError, ValueError):
        return None
    if where is None:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(where)
        socket.send_fds(conn, [json.dumps({"argv": request, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()],
                        [0, 1, 2])
    except OSError:  # the warm process ended after the broker named it: nothing started there, so it runs here
        conn.close()
        return None
    try:
        return json.loads(conn.recv(1 << 16))["pid"], conn
    except (OSError, ValueError, KeyError):
        # handed over, no child named: it may have started there, so it must not run here a second time
        sys.stderr.write(f"warm_site: the warm process took {name} and ended without naming its child\n")
        os._exit(1)


def _stand_in(pid, conn):
    """Until the child ends: signals go on to it; then its exit status is this process's."""
    import json
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, lambda signum, _: os.kill(pid, signum))
    reply = conn.recv(1 << 16)
    rc = json.loads(reply)["rc"] if reply else 1
    if rc < 0:  # killed by a signal: so is this process, for its parent's wait
        if -rc != signal.SIGKILL:
            signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    os._exit(rc)


_child = _handed_over()
if _child:
    _stand_in(*_child)
