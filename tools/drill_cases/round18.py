"""Round 18 of the hostile drill (twenty-sixth session): a db's classes as
people's folders hold them (a class of few images, a val folder lacking
one), counted and noted where prep builds them and where train scores them;
a manifest whose counts lie; a saved model scored on images of another size
than it was trained on; granary.write of splits whose classes differ."""
import json
import os
import shutil

from drill_cases.common import PREP, PYTHON, TRAIN, granary_script, run


def folder(root, one_png, counts):
    """root/SPLIT/CLASS/k.png, counts[split][class] copies of one image."""
    shutil.rmtree(root, ignore_errors=True)
    for split, classes in counts.items():
        for c, n in classes.items():
            os.makedirs(os.path.join(root, split, c))
            for k in range(n):
                shutil.copyfile(one_png, os.path.join(root, split, c, f"{k}.png"))


def round18(d, w):
    """Round 18's cases."""
    run([PREP, "build", "/usr/share/datasets/fashion-mnist", w("r18one.db"), "--limit", "1", "--no-progress"])
    run([PREP, "cat", w("r18one.db"), "0", "--png", w("r18.png")])
    raw, db = w("r18raw"), w("r18.db")
    folder(raw, w("r18.png"), {"train": {"ant": 40, "bee": 3, "cow": 6}, "val": {"ant": 6, "cow": 2}})
    os.makedirs(os.path.join(raw, "val", "bee"))  # an empty folder, as people leave one
    d.case("prep build of train/ and val/ where val lacks a class and train's are far from balanced: both noted",
           [PREP, "build", raw, db, "--size", "32", "--no-progress"], 0,
           needle="split 'val' holds no sample of class(es) 'bee' that 'train' has")
    d.case("prep info of that db: each split's samples of each class as a table",
           [PREP, "info", db], 0, report=True, needle="bee                           3          0")
    d.case("train on that db: its val scores name the class val lacks beside the recalls",
           [TRAIN, "--db", db, "--ranks", "1", "--epochs", "1"], 0, report=True,
           needle="it holds no sample of 'bee'")
    lying = w("r18lying.db")
    shutil.rmtree(lying, ignore_errors=True)
    shutil.copytree(db, lying)
    with open(os.path.join(lying, "manifest.json")) as f:
        manifest = json.load(f)
    manifest["class_counts"]["val"] = [9, 0, 0]  # 9 samples, all ant: the split holds 8
    with open(os.path.join(lying, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    d.case("train on a db whose manifest's class counts do not sum to its split: refused, naming the member",
           [TRAIN, "--db", lying, "--ranks", "1", "--epochs", "1"], 1,
           needle="class_counts.val: not one count for each of the db's 3 classes summing to the split's 8 samples")
    small, large = w("r18at32.db"), w("r18at64.db")
    run([PREP, "build", os.path.join(raw, "train"), small, "--size", "32", "--no-progress"])
    run([PREP, "build", os.path.join(raw, "train"), large, "--no-progress"])
    for model, expect, needle in (("convnet", 1, "mat1 and mat2 shapes cannot be multiplied"),
                                  ("resnet", 0, "train: warning: --model")):
        saved = w(f"r18{model}.pt")
        run([TRAIN, "--db", small, "--model", model, "--ranks", "1", "--epochs", "1", "--save", saved])
        d.case(f"train --eval-only of a {model} trained at 32 px on a folder built at prep's default 64: "
               f"{'refused' if expect else 'scored with a warning'}, both sizes and --like named",
               [TRAIN, "--db", large, "--model", saved, "--eval-only", "--eval-split", "train"], expect,
               needle=needle if expect else "or --size 32 (the model takes these inputs, pooling adaptively")
        if expect:
            d.case("... the same refusal names the model's size and prep build --like",
                   [TRAIN, "--db", large, "--model", saved, "--eval-only", "--eval-split", "train"], 1,
                   needle="was trained on inputs of 32 x 32 pixels of 3 channels (its card says)")
    script = granary_script(w, "r18write.py", """
        import numpy as np
        train = [(np.full(4, k % 3, np.float32), k % 3) for k in range(30)]
        test = [(np.zeros(4, np.float32), 0) for k in range(5)]
        granary.write(sys.argv[1], {"train": train, "test": test})
    """)
    shutil.rmtree(w("r18write.db"), ignore_errors=True)
    d.case("granary.write of a test split holding one of train's three classes: the two it lacks named",
           [PYTHON, script, w("r18write.db")], 0, needle="split 'test' holds no sample of class(es) '1', '2'")
