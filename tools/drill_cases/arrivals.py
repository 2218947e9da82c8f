"""Round 9 of the hostile drill (seventeenth session): data as other tools
save it and datasets as other libraries hand them over."""
import os
import textwrap

from drill_cases.common import PREP, TRAIN, db_count, image_folder, sh


def round9_arrivals(d, w):
    """NumPy's files and class folders of text given to prep, whose refusal prints the Python that writes them."""
    keras = w("r9.npz")
    script = textwrap.dedent(f"""
        import numpy as np
        y = np.arange(60, dtype=np.uint8) % 3
        x = (y[:, None, None] * 80 + np.zeros((60, 28, 28), np.uint8)).astype(np.uint8)
        np.savez({keras!r}, x_train=x[:50], y_train=y[:50], x_test=x[50:], y_test=y[50:])
    """)
    d.case("Keras's mnist.npz: named, with the granary.write line for its two splits",
           sh(f"/usr/bin/python3 -c {quote(script)} && {PREP} build {keras} {w('r9.db')}"), 1,
           needle="'test': zip(d['x_test'], d['y_test'])")
    d.case("the line prep printed, run as printed: a db of 50 + 10 samples",
           sh(f"code=$({PREP} build {keras} {w('r9.db')} 2>&1 | sed 's/.*from Python: //') && "
              f"/usr/bin/python3 -c \"$code\" && {PREP} info {w('r9.db')} | grep -q '^total  *60 '"), 0)


    imdb = w("r9i")
    for split in ("train", "test"):
        for label in ("pos", "neg"):
            os.makedirs(os.path.join(imdb, split, label))
            for k in range(2):
                with open(os.path.join(imdb, split, label, f"{k}_7.txt"), "w") as f:
                    f.write(f"a {label} review")
    d.case("aclImdb's class folders of .txt reviews: named as text, with the granary.write of both splits",
           [PREP, "build", imdb, w("r9i.db")], 1, needle="granary.write(")
    d.case("the text folders' printed code, run as printed: 4 + 4 reviews as str",
           sh(f"code=$({PREP} build {imdb} {w('r9i.db')} 2>&1 | sed 's/.*: import /import /') && "
              f"/usr/bin/python3 -c \"$code\" && {PREP} info {w('r9i.db')} | grep -q '(text, UTF-8)'"), 0)

    flowers = w("r9f")
    image_folder(flowers, classes=("jpg",), per_class=3)
    with open(os.path.join(flowers, "imagelabels.mat"), "wb") as f:
        f.write(b"MATLAB 5.0 MAT-file, Platform: GLNXA64, Created on: Mon Jun 30 2008" + bytes(60))
    d.case("--labels imagelabels.mat (Flowers-102): named as a MATLAB file, with scipy.io.loadmat",
           [PREP, "build", os.path.join(flowers, "jpg"), w("r9f.db"), "--labels",
            os.path.join(flowers, "imagelabels.mat")], 1, needle="scipy.io.loadmat(")

    script = textwrap.dedent(f"""
        import granary, numpy as np, torch
        granary.write({w("r9p.db")!r}, [{{"ids": np.arange(1 + k % 5), "label": k % 2}} for k in range(20)],
                      schema={{"ids": ("int64", [-1]), "label": ("int64", [])}}, progress=False)
        loader = torch.utils.data.DataLoader(granary.Dataset({w("r9p.db")!r}), batch_size=4, num_workers=2,
                                             collate_fn=granary.pad_collate)
        assert [b["ids"].shape[1] for b in loader] == [4, 5, 5, 5, 5]
    """)
    d.case("token ids of any length batched by DataLoader with granary.pad_collate, in 2 workers",
           ["/usr/bin/python3", "-c", script], 0)

    euro = w("r9e.csv")
    with open(euro, "w") as f:
        f.write("laenge;breite;klasse\n" + "".join(f"{k % 7},{k % 10};{k % 5},25;{k % 2}\n" for k in range(40)))
    d.case("a ';' table with decimal commas (a German spreadsheet's CSV): read as numbers, 40 rows",
           [PREP, "build", euro, w("r9e.db"), "--label", "klasse", "--no-progress"], 0,
           check=lambda: "" if db_count(w("r9e.db")) == 40 else f"{db_count(w('r9e.db'))} samples")
    dated = w("r9d.csv")
    with open(dated, "w") as f:
        f.write("day,units,label\n" + "".join(f"2021-{1 + k // 28:02d}-{1 + k % 28:02d},{k % 9},{k % 2}\n"
                                              for k in range(120)))
    d.case("a CSV column of 120 dates: refused as text, naming the numbers to derive from dates",
           [PREP, "build", dated, w("r9d.db"), "--no-progress"], 1, needle="its values are dates")
    planet = w("r9t.csv")
    with open(planet, "w") as f:
        f.write("x,tags\n" + "".join(f"{k},{('clear', 'haze')[k % 2]} {('primary', 'water', 'road')[k % 3]}"
                                       f"{' agriculture' if k % 5 else ''}\n" for k in range(48)))
    d.case("a label column of tag lists (Planet's 'clear primary'): noted as multi-label",
           sh(f"{PREP} build {planet} {w('r9t.db')} --label tags --no-progress 2>&1 | grep -q 'lists of tags'"), 0)
    pets = w("r9p")
    image_folder(os.path.join(pets, "PetImages"), classes=("Cat", "Dog"), per_class=2)
    d.case("Kaggle's kagglecatsanddogs/PetImages/{Cat,Dog} given by its outer folder: refused, naming PetImages",
           [PREP, "build", pets, w("r9pets.db")], 1, needle="build from it (prep build " + pets + "/PetImages DB)")
    loose = w("r9l")
    image_folder(loose, classes=("train",), per_class=4)
    names = sorted(os.listdir(os.path.join(loose, "train")))
    table = w("r9l.csv")
    with open(table, "w") as f:
        f.write("id,label\n" + "".join(f"{n},{k % 2}\n" for k, n in enumerate(names)))
    build = [PREP, "build", os.path.join(loose, "train"), w("r9l.db"), "--labels", table, "--size", "8",
             "--no-progress"]
    d.case("--labels: built", build, 0)
    d.case("--labels table edited since (the second image's label corrected): named as the table that changed",
           sh(f"sed -i '3s/,1$/,0/' {table} && {' '.join(build)}"), 1, needle="labels table " + table + " changed",
           lines=2)
    d.case("--update after a label correction: the other images copied", build + ["--update"], 0)

    script = w("r9a.py")
    with open(script, "w") as f:
        f.write("import argparse, torch\np = argparse.ArgumentParser()\np.add_argument('--local_rank', default=-1)\n"
                "p.parse_args()\nm = torch.nn.Linear(4, 2)\no = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                "for _ in range(25):\n    o.zero_grad(); m(torch.randn(2, 4)).sum().backward(); o.step()\n")
    launch = os.path.join(os.path.dirname(TRAIN), "launch")
    d.case("launch --ranks 2 of a script for torch.distributed.launch (--local_rank, no init_process_group): told so",
           sh(f"{launch} --ranks 2 /usr/bin/python3 {script} 2>&1 | grep -q 'without joining its 1 peer'"), 0)


def quote(text):
    return "'" + text.replace("'", "'\\''") + "'"
