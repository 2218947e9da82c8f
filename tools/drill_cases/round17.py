"""Round 17 of the hostile drill (twenty-fifth session): a table with
missing values as Kaggle's Titanic has them, and data a saved model was not
trained on: a held-out table or folder built on its own (its classes and
one-hot columns numbered by what it holds), refused by train, and built
--like the model's db; a test table without labels predicted from Python."""
import os
import shutil

from drill_cases.common import PREP, PYTHON, TRAIN, granary_script, run

COLOUR_CLASS = {"blue": "cat", "green": "dog", "red": "fox"}


def table(path, rows, colours, seed):
    """x, colour, y: the class its colour's."""
    with open(path, "w") as f:
        f.write("x,colour,y\n")
        for i in range(rows):
            colour = colours[(i * 7 + seed) % len(colours)]
            f.write(f"{(i * 37 + seed) % 101 / 101:.3f},{colour},{COLOUR_CLASS[colour]}\n")


def round17(d, w):
    """Round 17's cases."""
    with open(w("r17titanic.csv"), "w") as f:
        f.write("Pclass,Sex,Age,Fare,Survived\n")
        for i in range(400):
            age = "" if i % 5 == 0 else str(20 + i % 50)  # a fifth of the ages missing, as Titanic's
            f.write(f"{1 + i % 3},{('male', 'female')[i % 2]},{age},{7.25 + i % 90},{(i % 2 + i % 3) % 2}\n")
    d.case("prep build of a table a fifth of whose ages are missing: the flag that keeps those rows named",
           [PREP, "build", w("r17titanic.csv"), w("r17titanic.db"), "--label", "Survived", "--no-progress"], 1,
           lines=None, needle="a row with a missing value is kept by building again with --missing nan")
    table(w("r17train.csv"), 600, ["blue", "green", "red"], 0)
    table(w("r17held.csv"), 200, ["green", "red"], 3)
    tr, model = w("r17tr.db"), w("r17tr.pt")
    run([PREP, "build", w("r17train.csv"), tr, "--val-fraction", "0.2", "--no-progress"])
    run([TRAIN, "--db", tr, "--ranks", "1", "--epochs", "15", "--lr", "0.01", "--save", model])
    run([PREP, "build", w("r17held.csv"), w("r17own.db"), "--no-progress"])
    scored = ["--model", model, "--eval-only", "--eval-split", "train"]
    d.case("train --eval-only of a saved model on a held-out table built on its own (no 'blue', no 'cat'): refused",
           [TRAIN, "--db", w("r17own.db")] + scored, 1,
           needle="label 0 is 'cat' to the model and 'dog' in the db")
    d.case("prep build --like the model's db: the held-out table gets its classes, columns and categories",
           [PREP, "build", w("r17held.csv"), w("r17like.db"), "--like", tr, "--no-progress"], 0)
    d.case("train --eval-only of the saved model on the table built --like its db: scored as it is",
           [TRAIN, "--db", w("r17like.db")] + scored, 0, report=True, needle="200 samples  acc 1.0000")
    with open(w("r17test.csv"), "w") as f:  # Kaggle's test.csv: no label, its columns in another order
        f.write("colour,x\nred,0.5\nteal,0.25\nblue,0.75\n")
    predict = granary_script(w, "r17predict.py", """
        import torch
        x, rows = granary.load_table(sys.argv[1], sys.argv[2])
        classes = granary.model_info(sys.argv[2])["classes"]
        print([classes[k] for k in torch.jit.load(sys.argv[2])(x).argmax(1).tolist()], file=sys.stderr)
    """)
    d.case("granary.load_table of a test table without labels (a colour the db never had): predicted, the value said",
           [PYTHON, predict, w("r17test.csv"), model], 0, lines=None,
           needle="1 in 'colour' none of its categories")
    part = granary_script(w, "r17part.py", """
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.body = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
                self.fc = torch.nn.Linear(8, 10)
            def forward(self, x):
                return self.fc(self.body(x))
        net = Net()
        for p in net.body.parameters():
            p.requires_grad_(False)
        torch.jit.script(net).save(sys.argv[1])
    """)
    run([PYTHON, part, w("r17part.pt")])
    run([PREP, "build", "/usr/share/datasets/fashion-mnist", w("r17f.db"), "--limit", "200", "--no-progress"])
    d.case("train --ranks 2 of a model whose backbone its script froze: the rest trains (the ranks crashed)",
           [TRAIN, "--db", w("r17f.db"), "--model", w("r17part.pt"), "--ranks", "2", "--epochs", "1"], 0)
    d.case("prep build --like with a --label other than the db's: refused before any work",
           [PREP, "build", w("r17held.csv"), w("r17x.db"), "--like", tr, "--label", "x"], 1,
           needle="--label x: --like " + tr + " was built with --label y")
    folder = w("r17photos")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "elk"))
    run([PREP, "build", "/usr/share/datasets/fashion-mnist", w("r17one.db"), "--limit", "1", "--no-progress"])
    run([PREP, "cat", w("r17one.db"), "0", "--png", os.path.join(folder, "elk", "1.png")])
    d.case("prep build --like a table's db for an image folder: refused",
           [PREP, "build", folder, w("r17y.db"), "--like", tr], 1,
           needle="a table's db is built like a table's")
    d.case("prep build --like of a folder holding a class the db lacks: refused naming it",
           [PREP, "build", folder, w("r17z.db"), "--like", w("r17one.db")], 1,
           needle="class 'elk' is none of --like " + w("r17one.db") + "'s classes")
