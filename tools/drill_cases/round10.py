"""Round 10 of the hostile drill (eighteenth session): jobs and data one
pace off the path."""
import os
import random

from drill_cases.common import FASHION, PREP, TRAIN, image_folder, run, sh, wait_for_step_sh


def round10(d, w):
    """Round 10's cases, each group on its own scratch input."""
    node_started_alone(d, w)
    mostly_unreadable(d, w)
    lfs_clone(d, w)
    stopped_run(d, w)


def node_started_alone(d, w):
    """A two-node job whose other node never comes: the line says which side to start."""
    db = w("r10.db")
    run([PREP, "build", FASHION, db, "--limit", "256", "--no-progress"])
    port = str(random.randint(20000, 60000))
    node = [TRAIN, "--db", db, "--epochs", "1", "--threads", "1", "--pin", "off", "--nnodes", "2", "--timeout", "3",
            "--master-addr", "127.0.0.1", "--master-port", port]
    d.case("node 1 of 2 started alone: node 0 named, with what to check", node + ["--ranks", "1", "--node-rank", "1"],
           1, needle="start node 0 (--node-rank 0) too")
    # Rank 0's store or the launcher watching it wait: whichever notices first says it.
    d.case("node 0 of 2 started alone: the nodes to start", node + ["--ranks", "1", "--node-rank", "0"], 1,
           needle="start all 2 nodes", lines=(1, 2))


def mostly_unreadable(d, w):
    """A folder of HTML error pages saved as .jpg beside a few photographs: stopped early, with the way to finish."""
    raw = image_folder(w("r10u"), per_class=40)
    for k in range(200):
        with open(os.path.join(raw, "a", f"page{k:03d}.jpg"), "w") as f:
            f.write("<html><body>429 Too Many Requests</body></html>")
    build = [PREP, "build", raw, w("r10u.db"), "--size", "8", "--no-progress"]
    d.case("a folder of 200 HTML pages saved as .jpg and 80 photographs: stopped early, saying how to finish", build,
           1, needle="add --resume and a larger --max-rejects")
    d.case("--resume --max-rejects 0.9 finishes it without them", build + ["--resume", "--max-rejects", "0.9"], 0)
    d.case("the same folder: the pages named for what they are", build + ["--force"], 1,
           needle="page000.jpg: not a JPEG, PNG or WebP image: an HTML page (a download that failed?)")
    lfs = image_folder(w("r10l"), per_class=3)
    for c in ("a", "b"):
        for name in os.listdir(os.path.join(lfs, c)):
            with open(os.path.join(lfs, c, name), "w") as f:
                f.write("version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 4242\n")
    d.case("a dataset repository cloned without git-lfs (every image a pointer): named, with what to run",
           [PREP, "build", lfs, w("r10l.db"), "--no-progress"], 1, needle="git lfs pull")


def lfs_clone(d, w):
    """A db repository cloned without git-lfs: its shards are pointers."""
    db = w("r10lfs.db")
    run([PREP, "build", FASHION, db, "--limit", "256", "--no-progress"])
    for split in ("train", "test"):
        with open(os.path.join(db, split, "shard-00000.mdb"), "w") as f:
            f.write("version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 929792\n")
    d.case("train --db of a db cloned without git-lfs: the pointer named, with what to run",
           [TRAIN, "--db", db, "--epochs", "1"], 1, needle="is a Git LFS pointer, not the file itself")


def stopped_run(d, w):
    """A run that keeps checkpoints, stopped by SIGTERM as a scheduler preempts it: the step saved, resumed."""
    db = w("r10s.db")
    run([PREP, "build", FASHION, db, "--limit", "3000", "--no-progress"])
    args = [TRAIN, "--db", db, "--epochs", "3", "--checkpoint-dir", w("r10s.ck")]
    metrics = w("r10s.jsonl")
    # Its start-up lines come first: the last says where it was saved.
    d.case("train stopped by SIGTERM (a preemption) once it trains: the step saved, exit 143",
           sh(f"{' '.join(args)} --metrics {metrics} --log-every 1 & pid=$!; {wait_for_step_sh(metrics)}"
              f"kill -TERM $pid; wait $pid"), 143, needle="the step it reached is saved in", lines=None)
    d.case("--resume latest goes on from it", args + ["--resume", "latest"], 0)
