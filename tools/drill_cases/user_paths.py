"""Round 4 of hostile input: the paths real users arrive by. Image folders as people keep them,
train under the user's own mpirun, a stopped mpirun, lost output, the Python package inside DataLoader."""
import json
import os
import shutil
import textwrap

from drill_cases.common import FASHION, PREP, ROOT, TRAIN, image_folder, run, sh, wait_for_step_sh, wait_until_none_sh

MPIRUN = ["mpirun"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def db_count(db):
    with open(os.path.join(db, "manifest.json")) as f:
        return sum(s["count"] for s in json.load(f)["splits"])


def hostile_round4(d, w):
    """Round 4: folders, tables, mpirun, signals to train's own mpirun, Python, tools."""
    round4_folders(d, w)
    round4_tables(d, w)
    if shutil.which("mpirun"):
        round4_mpirun(d, w)
        round4_mpirun_ends(d, w)
    round4_python(d, w)
    round4_tools(d, w)


def round4_folders(d, w):
    """Image folders: which top folders are classes, what is skipped."""
    raw = w("r4", "vehicles")
    image_folder(raw, classes=("bus", "car"), per_class=6)
    image_folder(os.path.join(raw, "train"), classes=("steam", "electric"), per_class=1)
    def classes(db):
        def check():
            with open(os.path.join(db, "manifest.json")) as f:
                m = json.load(f)
            count = sum(s["count"] for s in m["splits"])
            return "" if m["class_names"] == ["bus", "car", "train"] and count == 14 else \
                f"classes {m['class_names']}, {count} samples"
        return check
    d.case("raw/{bus,car,train/{steam,electric}}: three classes, 14 images",
           [PREP, "build", raw, w("r4v.db"), "--size", "8", "--no-progress"], 0, check=classes(w("r4v.db")))
    d.case("the same with --layout splits", [PREP, "build", raw, w("r4s.db"), "--size", "8", "--layout",
           "splits"], 1, needle="bus/, car/ beside train/ would be left out")
    amb = w("r4", "ambiguous")
    image_folder(os.path.join(amb, "train"), classes=("steam",), per_class=2)
    image_folder(os.path.join(amb, "test"), classes=("diesel",), per_class=2)
    d.case("train/steam and test/diesel: ambiguous", [PREP, "build", amb, w("r4a.db"), "--size", "8"], 1,
           needle="read as splits")
    kept = w("r4", "kept")
    image_folder(kept, classes=("a", "b"), per_class=3)
    with open(os.path.join(kept, "a", "._0.jpg"), "wb") as f:
        f.write(b"\x00\x05\x16\x07 AppleDouble")
    os.makedirs(os.path.join(kept, ".git", "objects"))
    run([PREP, "build", kept, os.path.join(kept, "my.db"), "--size", "8", "--no-progress"])
    d.case("._0.jpg, .git/ and a db inside RAW: skipped, noted, 6 images",
           [PREP, "build", kept, os.path.join(kept, "my2.db"), "--size", "8", "--no-progress"], 0,
           check=lambda: "" if db_count(os.path.join(kept, "my2.db")) == 6 else "not 6 samples")


def round4_tables(d, w):
    """CSV and IDX files as people keep them; a db path with a trailing slash."""
    os.makedirs(w("r4t"))
    with open(w("r4t", "floats.csv"), "w") as f:
        f.write("x,y,target\n" + "".join(f"{i},{i % 3},{i % 12}.0\n" for i in range(240)))
    d.case("labels 0.0 .. 11.0 (pandas' integers): class 10 is 10.0",
           [PREP, "build", w("r4t", "floats.csv"), w("r4f.db"), "--label", "target", "--no-progress"], 0,
           check=lambda: "" if class_names(w("r4f.db"))[10] == "10" else f"classes {class_names(w('r4f.db'))}")
    with open(w("r4t", "missing.csv"), "w") as f:
        f.write("a,b,target\n" + "".join(f"{i % 17},{'NA' if i % 4 == 0 else i % 5},{(i % 17) % 2}\n"
                                         for i in range(400)))
    run([PREP, "build", w("r4t", "missing.csv"), w("r4n.db"), "--label", "target", "--missing", "nan",
         "--val-fraction", "0.2", "--no-progress"])
    d.case("--missing nan, then train: features standardised over the values present",
           [TRAIN, "--db", w("r4n.db"), "--ranks", "1", "--epochs", "3", "--batch-size", "32"], 0)
    with open(w("r4t", "semi.csv"), "w") as f:
        f.write("a;b;target\n1;2;0\n")
    d.case("a ';'-separated table", [PREP, "build", w("r4t", "semi.csv"), w("r4s.db"), "--label",
           "target"], 1, needle="the header is one column holding ';'")
    with open(w("r4t", "PLAIN.CSV"), "w") as f:
        f.write("a,target\n1,0\n2,1\n")
    d.case("PLAIN.CSV is a table", [PREP, "build", w("r4t", "PLAIN.CSV"), w("r4p.db"), "--label", "target",
           "--no-progress"], 0)
    idx = w("r4t", "idx")
    os.makedirs(idx)
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        shutil.copy(os.path.join(FASHION, name), idx)
    with open(os.path.join(idx, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(bytes([0, 0, 8, 1, 0, 0, 0, 1, 3]))
    d.case("train-labels-idx1-ubyte and a different .gz", [PREP, "build", idx, w("r4i.db")], 1,
           needle="are there, and they differ")
    os.makedirs(w("r4out"))
    d.case("a db path with a trailing slash", [PREP, "build", FASHION, w("r4out", "new.db") + "/",
           "--limit", "100", "--no-progress"], 0)


def class_names(db):
    with open(os.path.join(db, "manifest.json")) as f:
        return json.load(f)["class_names"]


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
            ("SEGV", f"'^{TRAIN} .*{db}.* [-]-rank 1$'", 139, "rank 1 was killed by signal 11")):
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


def round4_python(d, w):
    """A db rebuilt under a Dataset's workers; two iterators of one Loader; drop_last."""
    db = w("r4p.db")
    run([PREP, "build", FASHION, db, "--limit", "2000", "--no-progress"])
    script = textwrap.dedent(f"""
        import subprocess, sys, granary, torch.utils.data as tud
        loader = tud.DataLoader(granary.Dataset({db!r}, as_tuple=True), batch_size=500, num_workers=2)
        sum(int(y.sum()) for _, y in loader)
        subprocess.run([{PREP!r}, "build", {FASHION!r}, {db!r}, "--limit", "1999", "--force", "--no-progress"],
                       check=True, capture_output=True)
        try:
            sum(int(y.sum()) for _, y in loader)
        except Exception as e:
            sys.exit(str(e).splitlines()[-1])
    """)
    d.case("prep build --force under a DataLoader(granary.Dataset) between epochs",
           ["/usr/bin/python3", "-c", script], 1, needle="the db was replaced")
    script = textwrap.dedent(f"""
        import sys, granary
        L = granary.Loader({db!r}, batch_size=100, threads=1)
        try:
            n = sum(len(a[1]) + len(b[1]) for a, b in zip(iter(L), iter(L)))
        except granary.FailedPreconditionError as e:
            sys.exit(str(e))
        print(n)
    """)
    d.case("zip(iter(L), iter(L)) over one granary.Loader", ["/usr/bin/python3", "-c", script], 1,
           needle="another iterator over this Loader was started")
    script = textwrap.dedent(f"""
        import sys, granary
        sizes = [len(y) for _, y in granary.Loader({db!r}, batch_size=999, threads=1, drop_last=True)]
        sys.exit(0 if sizes == [999, 999] else f"batches {{sizes}}")  # not the short [1]
    """)
    d.case("Loader(drop_last=True) on 1,999 samples, batch 999: DataLoader's meaning",
           ["/usr/bin/python3", "-c", script], 0)


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
