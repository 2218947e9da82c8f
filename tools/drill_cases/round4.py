"""Round 4 of hostile input (issue 43): the paths real users arrive by. Image folders as people keep them,
train under the user's own mpirun, a stopped mpirun, lost output, the Python package inside DataLoader."""
import json
import os
import shutil
import textwrap

from drill_cases.common import FASHION, PREP, TRAIN, image_folder, run, sh

MPIRUN = ["mpirun"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def db_count(db):
    with open(os.path.join(db, "manifest.json")) as f:
        return sum(s["count"] for s in json.load(f)["splits"])


def hostile_round4(d, w):
    """Round 4: folders, mpirun, signals to train's own mpirun, Python."""
    round4_folders(d, w)
    if shutil.which("mpirun"):
        round4_mpirun(d, w)
    round4_python(d, w)


def round4_folders(d, w):
    """Items 1, 25, 26, 28: which folders are classes, what is skipped."""
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
    d.case("item 1: raw/{bus,car,train/{steam,electric}}: three classes, 14 images",
           [PREP, "build", raw, w("r4v.db"), "--size", "8", "--no-progress"], 0, check=classes(w("r4v.db")))
    d.case("item 1: the same with --layout splits", [PREP, "build", raw, w("r4s.db"), "--size", "8", "--layout",
           "splits"], 1, needle="bus/, car/ beside train/ would be left out")
    amb = w("r4", "ambiguous")
    image_folder(os.path.join(amb, "train"), classes=("steam",), per_class=2)
    image_folder(os.path.join(amb, "test"), classes=("diesel",), per_class=2)
    d.case("item 1: train/steam and test/diesel: ambiguous", [PREP, "build", amb, w("r4a.db"), "--size", "8"], 1,
           needle="read as splits")
    kept = w("r4", "kept")
    image_folder(kept, classes=("a", "b"), per_class=3)
    with open(os.path.join(kept, "a", "._0.jpg"), "wb") as f:
        f.write(b"\x00\x05\x16\x07 AppleDouble")
    os.makedirs(os.path.join(kept, ".git", "objects"))
    run([PREP, "build", kept, os.path.join(kept, "my.db"), "--size", "8", "--no-progress"])
    d.case("items 25, 26, 28: ._0.jpg, .git/ and a db inside RAW: skipped, noted, 6 images",
           [PREP, "build", kept, os.path.join(kept, "my2.db"), "--size", "8", "--no-progress"], 0,
           check=lambda: "" if db_count(os.path.join(kept, "my2.db")) == 6 else "not 6 samples")


def round4_mpirun(d, w):
    """Items 2, 9, 10, 14, 15-19: train under the user's mpirun and train's own."""
    db = w("r4m.db")
    run([PREP, "build", FASHION, db, "--limit", "2000", "--no-progress"])
    train = [TRAIN, "--db", db, "--epochs", "1"]
    d.case("item 15: mpirun -np 2 train --backend mpi (OpenMPI's default binding)",
           MPIRUN + ["-np", "2"] + train + ["--backend", "mpi"], 0)
    d.case("item 15: mpirun -np 2 -H localhost:2 train --backend mpi", MPIRUN + ["-np", "2", "-H", "localhost:2"] +
           train + ["--backend", "mpi"], 0)
    for flags, needle in ((["--backend", "gloo"], "--backend gloo under mpirun"),
                          (["--ranks", "1"], "--ranks 1: mpirun's job says 2"),
                          (["--tune"], "--tune under mpirun"),
                          (["--threads", "2"], "mpirun bound this rank to CPU")):
        d.case(f"items 2, 16, 18: mpirun -np 2 train {' '.join(flags)}", MPIRUN + ["-np", "2"] + train + flags, 1,
               needle=needle, lines=None)
    d.case("item 17: RANK=5 WORLD_SIZE=2 (torchrun's, not fitting)",
           sh("RANK=5 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 " +
              " ".join(train)), 1, needle="do not fit together")
    d.case("item 19: --backend mpi --nnodes 2 without mpirun", train + ["--backend", "mpi", "--nnodes", "2"], 1,
           needle="train starts MPI jobs on this machine only")
    d.case("item 10: --backend mpi > /dev/full", sh(" ".join(train + ["--backend", "mpi"]) + " > /dev/full"), 1,
           needle="stdout: write failed: No space left on device")
    metrics = w("r4m.jsonl")
    script = (" ".join(train[:-1] + ["1000", "--backend", "mpi", "--timeout", "5", "--log-every", "1", "--metrics",
                                     metrics]) + " >/dev/null & L=$!; "
              f"for i in $(seq 600); do grep -q step {metrics} 2>/dev/null && break; sleep 0.1; done; "
              f"pkill -STOP -f '^[^ ]*mpiexec .*{db}'; wait $L; code=$?; sleep 1; "
              f"left=$(pgrep -c -f '^([^ ]*mpiexec|{TRAIN}) .*{db}'); "
              "[ -e /dev/shm/granary-mpi.$L ] && echo 'shared memory left' >&2; "
              "[ \"$left\" = 0 ] || echo \"$left processes left\" >&2; exit $code")
    d.case("item 9: train's own mpirun SIGSTOPped mid-epoch (--timeout 5)", sh(script), 1,
           needle="has been stopped for")


def round4_python(d, w):
    """Items 3 and 4: a db rebuilt under a Dataset's workers; two iterators of one Loader."""
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
    d.case("item 3: prep build --force under a DataLoader(granary.Dataset) between epochs",
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
    d.case("item 4: zip(iter(L), iter(L)) over one granary.Loader", ["/usr/bin/python3", "-c", script], 1,
           needle="another iterator over this Loader was started")
