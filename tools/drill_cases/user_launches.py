"""Round 4 of hostile input, launches: train under the user's own mpirun and under its own, signals to
mpirun, to the launcher and during a checkpoint, job environments that contradict each other; the tools."""
import os
import shutil
import textwrap

from drill_cases.common import FASHION, PREP, ROOT, TRAIN, run, sh, wait_for_step_sh, wait_until_none_sh

MPIRUN = ["mpirun"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def round4_launches(d, w):
    """train's launches: under mpirun (when OpenMPI is installed), and stop signals."""
    if shutil.which("mpirun"):
        round4_mpirun(d, w)
        round4_mpirun_ends(d, w)
        round4_job_conflicts(d, w)
    if shutil.which("sinfo") and run(["sinfo", "-h", "-t", "idle"])[0] == 0:
        round4_srun(d, w)
    round4_stops(d, w)


def round4_srun(d, w):
    """Under a Slurm that answers here (srun with its default MpiDefault, no PMI): one job of srun's tasks."""
    db = w("r4s.db")
    run([PREP, "build", FASHION, db, "--limit", "2000", "--no-progress"])
    train = [TRAIN, "--db", db, "--epochs", "1"]
    one_job = ("n=$(grep -c '^epoch 1/1' {out}); "
               "[ \"$n\" = 1 ] || {{ echo \"$n epoch lines: not one job\" >&2; exit 9; }}")
    out = w("r4s.out")
    d.case("srun -n 2 train (no PMI): one job over Gloo",
           sh(" ".join(["srun", "-n", "2"] + train) + f" > {out} 2>/dev/null && " + one_job.format(out=out)), 0)
    d.case("srun -n 2 train --backend mpi (no PMI)", ["srun", "-n", "2"] + train + ["--backend", "mpi"], 1,
           needle="start them with srun --mpi=pmix", lines=None)
    launch = os.path.join(os.path.dirname(TRAIN), "launch")
    d.case("srun -n 2 launch -- sh (one rank per task)",
           sh(f"srun -n 2 {launch} -- /bin/sh -c 'echo rank $RANK of $WORLD_SIZE' 2>/dev/null | "
              "sed 's/^\\[rank [0-9]*\\] //' | sort | tr '\\n' ' ' | grep -qx 'rank 0 of 2 rank 1 of 2 '"), 0)


def round4_mpirun(d, w):
    """train under the user's mpirun, and train's own mpirun stopped or its stdout lost."""
    db = w("r4m.db")
    run([PREP, "build", FASHION, db, "--limit", "2000", "--no-progress"])
    train = [TRAIN, "--db", db, "--epochs", "1"]
    d.case("mpirun -np 2 train --backend mpi (OpenMPI's default binding)",
           MPIRUN + ["-np", "2"] + train + ["--backend", "mpi"], 0)
    d.case("mpirun -np 2 -H localhost:2 train --backend mpi", MPIRUN + ["-np", "2", "-H", "localhost:2"] +
           train + ["--backend", "mpi"], 0)
    for flags, needle in ((["--backend", "gloo"], "--backend gloo under mpirun"),
                          (["--ranks", "1"], "--ranks 1: mpirun's job says 2"),
                          (["--tune"], "--tune under mpirun"),
                          (["--threads", "2"], "mpirun bound this rank to CPU")):
        d.case(f"mpirun -np 2 train {' '.join(flags)}", MPIRUN + ["-np", "2"] + train + flags, 1,
               needle=needle, lines=None)
    d.case("RANK=5 WORLD_SIZE=2 (torchrun's, not fitting)",
           sh("RANK=5 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 " +
              " ".join(train)), 1, needle="do not fit together")
    d.case("--backend mpi --nnodes 2 without mpirun", train + ["--backend", "mpi", "--nnodes", "2"], 1,
           needle="train starts MPI jobs on this machine only")
    d.case("--backend mpi > /dev/full", sh(" ".join(train + ["--backend", "mpi"]) + " > /dev/full"), 1,
           needle="stdout: write failed: No space left on device")
    metrics = w("r4m.jsonl")
    script = (" ".join(train[:-1] + ["1000", "--backend", "mpi", "--timeout", "5", "--log-every", "1", "--metrics",
                                     metrics]) + " >/dev/null & L=$!; " +
              wait_for_step_sh(metrics) +
              f"pkill -STOP -f '^[^ ]*mpiexec .*{db}'; wait $L; code=$?; " +
              wait_until_none_sh(f"'^([^ ]*mpiexec|{TRAIN}) .*{db}'") + "left=$n; "
              "[ -e /dev/shm/granary-mpi.$L ] && echo 'shared memory left' >&2; "
              "[ \"$left\" = 0 ] || echo \"$left processes left\" >&2; exit $code")
    d.case("train's own mpirun SIGSTOPped mid-epoch (--timeout 5)", sh(script), 1,
           needle="has been stopped for")
    ranks = f"'^{TRAIN} .*{db}'"
    metrics = w("r4u.jsonl")  # a fresh file: the wait sees this run's first step
    script = (" ".join(MPIRUN + ["-np", "2"] + train[:-1] + ["1000", "--backend", "mpi", "--timeout", "5",
                                                             "--log-every", "1", "--metrics", metrics]) +
              " >/dev/null & L=$!; " + wait_for_step_sh(metrics) +
              f"for p in $(pgrep -f {ranks}); do tr '\\0' '\\n' < /proc/$p/environ | "
              "grep -q '^OMPI_COMM_WORLD_RANK=1$' && kill -STOP $p; done; wait $L; code=$?; " +
              wait_until_none_sh(ranks) + "left=$n; "
              "ls /dev/shm | grep -q '^granary-peers' && echo 'a peer board left' >&2; "
              "[ \"$left\" = 0 ] || echo \"$left processes left\" >&2; exit $code")
    # rank 0 names rank 1 and ends it as it exits (no OpenMPI "Read -1" from a resumed rank 1): mpirun exits 137
    d.case("the user's mpirun, rank 1 SIGSTOPped mid-epoch (--timeout 5)", sh(script), 137,
           needle="ends rank 1 with SIGKILL", lines=None)


def round4_mpirun_ends(d, w):
    """What ended a run over train's own mpirun; no ssh; a stray GRANARY_HEARTBEAT."""
    db = w("r4m.db")
    metrics = w("r4e.jsonl")
    for signal, target, status, needle in (
            ("KILL", f"'^[^ ]*mpiexec .*{db}'", 137, "its ranks end with it"),
            ("TERM", f"'^[^ ]*mpiexec .*{db}'", 143, "ended the job, stopping its ranks with signal 15"),
            ("TERM", f"'^{TRAIN} .*{db}.* [-]-rank 1$'", 143, "rank 1 was killed by signal 15"),
            ("SEGV", f"'^{TRAIN} .*{db}.* [-]-rank 1$'", 139, "rank 1 was killed by signal 11"),
            ("KILL", f"'^{TRAIN} .*{db}.* [-]-rank 1$'", 137, "rank 1 was killed (its process ended")):
        script = (" ".join([TRAIN, "--db", db, "--backend", "mpi", "--epochs", "1000", "--log-every", "1",
                            "--metrics", metrics]) + " >/dev/null & L=$!; " +
                  wait_for_step_sh(metrics) +
                  f"pkill -{signal} -f {target}; wait $L; code=$?; rm -f {metrics}; exit $code")
        d.case(f"SIG{signal} to {'mpiexec' if 'mpiexec' in target else 'rank 1'} of train's own mpirun",
               sh(script), status, needle=needle)
    d.case("OMPI_MCA_btl=bogus (OpenMPI fails in MPI_Init)",
           sh(f"OMPI_MCA_btl=bogus {TRAIN} --db {db} --backend mpi --epochs 1 >/dev/null"), 1,
           needle="OpenMPI", lines=None)  # its account, or the launcher's
    nossh = w("r4bin")
    os.makedirs(nossh)
    os.symlink(shutil.which("mpiexec"), os.path.join(nossh, "mpiexec"))
    d.case("no ssh on PATH, --backend mpi", sh(f"env PATH={nossh} {TRAIN} --db {db} --backend mpi "
                                                        "--epochs 1 >/dev/null"), 0)
    nompi = w("r4nompi")  # a train whose MPI plugin cannot load (as without libopenmpi3)
    os.makedirs(nompi)
    shutil.copy(TRAIN, os.path.join(nompi, "train"))
    with open(os.path.join(nompi, "libgranary_mpi.so"), "w") as f:
        f.write("not a library")
    d.case("MPI's plugin cannot load: train over Gloo", sh(f"{nompi}/train --db {db} --epochs 1 >/dev/null"), 0)
    d.case("MPI's plugin cannot load: --backend mpi", [os.path.join(nompi, "train"), "--db", db, "--epochs", "1",
                                                       "--backend", "mpi"], 1, needle="needs OpenMPI's libraries")
    d.case("GRANARY_HEARTBEAT=garbage:0 in the environment",
           sh(f"GRANARY_HEARTBEAT=garbage:0 {TRAIN} --db {db} --epochs 1 >/dev/null"), 0)


def round4_job_conflicts(d, w):
    """Environments and flags that contradict the job mpirun started."""
    db = w("r4m.db")
    train = [TRAIN, "--db", db, "--epochs", "1"]
    d.case("mpirun -x RANK=0 -x WORLD_SIZE=2 (torchrun's and OpenMPI's variables)",
           MPIRUN + ["-x", "RANK=0", "-x", "WORLD_SIZE=2", "-np", "2"] + train, 1,
           needle="which job is this process a rank of?", lines=None)
    d.case("mpirun -np 2 train --nnodes 3 --node-rank 2", MPIRUN + ["-np", "2"] + train +
           ["--nnodes", "3", "--node-rank", "2"], 1, needle="--nnodes 3: mpirun's job says 1", lines=None)


def round4_stops(d, w):
    """Ctrl-C inside a checkpoint write; SIGHUP to the launcher (a closed terminal) over MPI."""
    db = w("r4c.db")
    run([PREP, "build", FASHION, db, "--limit", "2000", "--no-progress"])
    slow_fsync = os.path.join(os.path.dirname(os.path.dirname(TRAIN)), "tests", "libslow_fsync.so")
    ck = w("r4ck")
    script = textwrap.dedent(f"""
        import os, signal, subprocess, sys, time
        env = dict(os.environ, LD_PRELOAD={slow_fsync!r}, GRANARY_TEST_FSYNC_DELAY_MS="4000")
        run = subprocess.Popen([{TRAIN!r}, "--db", {db!r}, "--ranks", "2", "--epochs", "50", "--eval-split", "",
                                "--checkpoint-dir", {ck!r}, "--checkpoint-every", "5"],
                               env=env, stdout=subprocess.DEVNULL, start_new_session=True)
        tmp = lambda: [n for n in (os.listdir({ck!r}) if os.path.isdir({ck!r}) else []) if ".tmp-" in n]
        for _ in range(600):
            if tmp():
                break
            time.sleep(0.1)
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
        code = run.wait()
        sys.exit(f"left {{tmp()}}" if tmp() else 128 - code if code < 0 else code)
    """)
    d.case("Ctrl-C while a checkpoint is written: no .tmp-* left", ["/usr/bin/python3", "-c", script], 130,
           lines=None)
    if not shutil.which("mpirun"):
        return
    metrics = w("r4hup.jsonl")
    script = (" ".join([TRAIN, "--db", db, "--backend", "mpi", "--epochs", "1000", "--log-every", "1", "--metrics",
                        metrics]) + " >/dev/null & L=$!; " + wait_for_step_sh(metrics) +
              "kill -HUP $L; wait $L; code=$?; " + wait_until_none_sh(f"'^([^ ]*mpiexec|{TRAIN}) .*{db}'") +
              "[ \"$n\" = 0 ] || { echo \"$n processes left\" >&2; exit 9; }; "
              "[ -e /dev/shm/granary-mpi.$L ] && { echo 'shared memory left' >&2; exit 9; }; exit $code")
    d.case("SIGHUP to the launcher over MPI (a closed terminal): nothing left", sh(script), 129, lines=None)


def round4_tools(d, w):
    """The tools refuse what they cannot use and end."""
    tools = os.path.join(ROOT, "tools")
    d.case("tools/netsim --mpi --rate (no value)", [os.path.join(tools, "netsim"), "--mpi", "--rate"], 2,
           needle="--rate needs a value")
    d.case("tools/thread_cpu -- seq 1 200000", sh(f"{tools}/thread_cpu -- seq 1 200000 >/dev/null"), 0)
    d.case("tools/thread_cpu -- /nonexistent", [os.path.join(tools, "thread_cpu"), "--", "/nonexistent"], 1,
           needle="cannot run /nonexistent")
    d.case("tools/bench_comm --rounds 0", [os.path.join(tools, "bench_comm"), "--rounds", "0"], 2,
           needle="must be a whole number in 1..1000000")
    d.case("tools/bench_comm --iters 0", [os.path.join(tools, "bench_comm"), "--iters", "0"], 2,
           needle="--iters '0': must be a whole number")
    d.case("tools/thread_cpu -- a command killed by SIGKILL: 137",
           [os.path.join(tools, "thread_cpu"), "--", "sh", "-c", "kill -9 $$"], 137, lines=None)
