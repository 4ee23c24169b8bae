"""Command-line runs (`python SCRIPT ARGS`, `python -m MODULE ARGS`) without paying for the libraries' import each
time: a server process imports torch, transformers, datasets, pandas, matplotlib and the project once, runs nothing,
and forks each command from there. Two users: the tests' command-line runs (`run`, a drop-in for subprocess.run),
and the Ray backend's units (gcframe.raygrid: each Ray worker keeps a server and forks its units from it, `Server`).

A forked run is a process of its own, as `subprocess.run` starts one: its own environment (os.environ set to the
one asked for), working folder, arguments (sys.argv, sys.path[0] the script's folder as `python SCRIPT` sets it, or
the working folder for `-m`), standard streams (stdin empty; stdout and stderr to files) and exit status (an uncaught
exception prints its traceback and exits 1; SystemExit's code as the interpreter takes it). On Linux it gets SIGTERM
when its server dies (PR_SET_PDEATHSIG), and the server when the process that started it dies, so a killed parent
stops the run as Ctrl-C does. What it does not repeat is the import: ~6 s of one core (torch and transformers'
Llama) per run of the tiny model's compare.py, most of the time such a run takes. Two things differ from a fresh
interpreter, and `run` keeps them apart:

- what a library reads from the environment while it is imported (huggingface_hub's HF_HUB_OFFLINE and HOME,
  OpenMP's OMP_NUM_THREADS): runs whose environments differ in any variable of IMPORT_READ fork from servers of
  their own;
- the modules already imported: a command that is not `python SCRIPT ...` or `python -m MODULE ...`, or a test that
  is about what a command imports, uses subprocess.run itself.

Each process (an xdist worker, a Ray worker) starts a server per such environment on first use; a run asked for
while that server serves another thread's starts a fresh interpreter. `stop_all` stops them (tests/conftest.py,
before the session looks for processes left running). tests/test_forkserver.py checks a forked run against a fresh
one.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_READ = ("OMP_", "MKL_", "KMP_", "HF_", "HUGGINGFACE", "TRANSFORMERS", "TORCH", "PYTORCH", "CUDA", "TOKENIZERS",
               "PYTHON", "MPL", "XDG_", "HOME", "LANG", "LC_", "TMPDIR")
"""Prefixes of the environment variables a library may read while it is imported; every other variable (the project
reads its own, GCFRAME_*, only when its code runs) a forked run sets to its own value."""
PRELOAD = ("torch", "transformers", "transformers.models.llama.modeling_llama", "datasets", "pandas", "accelerate",
           "matplotlib", "matplotlib.pyplot", "seaborn", "scipy.optimize", "yaml", "gcframe.trainer")
"""What the server imports before it forks anything: the libraries every run of the tiny model imports, and the
library's module that imports them. A driver adds its own modules (their code is the checkout's: the server runs
from ROOT with its sys.path): `Server(preload=...)`, or for `run`, `also_import` (tests/conftest.py: the methods,
the report, compare.py)."""
_also: tuple[str, ...] = ()  # the modules `run`'s servers import beside PRELOAD (also_import)

SERVER = r"""
import gc, importlib, json, os, runpy, sys, threading, traceback
from gcframe.forkserver import die_with_parent
if json.loads(sys.argv[2]):
    die_with_parent()
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
gc.collect()
gc.freeze()  # the imports live as long as the server: a forked run's collections walk only its own objects
protocol = os.fdopen(os.dup(1), "w", buffering=1)  # requests on stdin, answers here; fd 1 becomes each run's stdout
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # the server's own prints (a library's, while imported) go nowhere
ready = {"ready": threading.active_count() == 1}  # forking a process with other threads running is not safe
protocol.write(json.dumps(ready) + "\n")


def child(req):
    die_with_parent()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    mode = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if req.get("append") else os.O_TRUNC)
    for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
        os.dup2(os.open(path, mode, 0o644), fd)
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    code = 0
    try:
        if req["module"]:
            sys.argv = ["-m", *req["args"]]
            sys.path[0] = req["cwd"]
            sys.modules.pop(req["module"], None)  # run afresh as __main__, as `python -m` does (runpy warns otherwise)
            runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
        else:
            sys.argv = [req["script"], *req["args"]]
            sys.path[0] = os.path.dirname(os.path.abspath(req["script"]))
            runpy.run_path(req["script"], run_name="__main__")
    except SystemExit as e:
        code = e.code
    except BaseException:
        traceback.print_exc()
        code = 1
    raise SystemExit(code)  # out of the server's loop: the interpreter's own exit (atexit, flushed streams)


if ready["ready"]:
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush(), sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            protocol.close()
            child(req)
        protocol.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        protocol.write(json.dumps({"pid": pid, "code": os.waitstatus_to_exitcode(status)}) + "\n")
"""



def die_with_parent() -> None:
    """Linux: this process gets SIGTERM when its parent dies, even by SIGKILL (prctl PR_SET_PDEATHSIG), and stops as
    on Ctrl-C: a forked run when its server dies, a tied server when the process that started it dies."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux
        pass


_servers: dict = {}
_lock = threading.Lock()  # a test may run commands from several threads: each server serves one at a time


def also_import(*modules: str) -> None:
    """Name modules of the driver's that every server `run` starts from now on imports too, beside PRELOAD."""
    global _also
    _also = tuple(dict.fromkeys([*_also, *modules]))


class Server:
    """One server process and the environment it was started with (`tied`: it gets SIGTERM when this process dies;
    `preload`: the driver's modules it imports beside PRELOAD)."""

    def __init__(self, env: dict, tied: bool = False, preload: tuple = ()):
        self.env, self.preload = env, PRELOAD + tuple(preload)
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(self.preload), json.dumps(tied)],
                                     cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.ok = json.loads(self.proc.stdout.readline() or '{"ready": false}')["ready"]
        self.busy = threading.Lock()

    def spawn(self, cmd: list, cwd, env: dict, stdout, stderr, append: bool = False) -> int:
        """Fork `cmd` ([sys.executable, SCRIPT, *args] or [sys.executable, "-m", MODULE, *args]: `parse`) with its
        streams to these files (appended to, or truncated): its pid. `wait` then gives its exit status."""
        script, module, args = parse(cmd)
        self.proc.stdin.write(json.dumps({"script": script, "module": module, "args": args, "env": env,
                                          "cwd": str(Path(cwd).resolve()), "stdout": str(stdout),
                                          "stderr": str(stderr), "append": append}) + "\n")
        self.proc.stdin.flush()
        return self.answer(None)["pid"]

    def wait(self, deadline: float | None = None) -> int | None:
        """The forked run's exit status (negative: the signal that ended it), or None at the deadline."""
        done = self.answer(deadline)
        return None if done is None else done["code"]

    def answer(self, deadline: float | None) -> dict | None:
        """The server's next line, or None at the deadline (monotonic seconds)."""
        fd = self.proc.stdout
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if select.select([fd], [], [], wait)[0]:
                line = fd.readline()
                if not line:
                    raise RuntimeError("the fork server ended")
                return json.loads(line)
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _fixed(env: dict) -> tuple:
    """The part of an environment a forked run must share with its server."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(IMPORT_READ)))


def _server(env: dict) -> Server | None:
    """An idle server for this environment, its `busy` lock held; None where it cannot start or is serving another
    thread's run (that command then starts a fresh interpreter)."""
    with _lock:
        key = _fixed(env)
        if key not in _servers:
            _servers[key] = Server(env, preload=_also)
        server = _servers[key]
        if server.ok and server.proc.poll() is None and server.busy.acquire(blocking=False):
            return server
        return None


def parse(cmd: list) -> tuple[str | None, str | None, list[str]] | None:
    """(script, module, args) of [sys.executable, SCRIPT, *args] or [sys.executable, "-m", MODULE, *args]; None for
    any other command."""
    cmd = [str(c) for c in cmd]
    if len(cmd) < 2 or cmd[0] != sys.executable:
        return None
    if cmd[1] == "-m" and len(cmd) >= 3:
        return None, cmd[2], cmd[3:]
    if cmd[1].startswith("-") or not cmd[1].endswith(".py"):
        return None
    return cmd[1], None, cmd[2:]


def run(cmd: list, *, cwd=None, env: dict | None = None, timeout: float | None = None, capture_output: bool = True,
        text: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True, cwd=, env=, timeout=) for a Python script or module,
    forked from a server that has the libraries imported (module docstring); any other call is subprocess.run's."""
    env = dict(os.environ if env is None else env)
    parsed = parse(cmd)
    server = _server(env) if parsed and capture_output and text and not kwargs else None
    if server is None:
        return subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, capture_output=capture_output, text=text,
                              **kwargs)
    try:
        with tempfile.TemporaryDirectory(prefix="forkrun-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            pid = server.spawn(cmd, cwd or os.getcwd(), env, out, err)
            code = server.wait(None if timeout is None else time.monotonic() + timeout)
            if code is None:  # past the timeout: killed, as subprocess.run kills its child
                os.kill(pid, signal.SIGKILL)
                server.wait()
                raise subprocess.TimeoutExpired(cmd, timeout, out.read_text(errors="replace"),
                                                err.read_text(errors="replace"))
            return subprocess.CompletedProcess([str(c) for c in cmd], code, out.read_text(errors="replace"),
                                               err.read_text(errors="replace"))
    finally:
        server.busy.release()


def stop_all() -> None:
    """Stop every server this process started (their runs have all ended: `run` waits for each)."""
    for server in _servers.values():
        server.stop()
    _servers.clear()
