"""Round 11 of the hostile drill (nineteenth session): machines as containers
make them: a CPU quota and a memory limit (cgroups of the drill's own; root
only, else the cases are left out and said so), one CPU, a small /dev/shm."""
import os
import sys

from drill_cases.common import FASHION, LAUNCH, PREP, TRAIN, run, sh, wait_for_step_sh


def round11(d, w):
    """Round 11's cases."""
    db = w("r11.db")
    run([PREP, "build", FASHION, db, "--limit", "256", "--no-progress"])
    cpu_quota(d, db)
    one_cpu(d, db)
    memory_limit(d, w)
    small_dev_shm(d, db)
    save_signal(d, w, db)
    group_stop(d, w, db)


def make_cgroup(controller, name, v1, v2):
    """A cgroup `name` under v1's `controller` with `v1` files written, else
    under v2's root with `v2` files; (its folder, its cgroup.procs), or None
    where this process may not make one."""
    v1_root = f"/sys/fs/cgroup/{controller}"
    if os.path.isdir(v1_root) and os.access(v1_root, os.W_OK):
        folder, files = f"{v1_root}/{name}", v1
    else:
        try:
            with open("/sys/fs/cgroup/cgroup.subtree_control") as f:
                if controller not in f.read() or not os.access("/sys/fs/cgroup", os.W_OK):
                    return None
        except OSError:
            return None
        folder, files = f"/sys/fs/cgroup/{name}", v2
    try:
        os.makedirs(folder, exist_ok=True)
        for file, value in files.items():
            with open(os.path.join(folder, file), "w") as f:
                f.write(value)
    except OSError:
        return None
    return folder, f"{folder}/cgroup.procs"


def in_cgroup(procs, args):
    """`args` run as a process of the cgroup whose cgroup.procs is `procs`."""
    return sh(f"echo $$ > {procs} && exec " + " ".join(args))


def cpu_quota(d, db):
    """A CPU quota of 1 CPU (docker run --cpus 1) on a machine of 2 or more: planned for 1, said."""
    if len(os.sched_getaffinity(0)) < 2:
        print("drill: round 11's CPU quota case left out: it needs two CPUs", file=sys.stderr)
        return
    made = make_cgroup("cpu", f"granary-drill-cpu-{os.getpid()}", {"cpu.cfs_period_us": "100000",
                       "cpu.cfs_quota_us": "100000"}, {"cpu.max": "100000 100000"})
    if made is None:
        print("drill: round 11's CPU quota case left out: this process may not make a cgroup", file=sys.stderr)
        return
    folder, procs = made
    try:
        d.case("train under a CPU quota of 1 CPU (docker run --cpus 1): 1 rank x 1 thread, the quota said",
               in_cgroup(procs, [TRAIN, "--db", db, "--epochs", "1"]), 0, report=True,  # the layout: on stdout
               needle="1 rank x 1 thread (+1 loader worker) on 1 CPU, pinned: rank 0 CPU 0; a CPU quota (cgroup) "
                      "grants 1 CPU of the")
    finally:
        os.rmdir(folder)


def one_cpu(d, db):
    """One CPU (taskset, a 1-vCPU machine): --ranks's default fits it; a given --ranks 2 is told what fits."""
    d.case("train on 1 CPU (taskset -c 0) with --ranks's default: 1 rank, said",
           ["taskset", "-c", "0", TRAIN, "--db", db, "--epochs", "1"], 0, needle="train: 1 rank: the default")
    d.case("train on 1 CPU with --ranks 2: refused, naming --ranks 1",
           ["taskset", "-c", "0", TRAIN, "--db", db, "--ranks", "2"], 1, needle="--ranks 1 fits")


def memory_limit(d, w):
    """A rank that outgrows a memory limit (docker run -m 256m): the out-of-memory killer named."""
    made = make_cgroup("memory", f"granary-drill-memory-{os.getpid()}", {"memory.limit_in_bytes": str(256 << 20)},
                       {"memory.max": str(256 << 20), "memory.swap.max": "0"})
    if made is None:
        print("drill: round 11's memory case left out: this process may not make a cgroup", file=sys.stderr)
        return
    folder, procs = made
    script = w("r11_rank.py")
    with open(script, "w") as f:
        f.write("import os, time\nif os.environ['RANK'] == '1':\n    x = b'x' * (1 << 30)\ntime.sleep(120)\n")
    try:
        d.case("launch --ranks 2 of a script whose rank 1 outgrows a 256 MiB memory limit: the OOM killer named",
               in_cgroup(procs, [LAUNCH, "--ranks", "2", "--", "/usr/bin/python3", script]), 137,
               needle="rank 1 was killed by signal 9 (Killed): the kernel's out-of-memory killer ended it", lines=None)
    finally:
        os.rmdir(folder)


def small_dev_shm(d, db):
    """train's own mpirun on a /dev/shm too small for OpenMPI's shared memory (docker run --shm-size): said before
    any rank starts; on docker's default 64 MiB it trains."""
    if run(["unshare", "-rm", "true"])[0] != 0 or run(["sh", "-c", "command -v mpirun"])[0] != 0:
        print("drill: round 11's /dev/shm cases left out: no unshare or no mpirun", file=sys.stderr)
        return
    for size, expected, needle in (("4m", 1, "OpenMPI's shared memory for 2 ranks on this machine takes about 14 MiB"),
                                   ("64m", 0, None)):
        d.case(f"train --ranks 2 --backend mpi on a /dev/shm of {size}" + (": said, with --shm-size" if needle else
                                                                          " (docker's default): trains"),
               sh(f"unshare -rm sh -c 'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec {TRAIN} --db {db} "
                  "--ranks 2 --backend mpi --epochs 1'"), expected, needle=needle)


def save_signal(d, w, db):
    """A Slurm job's --signal=USR1@120 reaching train: the step saved, as on SIGTERM; the job's one command line
    (--resume auto) starts anew, then goes on from it when requeued."""
    ck, metrics = w("r11u.ck"), w("r11u.jsonl")
    args = f"{TRAIN} --db {db} --epochs 2 --checkpoint-dir {ck} --resume auto"
    d.case("train sent SIGUSR1 (Slurm's --signal=USR1@120) once it trains: the step saved, exit 138",
           sh(f"{args} --metrics {metrics} --log-every 1 & pid=$!; {wait_for_step_sh(metrics)}"
              f"kill -USR1 $pid; wait $pid"), 138, needle="train: stopped by SIGUSR1; the step it reached is saved in",
           lines=None)
    d.case("the same command line requeued (--resume auto) goes on from it", args.split(), 0)


def group_stop(d, w, db):
    """Ctrl-C at a terminal (SIGINT to the foreground process group; Slurm's stop reaches every process too): the
    step saved, not every rank killed by the repeat."""
    ck, metrics = w("r11g.ck"), w("r11g.jsonl")
    d.case("Ctrl-C to train's whole process group (a terminal's, or Slurm's stop to every process): the step saved",
           sh(f"setsid {TRAIN} --db {db} --epochs 2 --checkpoint-dir {ck} --metrics {metrics} --log-every 1 & "
              f"pid=$!; {wait_for_step_sh(metrics)}kill -INT -$pid; wait $pid"), 130,
           needle="train: stopped by SIGINT; the step it reached is saved in", lines=None)

