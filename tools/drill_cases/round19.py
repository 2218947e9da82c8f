"""Round 19 of the hostile drill (twenty-seventh session): folders as
competitions and downloads ship them (a test/ of images without labels, a
dataset's splits under names prep did not read as splits, masks beside each
class's images, held-out images
labelled by a table or by their names built --like a model's db), a table's
count read as classes, scores of the split a run trains on, a run past its
best, and a manifest whose descriptions lie to the pure-Python reader."""
import json
import os
import random
import shutil

from drill_cases.common import PREP, PYTHON, ROOT, TRAIN, run


def folder(root, one_png, layout):
    """root/PATH for each PATH of `layout` (a list), a copy of one image each."""
    shutil.rmtree(root, ignore_errors=True)
    for path in layout:
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        shutil.copyfile(one_png, os.path.join(root, path))


def noisy_table(path, rows):
    """40 noise features, the label the sign of the first with 30% of them flipped: an MLP learns the flips."""
    rnd = random.Random(7)
    with open(path, "w") as f:
        f.write(",".join(f"x{i}" for i in range(40)) + ",label\n")
        for _ in range(rows):
            x = [rnd.gauss(0, 1) for _ in range(40)]
            f.write(",".join(f"{v:.4f}" for v in x) + f",{int((x[0] > 0) != (rnd.random() < 0.3))}\n")


def labels_of(db, n):
    """The labels of a db's first n train samples, sorted (prep cat)."""
    labels = []
    for i in range(n):
        _, out, _, _, _ = run([PREP, "cat", db, str(i), "--json"])
        labels.append(json.loads(out)["fields"]["label"]["values"][0])
    return sorted(labels)


def round19(d, w):
    """Round 19's cases."""
    run([PREP, "build", "/usr/share/datasets/fashion-mnist", w("r19one.db"), "--limit", "1", "--no-progress"])
    run([PREP, "cat", w("r19one.db"), "0", "--png", w("r19.png")])
    png = w("r19.png")
    folder(w("r19comp"), png, [f"{s}/{c}/{k}.png" for s in ("train", "val") for c in ("ant", "bee") for k in range(3)]
           + [f"test/{k}.png" for k in range(4)])
    d.case("prep build of train/<class>/, val/<class>/ beside test/*.png (the images to predict): splits, test/ noted",
           [PREP, "build", w("r19comp"), w("r19comp.db"), "--size", "12", "--no-progress"], 0,
           needle="test/: neither class folders nor a table of labels",
           check=lambda: "" if labels_of(w("r19comp.db"), 6) == [0, 0, 0, 1, 1, 1] else "not ant and bee")
    folder(w("r19intel"), png, [f"seg_{s}/seg_{s}/{c}/{k}.png" for s in ("train", "test") for c in ("sea", "street")
                                for k in range(2)] + ["seg_pred/seg_pred/0.png"])
    d.case("prep build of Intel's seg_train/seg_train/<class>/, seg_test/...: refused, with the links that name them",
           [PREP, "build", w("r19intel"), w("r19intel.db"), "--no-progress"], 1,
           needle="seg_test/, seg_train/ hold the same folders (sea, street)")
    folder(w("r19xray"), png, [f"{c}/{k}/{i}.png" for c in ("COVID", "Normal") for k in ("images", "masks")
                               for i in range(2)])
    d.case("prep build of the COVID-19 radiography download (each class's masks/ beside its images/): refused",
           [PREP, "build", w("r19xray"), w("r19xray.db"), "--no-progress"], 1,
           needle="COVID/, Normal/ each hold masks/ beside images/: segmentation masks?")
    folder(w("r19cxr"), png, [f"chest_xray/{s}/{c}/0.png" for s in ("train", "test", "val")
                              for c in ("NORMAL", "PNEUMONIA")])
    d.case("prep build of the chest X-rays as extracted (chest_xray/chest_xray/{train,test,val}/): the folder named",
           [PREP, "build", w("r19cxr"), w("r19cxr.db"), "--no-progress"], 1,
           needle="whose folders test/, train/, val/ are a dataset's splits; build from it")
    tr = w("r19tr.db")
    run([PREP, "build", os.path.join(w("r19comp"), "train"), tr, "--size", "12", "--no-progress"])
    folder(w("r19held"), png, ["bee.1.png", "bee.2.png"])
    with open(w("r19held.csv"), "w") as f:
        f.write("id,label\nbee.1.png,bee\nbee.2.png,bee\n")
    d.case("prep build --like of held-out images labelled by a table holding one of the db's classes: numbered as it",
           [PREP, "build", w("r19held"), w("r19heldtab.db"), "--labels", w("r19held.csv"), "--like", tr,
            "--no-progress"], 0, check=lambda: "" if labels_of(w("r19heldtab.db"), 2) == [1, 1] else "bee is not 1")
    shutil.copyfile(png, os.path.join(w("r19held"), "elk.3.png"))
    d.case("prep build --label-from-name --like of an image whose name says a class the db lacks: refused by name",
           [PREP, "build", w("r19held"), w("r19heldname.db"), "--label-from-name", "--like", tr, "--no-progress"], 1,
           needle="elk.3.png: its name says class 'elk', which is none of --like")
    with open(w("r19bikes.csv"), "w") as f:
        f.write("temp,cnt\n" + "".join(f"{i % 7},{(i * 13) % 300}\n" for i in range(1500)))
    d.case("prep build of a table whose label is a count (300 values over 1,500 rows): noted with --regression",
           [PREP, "build", w("r19bikes.csv"), w("r19bikes.db"), "--label", "cnt", "--no-progress"], 0,
           needle="a count or an amount to predict? --regression reads it as a number")
    fm = w("r19fm.db")
    run([PREP, "build", "/usr/share/datasets/fashion-mnist", fm, "--limit", "300", "--no-progress"])
    d.case("train --train-split test on a db of train and test: no split to evaluate, said (test was scored)",
           [TRAIN, "--db", fm, "--ranks", "1", "--epochs", "1", "--train-split", "test"], 0, report=True,
           needle="train: no evaluation: no split to evaluate on")
    d.case("train --eval-split train: warned that its scores are of the samples it learns from",
           [TRAIN, "--db", fm, "--ranks", "1", "--epochs", "1", "--eval-split", "train"], 0,
           needle="--eval-split train is the split it trains on")
    noisy_table(w("r19noisy.csv"), 1500)
    run([PREP, "build", w("r19noisy.csv"), w("r19noisy.db"), "--val-fraction", "0.3", "--no-progress"])
    past = [TRAIN, "--db", w("r19noisy.db"), "--ranks", "1", "--dropout", "0", "--lr", "0.003", "--width", "4",
            "--epochs", "10"]
    d.case("train of an MLP that learns a noisy table's flips by heart: the run past its best says so and when",
           past, 0, report=True, needle="the model fits split 'train' at the cost of samples it has not seen")

    def notes_in_json():
        _, out, _, _, _ = run(past + ["--json"])
        return "" if ": past epoch " in " ".join(json.loads(out)["epochs"][-1].get("notes", [])) else "no notes"
    d.case("... and train --json gives the note in the last epoch's notes",
           [TRAIN, "--db", w("r19noisy.db"), "--ranks", "1", "--epochs", "1", "--json"], 0, check=notes_in_json)
    lying = w("r19lying.db")
    shutil.rmtree(lying, ignore_errors=True)
    shutil.copytree(w("r19bikes.db"), lying)
    with open(os.path.join(lying, "manifest.json")) as f:
        manifest = json.load(f)
    manifest["statistics"]["train"]["features"]["std"] = [-1.0]
    with open(os.path.join(lying, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    d.case("the pure-Python reader (tools/granary_db.py) of a manifest whose statistics lie: refused as prep does",
           [PYTHON, os.path.join(ROOT, "tools", "granary_db.py"), lying], 1,
           needle="statistics.train.features: std[0] is not what")
