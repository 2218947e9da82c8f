"""Round 2 of hostile input: outputs that would replace what is not theirs, a checkpoint directory shared by
two runs, deep JSON, files that never end, a refused resume, unwritable outputs and lost writes."""
import os
import random
import re
import shutil

from drill_cases.common import FASHION, LOADER, PREP, ROOT, TRAIN, files_of, run, sh


def hostile_outputs(d, w):
    """Round 2's cases, in five groups, on one small db."""
    db = w("out2.db")
    run([PREP, "build", FASHION, db, "--limit", "256", "--no-progress"])
    base = [TRAIN, "--db", db, "--batch-size", "64"]
    train = base + ["--epochs", "1"]
    not_theirs(d, w, db, train)
    kd, a = one_run_per_checkpoint_dir(d, w, base, train)
    endless_inputs(d, w, db, train)
    unwritable_and_lost(d, w, db, base, train)
    smaller_ones(d, w, db, base, train, kd, a)


def not_theirs(d, w, db, train):
    """No output inside a db, onto an input or another output, over another kind of file or a device."""
    before = files_of(db)
    intact = lambda: "" if files_of(db) == before else "the db changed"
    manifest = os.path.join(db, "manifest.json")

    # 1. No output inside a db, onto an input or another output, over another kind or a device.
    for name, args, needle in [
            ("--metrics onto the db's manifest", train + ["--metrics", manifest], "is inside the db"),
            ("--report onto the db's manifest", train + ["--report", manifest], "is inside the db"),
            ("--save inside the db", train + ["--save", os.path.join(db, "m.pt")], "is inside the db"),
            ("--checkpoint-dir inside the db", train + ["--checkpoint-dir", os.path.join(db, "train")],
             "is inside the db"),
            ("prep cat --png onto the manifest", [PREP, "cat", db, "--index", "0", "--png", manifest],
             "is inside the db"),
            ("prep build inside another db", [PREP, "build", FASHION, os.path.join(db, "inner.db"), "--limit", "10"],
             "is inside the db"),
            ("train --json > DB/out.json", sh(f"{' '.join(train)} --json > {db}/out.json; rc=$?; rm -f {db}/out.json;"
                                              f" exit $rc"), "is inside the db"),
            ("--report /dev/null", train + ["--report", "/dev/null"], "is a character device"),
            ("--save onto --metrics", train + ["--save", w("same.pt"), "--metrics", w("same.pt")], "is also --save")]:
        d.case(name, args, 1, intact, needle)
    with open(w("table.csv"), "w") as f:
        f.write("a,b\n1,2\n")
    d.case("--report over a CSV", train + ["--report", w("table.csv")], 1,
           lambda: "" if open(w("table.csv")).read() == "a,b\n1,2\n" else "CSV replaced", "holds something other")
    os.symlink("/proc/self/fd/1", w("to-stdout.html"))
    d.case("--report via a link to /proc/self/fd/1", sh(f"{' '.join(train)} --report {w('to-stdout.html')} "
                                                         f"> /dev/null"), 1,
           lambda: "" if os.path.islink(w("to-stdout.html")) else "link replaced", "is a character device")


def one_run_per_checkpoint_dir(d, w, base, train):
    """A checkpoint directory belongs to one run. Returns it and run A's command."""
    # 2. A checkpoint directory belongs to one run.
    kd = w("kd")
    a = base + ["--checkpoint-dir", kd, "--keep", "2", "--optimizer", "sgd", "--lr", "0.1"]
    run(a + ["--epochs", "2"])
    kept = files_of(kd)
    d.case("run B with another --lr in run A's --checkpoint-dir",
           base + ["--checkpoint-dir", kd, "--keep", "2", "--optimizer", "sgd", "--lr", "0.2", "--epochs", "2"], 1,
           lambda: "" if files_of(kd) == kept else "run A's checkpoints changed", "holds the checkpoints of run")
    d.case("run A's --resume latest in its own directory", a + ["--epochs", "3", "--resume", "latest"], 0)
    kd2 = w("kd2")
    d.case("two runs at once in one --checkpoint-dir",
           sh(f"{' '.join(base)} --epochs 200 --checkpoint-dir {kd2} >/dev/null 2>&1 & pid=$!; "
              f"for i in $(seq 1000); do test -f {kd2}/granary-run.json && break; sleep 0.01; done; "
              f"{' '.join(train)} --checkpoint-dir {kd2}; rc=$?; kill $pid; wait $pid; exit $rc"), 1, None,
           "in use by run")
    return kd, a


def endless_inputs(d, w, db, train):
    """Deep JSON, files that never end or never open, a refused prep build --resume."""
    # 3. Deep JSON: a 60 KB manifest 30,000 deep; a checkpoint header the same.
    deep = w("deep.db")
    shutil.copytree(db, deep)
    with open(os.path.join(deep, "manifest.json"), "w") as f:
        f.write("[" * 30000 + "]" * 30000)
    for tool, args in [("prep info", [PREP, "info", deep]), ("prep verify", [PREP, "verify", deep]),
                       ("prep cat", [PREP, "cat", deep, "--index", "0"]), ("train", [TRAIN, "--db", deep]),
                       ("loader bench", [LOADER, "bench", deep]),
                       ("granary.Dataset", ["/usr/bin/python3", "-c", "import sys, granary\ntry: granary.Dataset("
                                            "sys.argv[1])\nexcept granary.Error as e: sys.exit(str(e))", deep])]:
        d.case(f"30,000-deep manifest: {tool}", args, 1, None,
               "nested deeper than 64 levels" if tool != "prep verify" else None, report=tool == "prep verify")
    header = "[" * 30000 + "]" * 30000
    with open(w("deep.ckpt"), "wb") as f:
        f.write(b"GRNYCKPT" + len(header).to_bytes(4, "little") + header.encode())
    d.case("30,000-deep checkpoint header: train --resume", train + ["--resume", w("deep.ckpt")], 1, None,
           "nested deeper than 64 levels")

    # 4. Files that never end or never open.
    d.case("train --resume /dev/zero", train + ["--resume", "/dev/zero"], 1, None, "is a character device")
    os.mkfifo(w("fifo.ckpt"))
    d.case("train --resume FIFO", train + ["--resume", w("fifo.ckpt")], 1, None, "is a FIFO")

    # 5. A refused prep build --resume keeps DB.partial and names the option.
    part = w("part.db")  # interrupted: a shard outgrew its map
    run([PREP, "build", FASHION, part, "--no-progress", "--max-shard-mb", "8"])
    d.case("prep build --resume with another --zstd-level",
           [PREP, "build", FASHION, part, "--resume", "--no-progress", "--zstd-level", "9"], 1,
           lambda: "" if os.path.isdir(part + ".partial") else "DB.partial deleted", "zstd_level")


def unwritable_and_lost(d, w, db, base, train):
    """Unwritable outputs found before training, lost writes, granary.Loader in forked children."""
    # 6. Unwritable outputs are found before training.
    with open(w("a-file"), "w") as f:
        f.write("x")
    os.symlink("loop-b", w("loop-a"))
    os.symlink("loop-a", w("loop-b"))
    for name, flags, needle in [("--save in /proc", ["--save", "/proc/self/m.pt"], "cannot create files"),
                                ("--checkpoint-dir that is a file", ["--checkpoint-dir", w("a-file")],
                                 "not a directory"),
                                ("--checkpoint-dir a symlink loop", ["--checkpoint-dir", w("loop-a")], "symlink loop")]:
        d.case(name, base + ["--epochs", "50"] + flags, 1, None, needle)

    # 7. A lost write is an error.
    for name, args in [("train --metrics /dev/full", train + ["--metrics", "/dev/full"]),
                       ("train --json > /dev/full", sh(f"{' '.join(train)} --json > /dev/full")),
                       ("prep info --json > /dev/full", sh(f"{PREP} info {db} --json > /dev/full")),
                       ("prep verify > /dev/full", sh(f"{PREP} verify {db} > /dev/full"))]:
        d.case(name, args, 1, None, "No space left")

    # 8. granary.Loader iterated in a forked child (it deadlocked or crashed).
    fork_script = ("import os, sys, granary\n"
                   "loader = granary.Loader(sys.argv[1], batch_size=64)\n"
                   "want = sum(len(y) for _, y in loader)\n"
                   "for _ in range(4):\n"
                   "    pid = os.fork()\n"
                   "    if pid == 0:\n"
                   "        os._exit(0 if sum(len(y) for _, y in loader) == want else 3)\n"
                   "    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:\n"
                   "        sys.exit('a forked child read another epoch')\n")
    d.case("granary.Loader iterated in 4 forked children", ["timeout", "60", "/usr/bin/python3", "-c", fork_script, db],
           0)


def smaller_ones(d, w, db, base, train, kd, a):
    """The smaller ones: bounds, a looping model, an edited checkpoint, a FIFO shard, disagreeing nodes."""
    # 9. The smaller ones.
    for c in ("a", "b"):  # two classes: one would add a note before the error
        os.makedirs(w("junk", c))
        with open(w("junk", c, "1.jpg"), "w") as f:
            f.write("not a jpeg")
    loop = w("loop.pt")
    with open(w("make_loop.py"), "w") as f:  # TorchScript reads the class's source from a file
        f.write("import torch\nclass L(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                "        self.h = torch.nn.Linear(784, 10)\n    def forward(self, x):\n"
                "        while bool(x.sum() > -1.0):\n            x = x + 1\n        return self.h(x.flatten(1))\n"
                f"torch.jit.script(L()).save('{loop}')\n")
    run(["/usr/bin/python3", w("make_loop.py")])
    stop = os.path.join(ROOT, "build/tests/libstop_at_start.so")
    for name, args, expect, needle in [
            ("train --tune --tune-seconds 0", base + ["--tune", "--tune-seconds", "0"], 1, "must be in 0.5..600"),
            ("train --lr -1", base + ["--lr", "-1"], 2, "--lr: must be > 0"),
            ("train --weight-decay -1", base + ["--weight-decay", "-1"], 2, "must be >= 0"),
            ("train --seed -1", base + ["--seed", "-1"], 2, "--seed: must be >= 0"),
            ("train --master-port 70000", base + ["--master-port", "70000"], 1, "--master-port 70000"),
            ("a loss that becomes NaN (--lr 1e6)", train + ["--ranks", "1", "--optimizer", "sgd", "--lr", "1e6"], 1,
             "the training loss became nan at step"),
            ("a --model that loops for ever, --timeout 3", train + ["--model", loop, "--timeout", "3"], 1,
             "did not return within --timeout 3 s"),
            ("resume with another optimizer", base + ["--checkpoint-dir", kd, "--optimizer", "adam", "--resume",
                                                      "latest", "--epochs", "4"], 1, "differs in optim.optimizer"),
            ("prep build --max-shard-mb 1", [PREP, "build", FASHION, w("ms.db"), "--max-shard-mb", "1"], 2,
             "must be 0 (no limit) or at least 2"),
            ("prep build --dictionary on, 2 samples", [PREP, "build", FASHION, w("d2.db"), "--limit", "2",
                                                       "--dictionary", "on", "--no-progress"], 1,
             "could not train a dictionary on 2 samples"),
            ("prep build --dictionary on --zstd-level 0", [PREP, "build", FASHION, w("d0.db"), "--limit", "20",
                                                           "--dictionary", "on", "--zstd-level", "0"], 1,
             "--dictionary on needs compression"),
            ("prep build failing --max-rejects", [PREP, "build", w("junk"), w("junk.db"), "--no-progress"], 1,
             "first: a/1.jpg: not a JPEG, PNG or WebP image")]:
        d.case(name, args, expect, None, needle)
    edited = w("edited.ckpt")
    with open(sorted(os.path.join(kd, f) for f in os.listdir(kd) if f.endswith(".ckpt"))[-1], "rb") as f:
        data = f.read()
    n = int.from_bytes(data[8:12], "little")
    header = re.sub(rb'"global_step":(\d+)', lambda m: b'"global_step":%d' % (int(m.group(1)) + 80), data[12:12 + n])
    with open(edited, "wb") as f:
        f.write(data[:8] + len(header).to_bytes(4, "little") + header + data[12 + n:])
    d.case("a checkpoint whose step was edited", a + ["--resume", edited, "--epochs", "9"], 1, None,
           "header hash mismatch")
    fifo_db = w("fifo-shard.db")
    shutil.copytree(db, fifo_db)
    os.remove(os.path.join(fifo_db, "train", "shard-00000.mdb"))
    os.mkfifo(w("shard-fifo"))
    os.symlink(w("shard-fifo"), os.path.join(fifo_db, "train", "shard-00000.mdb"))
    for tool, args in [("prep info", [PREP, "info", fifo_db]), ("train", [TRAIN, "--db", fifo_db])]:
        d.case(f"a shard that is a link to a FIFO: {tool}", ["timeout", "30"] + args, 1, None, "shard-00000.mdb")
    port = str(random.randint(20000, 60000))
    nodes = " ".join(base) + f" --epochs 1 --threads 1 --pin off --nnodes 2 --timeout 20 --master-addr 127.0.0.1 " \
                             f"--master-port {port}"
    d.case("two nodes started with different --ranks",
           sh(f"{nodes} --ranks 2 --node-rank 1 2>/dev/null & {nodes} --ranks 1 --node-rank 0; rc=$?; wait; exit $rc"),
           1, None, "start every node with the same --ranks and --nnodes")
    if os.path.exists(stop):
        # Rank 0's own line comes first where it times out before the launcher stops it.
        d.case("a rank stopped during start-up (the launcher's line, rank 0's before it or not)",
               sh(f"LD_PRELOAD={stop} GRANARY_TEST_STOP_RANK=1 {' '.join(train)} --ranks 2 --timeout 10"), 1, None,
               "rank 1 did not start in", lines=(1, 2))
