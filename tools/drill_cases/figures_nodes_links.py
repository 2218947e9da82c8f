"""Round 3 of hostile input: figures after pruning, nodes that disagree, files written through links, and the rest."""
import json
import os
import subprocess

from drill_cases.common import FASHION, PREP, TRAIN, free_port, run


def hostile_round3(d, w):
    """Round 3, its first items: a prune in the last epoch (every figure the
    saved model's), nodes that disagree on the recipe, and files written
    through links (the run record, temporary files)."""
    db = w("r3.db")
    run([PREP, "build", FASHION, db, "--limit", "1500", "--no-progress"])
    train = [TRAIN, "--db", db, "--epochs", "1"]

    def pruned_figures():
        code, out, err, _, _ = run(train[:-1] + ["2", "--model", "convnet", "--width", "0.5", "--ranks", "1",
                                   "--prune", "0.9", "--prune-epochs", "2-2", "--save", w("p.pt"), "--json"])
        if code != 0:
            return [f"exit {code}: {err.decode()[-200:]}"], ""
        reported = json.loads(out)["epochs"][-1]["test_accuracy"]
        code, out, _, _, _ = run([TRAIN, "--db", db, "--model", w("p.pt"), "--eval-only", "--json"])
        saved = json.loads(out)["accuracy"] if code == 0 else -1
        summary = f"last test_acc {reported:.4f}, --eval-only of the saved model {saved:.4f}"
        return ([] if abs(reported - saved) <= 2e-3 else [summary]), summary
    d.measured("--prune in the last epoch: reported = saved accuracy", pruned_figures)

    def disagreeing_nodes():
        port = free_port()
        node = [TRAIN, "--db", db, "--ranks", "1", "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port",
                str(port), "--threads", "1", "--pin", "off", "--timeout", "30", "--node-rank"]
        other = subprocess.Popen(node + ["1", "--sync-compress", "bf16"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
        code, _, err, _, _ = run(node + ["0", "--sync-compress", "fp16"])
        other_err = other.communicate(timeout=120)[1]
        needle = b'sync.compress is "bf16" on rank 1 (node 1) and "fp16" on rank 0 (node 0)'
        problems = [f"node {n}: exit {c} or no line naming sync.compress" for n, c, e in
                    [(0, code, err), (1, other.returncode, other_err)] if c == 0 or needle not in e]
        return problems, err.decode().strip().splitlines()[-1] if err else ""
    d.measured("two nodes, --sync-compress fp16 and bf16", disagreeing_nodes)

    with open(w("outside"), "w") as f:
        f.write("the user's")
    untouched = lambda: "" if open(w("outside")).read() == "the user's" else "the file the link names was written"
    os.makedirs(w("ck3"))
    os.symlink(w("outside"), w("ck3", "granary-run.json"))
    d.case("CKDIR/granary-run.json a symlink", train + ["--checkpoint-dir", w("ck3")], 1, untouched, "is a symlink")
    os.makedirs(w("t"))
    os.symlink(w("outside"), w("t", "m.pt.tmp"))
    os.makedirs(w("ck4", "step-0000000024.ckpt.tmp"))
    d.case("--save t/m.pt with t/m.pt.tmp a symlink, a directory at a checkpoint's .tmp",
           train + ["--save", w("t", "m.pt"), "--checkpoint-dir", w("ck4")], 0,
           lambda: untouched() or ("" if os.path.isfile(w("t", "m.pt")) and not os.path.islink(w("t", "m.pt"))
                                   else "m.pt is not a regular file"))


def hostile_round3_rest(d, w):
    """Round 3, the rest on the train side: --eval-only's flags, models that
    cannot train, a saved model's normalisation, flags for a feature that is
    off, features given raw. (tools/netsim's cases are Netsim tests: they need
    network namespaces.)"""
    db = w("r3b.db")
    run([PREP, "build", FASHION, db, "--limit", "256", "--no-progress"])
    train = [TRAIN, "--db", db, "--epochs", "1", "--ranks", "1"]
    run(train + ["--mean", "0.5", "--std", "0.25", "--save", w("ms.pt")])
    evaluate = [TRAIN, "--db", db, "--eval-only", "--model", w("ms.pt")]
    d.case("--eval-only with --save, --resume nope, --quantize int8", evaluate + ["--save", w("x.pt"), "--resume",
           "nope", "--quantize", "int8"], 1, lambda: "x.pt written" if os.path.exists(w("x.pt")) else "",
           "--eval-only does not use --resume, --save, --quantize")
    d.case("--eval-only --mean 0.3 of a model trained with --mean 0.5 --std 0.25", evaluate + ["--mean", "0.3"], 1,
           needle="was trained with --mean 0.5 --std 0.25")
    d.case("--quantize int8 --synthetic --save s.pt", train + ["--quantize", "int8", "--synthetic", "--save",
           w("s.pt")], 1, needle="not with --synthetic")
    d.case("--powersgd-rank 8 without powersgd", train + ["--powersgd-rank", "8"], 1,
           needle="only used with --sync-compress powersgd")
    os.makedirs(w("d.pt"))
    d.case("--model d.pt, a directory", train + ["--model", w("d.pt")], 1, needle="is a directory")
    os.symlink("/dev/zero", w("z.pt"))
    d.case("--eval-only --model z.pt, a link to /dev/zero", [TRAIN, "--db", db, "--eval-only", "--model", w("z.pt")],
           1, needle="is a character device")
    run(train + ["--quantize", "int8", "--calibration-batches", "2", "--save", w("q.pt")])
    d.case("--model q.int8.pt to train", train + ["--model", w("q.int8.pt")], 1,
           needle="has no trainable parameters")
    d.case("--train-split test --eval-split nope", train + ["--train-split", "test", "--eval-split", "nope"], 1,
           needle="--eval-split nope: ")
    with open(w("t.csv"), "w") as f:
        f.write("a,b,y\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n")
    run([PREP, "build", w("t.csv"), w("c.db"), "--label", "y", "--no-progress"])
    d.case("--mean 100 --std 0.001 on a CSV db", [TRAIN, "--db", w("c.db"), "--batch-size", "2", "--mean", "100",
           "--std", "0.001"], 1, needle="is a feature vector")
