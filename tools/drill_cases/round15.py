"""Round 15 of the hostile drill (twenty-third session): labels as Python
datasets hold them and writes as notebooks leave them. Class names, one-hot
vectors, labels counted from 1 and classes as floats written by
granary.write; a Writer a notebook cell left open; a write stopped before
its first commit, resumed; a split a db lacks; a batch larger than a rank's
epoch."""
import os

from drill_cases.common import FASHION, PREP, PYTHON, TRAIN, db_count, granary_script as script, run


def round15(d, w):
    """Round 15's cases."""
    names = script(w, "r15names.py", """
        data = [(np.zeros((8, 8, 3), np.uint8), ["cat", "dog"][k % 2]) for k in range(10)]
        granary.write(sys.argv[1], data, progress=False)
    """)
    d.case("granary.write of (image, 'cat') samples without classes=: refused at sample 0, saying classes=",
           [PYTHON, names, w("r15names.db")], 1, needle="is the str 'cat', a class name: pass classes=", lines=None)
    one_hot = script(w, "r15onehot.py", """
        data = [(np.zeros(5, np.float32), np.eye(3, dtype=np.float32)[k % 3]) for k in range(30)]
        granary.write(sys.argv[1], data, progress=False)
    """)
    d.case("granary.write of one-hot labels: kept, warned of at the first sample with int(y.argmax())",
           [PYTHON, one_hot, w("r15onehot.db")], 0, needle="a one-hot vector (of class 0)")
    d.case("train --db of that db: its fields and what a label is, named",
           [TRAIN, "--db", w("r15onehot.db"), "--ranks", "1"], 1,
           needle="has no label field to train on (its fields: input float32 [5], target float32 [3])")
    one_based = script(w, "r15onebased.py", """
        granary.write(sys.argv[1], [(np.zeros(4, np.float32), 1 + k % 10) for k in range(100)], progress=False)
    """)
    d.case("granary.write of labels counted from 1: class 0 without a sample warned of and noted",
           [PYTHON, one_based, w("r15onebased.db")], 0, needle="labels run 1..10, so class 0 has no sample")
    floats = script(w, "r15floats.py", """
        import torch
        x = torch.randn(100, 4)
        granary.write(sys.argv[1], torch.utils.data.TensorDataset(x, (x[:, 0] > 0).float()), progress=False)
    """)
    d.case("granary.write of TensorDataset(X, y.float()) (a BCE loss's targets): a regression on 0 and 1, said",
           [PYTHON, floats, w("r15floats.db")], 0, needle="if they are classes, write them as ints")
    left_open(d, w)
    db = w("r15.db")
    run([PREP, "build", FASHION, db, "--limit", "300", "--no-progress"])
    split = script(w, "r15split.py", "granary.Loader(sys.argv[1], split='val', batch_size=4)\n")
    d.case("granary.Loader(db, split='val') of a db of train and test: the splits it has named",
           [PYTHON, split, db], 1, needle="no split 'val' (its splits: train, test)", lines=None)
    d.case("train --batch-size 5000 on 150 samples a rank: one step an epoch, said",
           [TRAIN, "--db", db, "--epochs", "1", "--batch-size", "5000"], 0, report=True,
           needle="one step an epoch (a rank's batch, 2500 of --batch-size 5000, is larger)")


def left_open(d, w):
    """A Writer a notebook cell left open, and a write stopped before its first commit, resumed."""
    cell = script(w, "r15cell.py", """
        def cell(**options):
            w = granary.Writer(sys.argv[1], progress=False, dictionary="off", **options)
            for k in range(2000):
                if k == 1500 and not options:
                    raise ValueError("a bug in the cell")
                w.write({"x": np.random.default_rng(k).random(2048, np.float32), "label": k % 3})
            return w.close()
        try:
            cell()
        except ValueError as e:
            kept = e.__traceback__  # as IPython keeps sys.last_traceback
        try:
            cell()
        except granary.FailedPreconditionError as e:
            print(e, file=sys.stderr)
        print(cell(resume=True)["splits"])
    """)
    db = w("r15cell.db")

    def whole():
        return "" if os.path.isdir(db) and db_count(db) == 2000 else f"{db}: not 2000 samples"
    d.case("a Writer a notebook cell left open: named with its line; resume=True takes its place and finishes",
           [PYTHON, cell, db], 0, check=whole, needle="r15cell.py:8 is still open (its loop raised before close()?)")
    early = script(w, "r15early.py", """
        def write(**options):
            with granary.Writer(sys.argv[1], progress=False, dictionary="off", **options) as w:
                for k in range(300):
                    if k == 100 and not options:
                        raise ValueError("stopped before the first commit")
                    w.write({"x": np.full(4, k, np.float32), "label": k % 3})
        try:
            write()
        except ValueError:
            pass
        write(resume=True)
    """)
    early_db = w("r15early.db")

    def complete():
        return "" if os.path.isdir(early_db) and db_count(early_db) == 300 else f"{early_db}: not 300 samples"
    d.case("a write stopped before its first commit, resumed: it starts the split afresh (was: refused as corrupt)",
           [PYTHON, early, early_db], 0, check=complete)
