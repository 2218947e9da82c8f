"""granary launch's startup module: a Python rank's progress on its heartbeat.

`launch` puts this folder first on each rank's PYTHONPATH, so Python runs this
file at start, before the user's script, which stays unchanged. It attaches to
the launcher's heartbeat board (GRANARY_HEARTBEAT=<fd or path>:<slot>, the
layout of trainer/launch/heartbeat.cc's Slot) and writes there:

- the rank's training steps: every torch.optim optimizer's step() is counted
  (the outermost call only, so a subclass calling super().step() counts once);
  `launch` judges a hung rank and `launch --tune` measures a layout by them;
- when the interpreter began to exit, so that of ranks ending together the
  launcher names the one that ended first;
- the exception that ends the script, in its error file (TORCHELASTIC_ERROR_FILE,
  as torch's @record writes it), which `launch` names in its line on the rank;
- a sign of life while the main thread moves (a thread samples where it is
  once a second), so a long evaluation without steps is not taken for a hang,
  while a rank blocked in one call (a collective, a deadlock, a stopped peer)
  stays quiet; and whether that call is inside torch (the slot's `waiting`),
  where a quiet rank may be waiting for a peer, or in the script's own code,
  where it is not: the launcher names the rank that holds the others up.

In a job of several ranks it also says, in one line on rank 0's stderr,
where rank 0 took its 20th optimizer step without joining its peers
(torch.distributed.init_process_group never called: every rank trains a
model of its own, which nothing averages, as a script written for
torch.distributed.launch does when it waits for a --local_rank argument),
where the script starts processes of its own with
torch.multiprocessing.spawn (the PyTorch DDP tutorial's way) in each rank,
and where the script gave torch more threads than the rank has CPUs.

Nothing here may break the user's program: every failure leaves it as it was.
The sitecustomize this file shadows (Debian's) runs afterwards.
"""
import os
import sys


def _attach():
    spec = os.environ.pop("GRANARY_HEARTBEAT", None)  # this process only, not what it starts
    if not spec:
        return None
    import mmap
    board, _, slot = spec.rpartition(":")
    slot = int(slot)
    fd = os.open(board, os.O_RDWR | os.O_CLOEXEC) if board.startswith("/") else int(board)
    try:
        mapping = mmap.mmap(fd, 64 * (slot + 1))
    finally:
        os.close(fd)  # the mapping keeps the board
    view = memoryview(mapping)[64 * slot:64 * (slot + 1)]
    words, halves = view.cast("q"), view.cast("i")  # Slot: beat_ns, step, waiting+pid, ended+signal, ended_ns
    halves[5] = os.getpid()
    return words, halves


def _install(words, halves):
    import functools
    import threading
    import time

    steps = [words[1]]
    taken = [0]  # by this process (a restarted rank's board slot keeps counting)
    local = threading.local()

    def beat():
        words[0] = time.monotonic_ns()  # CLOCK_MONOTONIC, as the launcher reads it

    def tick():
        steps[0] += 1
        words[1] = steps[0]
        beat()
        taken[0] += 1
        if taken[0] == 1:
            _warn_if_oversubscribed()
        if taken[0] == _ALONE_AFTER_STEPS:
            _warn_if_alone()

    def wrap_step(cls):
        if "_granary_counted" in cls.__dict__:
            return
        step = cls.step

        @functools.wraps(step)
        def counted(self, *args, **kwargs):
            depth = getattr(local, "depth", 0)
            local.depth = depth + 1
            try:
                return step(self, *args, **kwargs)
            finally:
                local.depth = depth
                if depth == 0:
                    tick()

        cls.step = counted
        cls._granary_counted = True

    def patch_optimizer(module):
        base = module.Optimizer
        original = base.__init__

        @functools.wraps(original)
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            try:
                wrap_step(type(self))
            except Exception:  # an optimizer without a step to wrap: not counted
                pass

        base.__init__ = __init__

    _after_import("torch.optim.optimizer", patch_optimizer)
    _after_import("torch.multiprocessing.spawn", _patch_spawn)

    main = threading.main_thread()
    stop = threading.Event()

    def sample():
        last = None
        while not stop.wait(1):
            frame = sys._current_frames().get(main.ident)
            if frame is None:
                return
            where = (id(frame.f_code), frame.f_lineno, frame.f_lasti, id(frame))
            if where != last:
                beat()
            last = where
            # Inside torch (a collective, DDP's backward) a quiet rank may be
            # waiting for a peer; in the script's own code it is not.
            torch = sys.modules.get("torch")
            folder = os.path.dirname(getattr(torch, "__file__", None) or "/nonexistent/")
            halves[4] = 1 if frame.f_code.co_filename.startswith(folder + os.sep) else 0

    sampler = threading.Thread(target=sample, name="granary-heartbeat", daemon=True)
    sampler.start()

    def stop_sampler():  # before the interpreter ends: no thread of ours is frozen mid-call at exit
        stop.set()
        sampler.join(timeout=2)
        # When it began to exit: of ranks that end together (one failed, its
        # peers then failed for want of it), the launcher names the first.
        words[4] = time.monotonic_ns()
        halves[6] = 1  # RankEnd kExited

    import atexit
    atexit.register(stop_sampler)
    beat()


_ALONE_AFTER_STEPS = 20
_LAUNCH_THREADS = os.environ.get("OMP_NUM_THREADS")  # launch's, read before the script can change it


def _quietly(function):
    """`function`, whose failure never reaches the user's program."""
    def run(*args):
        try:
            function(*args)
        except Exception:
            pass
    return run


def _world_if_rank_0():
    """The job's number of ranks where this is rank 0 of several; 0 otherwise."""
    world = int(os.environ.get("WORLD_SIZE") or 1)
    return world if world > 1 and os.environ.get("RANK") == "0" else 0


@_quietly
def _warn_if_alone():
    """Rank 0 of several, having trained without joining its peers, says so
    once: the job is then that many separate trainings, not one."""
    world = _world_if_rank_0()
    dist = sys.modules.get("torch.distributed")
    if not world:
        return
    if dist is not None and dist.is_initialized():
        _warn_if_another_world(dist, world)
        return
    hint = ""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    try:
        with open(script, errors="replace") as f:
            text = f.read(1 << 20)
        if "local_rank" in text or "local-rank" in text:
            hint = (" The script reads --local_rank, which torch.distributed.launch passed; launch, as torchrun, "
                    "puts it in the environment: int(os.environ['LOCAL_RANK']).")
    except (OSError, TypeError):
        pass
    print(f"launch: rank 0 took {_ALONE_AFTER_STEPS} optimizer steps without joining its {world - 1} peer(s) "
          f"(torch.distributed.init_process_group was not called): the {world} ranks each train a model of their "
          f"own, which nothing averages. Call torch.distributed.init_process_group(\"gloo\") (it reads RANK, "
          f"WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the environment) and wrap the model in "
          f"DistributedDataParallel.{hint}", file=sys.stderr, flush=True)


@_quietly
def _warn_if_oversubscribed():
    """Rank 0, at its first optimizer step, says once where the script gave
    torch more threads than launch gave the rank and than the rank has CPUs
    (torch.set_num_threads, or OMP_NUM_THREADS set by the script before it
    imported torch): the threads take turns on the CPUs, every step slower."""
    torch = sys.modules.get("torch")
    if os.environ.get("RANK") != "0" or torch is None:
        return
    threads, cpus = torch.get_num_threads(), len(os.sched_getaffinity(0))
    local = int(os.environ.get("LOCAL_WORLD_SIZE") or 1)
    if cpus * local > (os.cpu_count() or cpus):  # not pinned: the node's ranks share its CPUs
        cpus = max(1, cpus // local)
    if threads <= cpus or str(threads) == _LAUNCH_THREADS:
        return
    print(f"launch: rank 0 runs torch on {threads} threads, set by the script (torch.set_num_threads, or its own "
          f"OMP_NUM_THREADS), over the {cpus} CPU(s) the rank has: they take turns on them, and every step is "
          f"slower. launch gave each rank {_LAUNCH_THREADS}; leave the threads to it (--threads N chooses them, "
          f"--tune measures them: neither can while the script sets its own).", file=sys.stderr, flush=True)


def _warn_if_another_world(dist, world):
    """Rank 0 of several, in a process group of another size than launch's
    job (the script passed world_size= and rank= of its own to
    init_process_group, argparse's defaults 1 and 0: every rank then trains
    alone in a group of one), says so once."""
    joined = dist.get_world_size()
    if joined == world:
        return
    print(f"launch: rank 0 took {_ALONE_AFTER_STEPS} optimizer steps in a process group of {joined} rank(s) (as rank "
          f"{dist.get_rank()}), where launch started {world}: the script passed world_size= (and rank=) of its own "
          f"to init_process_group, and its groups train apart. Leave them out (env:// reads WORLD_SIZE and RANK, "
          f"which launch sets), or pass int(os.environ['WORLD_SIZE']) and int(os.environ['RANK']).",
          file=sys.stderr, flush=True)


def _patch_spawn(module):
    """torch.multiprocessing.spawn (and start_processes) say, on rank 0 of
    several, that the script starts processes of its own in every rank."""
    import functools
    said = []

    def wrap(original):
        @functools.wraps(original)
        def wrapped(*args, **kwargs):
            if not said:
                said.append(True)
                _warn_spawned(kwargs.get("nprocs", args[2] if len(args) > 2 else 1))
            return original(*args, **kwargs)
        return wrapped

    for name in ("spawn", "start_processes"):
        if callable(getattr(module, name, None)):
            setattr(module, name, wrap(getattr(module, name)))


@_quietly
def _warn_spawned(nprocs):
    world = _world_if_rank_0()
    if world:
        print(f"launch: the script starts {nprocs} processes of its own (torch.multiprocessing.spawn) in each of "
              f"launch's {world} ranks: {world * nprocs} processes where one job was meant, each group with its "
              f"own rendezvous beside launch's (a fixed MASTER_PORT then fails with 'Address already in use'). Run "
              f"it with launch --ranks 1, whose one rank spawns them on the CPUs launch gives it, or read RANK and "
              f"WORLD_SIZE from the environment instead of spawning.", file=sys.stderr, flush=True)


def _record_uncaught():
    """An exception that ends the script is written to the rank's error file
    (TORCHELASTIC_ERROR_FILE) as torch's @record writes it, unless @record
    wrote there first: `launch` names every rank's exception, not only a
    script's that is decorated."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    previous = sys.excepthook

    def hook(kind, value, trace):
        try:
            if os.stat(path).st_size == 0:
                import json
                import time
                import traceback
                # A SyntaxError's own lines begin with where it is; its one line says what it is.
                first = f"{kind.__name__}: {value}" if issubclass(kind, SyntaxError) else \
                    "".join(traceback.format_exception_only(kind, value)).strip()
                message = first + "\n" + "".join(traceback.format_tb(trace))
                with open(path, "w") as f:
                    json.dump({"message": {"message": message, "extraInfo": {
                        "py_callstack": "".join(traceback.format_exception(kind, value, trace)),
                        "timestamp": str(int(time.time()))}}}, f)
        except Exception:
            pass
        previous(kind, value, trace)

    sys.excepthook = hook


def _after_import(name, patch):
    """Calls patch(module) once `name` has been imported (now, if it already was)."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    import importlib.abc

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            import importlib.util
            spec = importlib.util.find_spec(fullname)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            execute = spec.loader.exec_module

            def exec_module(module):
                execute(module)
                try:
                    patch(module)
                except Exception:
                    pass

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


def _chain_shadowed():
    """Runs the sitecustomize this one shadows on sys.path, if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.util
    for folder in sys.path:
        if not folder or os.path.abspath(folder) == here:
            continue
        path = os.path.join(folder, "sitecustomize.py")
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_granary_shadowed_sitecustomize", path)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


try:
    _slot = _attach()
    if _slot is not None:
        _install(*_slot)
        _record_uncaught()
except Exception as _error:  # never the user's problem: the rank runs as it would without launch
    print(f"launch: rank startup module: {_error!r}; steps are not counted", file=sys.stderr)
try:
    _chain_shadowed()
except Exception:
    pass
