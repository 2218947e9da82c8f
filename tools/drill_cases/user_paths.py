"""Round 4 of hostile input: the paths real users arrive by. Image folders and tables as people keep
them, a db being built or left half built, the Python package inside DataLoader; the launches are in
user_launches.py."""
import json
import os
import shutil
import textwrap

from drill_cases.arrivals import round9_arrivals
from drill_cases.common import FASHION, PREP, TRAIN, db_count, image_folder, lying_jpeg, run, sh
from drill_cases.user_launches import round4_launches, round4_tools


def hostile_round4(d, w):
    """Round 4: folders, tables, builds, mpirun and signals, Python, tools."""
    round4_folders(d, w)
    round4_odd_images(d, w)
    round4_tables(d, w)
    round4_odd_tables(d, w)
    round5_labelled_images(d, w)
    round4_builds(d, w)
    round4_launches(d, w)
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
           "target"], 0, needle="columns separated by ';' (found in the header")
    d.case("a ';'-separated table read at ','", [PREP, "build", w("r4t", "semi.csv"), w("r4c.db"), "--label",
           "target", "--delimiter", ","], 1, needle="the header is one column holding ';': give --delimiter ';'")
    with open(w("r4t", "PLAIN.CSV"), "w") as f:
        f.write("a,target\n1,0\n2,1\n")
    with open(w("r4t", "people.csv"), "w") as f:  # as Kaggle's Titanic: an id, a name, text columns
        f.write("Id,Name,Sex,Age,Embarked,Survived\n" + "".join(
            f"{i},\"Doe, Mr. {i}\",{'mf'[i % 2]},{20 + i % 40},{'SCQ'[i % 3] if i % 7 else ''},{i % 2}\n"
            for i in range(300)))
    d.case("a table with a name column: refused at its line with the --drop that leaves it out",
           [PREP, "build", w("r4t", "people.csv"), w("r4pe.db"), "--label", "Survived"], 1, needle="--drop Name")
    d.case("--drop Name,Id (before RAW and DB): text columns one-hot encoded, named in the manifest",
           [PREP, "build", "--drop", "Name,Id", w("r4t", "people.csv"), w("r4pe.db"), "--label", "Survived",
            "--missing", "zero", "--no-progress"], 0,
           check=lambda: "" if json.load(open(w("r4pe.db", "manifest.json")))["element_names"]["features"] ==
           ["Sex=f", "Sex=m", "Age", "Embarked=C", "Embarked=Q", "Embarked=S"] else "element names differ")
    run(sh(f"gzip -k {w('r4t', 'floats.csv')}"))
    d.case("floats.csv.gz: the same content as floats.csv",
           [PREP, "build", w("r4t", "floats.csv.gz"), w("r4gz.db"), "--label", "target", "--no-progress"], 0,
           check=lambda: "" if json.load(open(w("r4gz.db", "manifest.json")))["content_hash"] ==
           json.load(open(w("r4f.db", "manifest.json")))["content_hash"] else "content hashes differ")
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


def round4_odd_images(d, w):
    """Links between class folders and splits, a PNG's orientation, a JPEG over the pixel cap."""
    links = w("r4", "links")
    image_folder(links, classes=("other", "real"), per_class=3)
    os.symlink("real", os.path.join(links, "dup"))
    d.case("links/dup -> real: real keeps its 3 images, the alias is named",
           [PREP, "build", links, w("r4l.db"), "--size", "8", "--no-progress"], 0,
           needle="are links to another class's folder",
           check=lambda: "" if db_count(w("r4l.db")) == 6 else f"{db_count(w('r4l.db'))} samples, not 6")
    hard = w("r4", "hard")
    image_folder(os.path.join(hard, "train"), classes=("a", "b"), per_class=3)
    image_folder(os.path.join(hard, "val"), classes=("a", "b"), per_class=2)
    os.link(os.path.join(hard, "train", "a", "0.jpg"), os.path.join(hard, "val", "a", "9.jpg"))
    d.case("val/a/9.jpg a hard link of train/a/0.jpg: val keeps 5 samples, the overlap is named",
           [PREP, "build", hard, w("r4h.db"), "--size", "8", "--no-progress"], 0,
           needle="evaluation overlaps training: val/a/9.jpg (train)",
           check=lambda: "" if db_count(w("r4h.db"), "val") == 5 else f"val {db_count(w('r4h.db'), 'val')}")
    from PIL import Image
    png = w("r4", "png")
    half = Image.new("RGB", (40, 40), (0, 0, 255))
    half.paste((255, 0, 0), (0, 0, 20, 40))  # left half red
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise: the top half becomes red
    for c in ("a", "b"):
        os.makedirs(os.path.join(png, c))
    half.save(os.path.join(png, "a", "rot.png"), exif=exif.tobytes())
    half.save(os.path.join(png, "b", "plain.png"))

    def rotated():
        code, out, _, _, _ = run([PREP, "cat", w("r4png.db"), "--index", "0", "--json"])
        first_row = json.loads(out)["fields"]["image"]["values"][:24] if code == 0 else []
        return "" if first_row == [255, 0, 0] * 8 else f"first row {first_row}"
    d.case("a PNG with an eXIf orientation is rotated as a JPEG is",
           [PREP, "build", png, w("r4png.db"), "--size", "8", "--no-progress"], 0, check=rotated)
    cap = w("r4", "cap")
    image_folder(cap, classes=("a", "b"), per_class=1)  # two classes: one would add a note before the error
    with open(os.path.join(cap, "a", "huge.jpg"), "wb") as f:
        f.write(lying_jpeg(20000, 20000))
    d.case("a JPEG declaring 20000x20000: over the pixel cap, which the message states",
           [PREP, "build", cap, w("r4cap.db"), "--size", "8", "--no-progress"], 1, needle="2^28")


def round5_labelled_images(d, w):
    """A folder of images beside a table of their labels, as Kaggle ships them."""
    kaggle = w("r5k")
    image_folder(kaggle, classes=("train",), per_class=6)
    names = sorted(os.listdir(os.path.join(kaggle, "train")))
    with open(os.path.join(kaggle, "train.csv"), "w") as f:
        f.write("id,has_cactus\n" + "".join(f"{n},{k % 2}\n" for k, n in enumerate(names)))
    d.case("train/ of images and no class folders: --labels named, with the table beside it",
           [PREP, "build", os.path.join(kaggle, "train"), w("r5k.db")], 1, needle="--labels TABLE (")
    d.case("--labels train.csv: every image labelled by its row",
           [PREP, "build", os.path.join(kaggle, "train"), w("r5k.db"), "--labels", os.path.join(kaggle, "train.csv"),
            "--size", "8", "--no-progress"], 0,
           check=lambda: "" if db_count(w("r5k.db")) == len(names) else f"{db_count(w('r5k.db'))} samples")
    d.case("--labels on an IDX folder", [PREP, "build", FASHION, w("r5i.db"), "--labels",
           os.path.join(kaggle, "train.csv")], 1, needle="labels a folder of images")
    round6_known_datasets(d, w)
    round7_regression_tables(d, w)
    round8_data_as_kept(d, w)
    round9_arrivals(d, w)


def round7_regression_tables(d, w):
    """Tables whose label is a number to predict, as tabular users bring them."""
    prices = w("r7.csv")
    with open(prices, "w") as f:
        f.write("rooms,age,price\n" + "".join(f"{k % 6},{k % 40},{k % 6 * 1000.5 - k % 40 * 7.25}\n"
                                                for k in range(200)))
        f.write("1,2,inf\n2,3,1e39\n3,4,\n4,5,0x1f\n5,6,12,5\n")
    d.case("a price column as classes: refused, naming --regression",
           [PREP, "build", prices, w("r7.db"), "--label", "price"], 1, needle="--regression")
    d.case("--regression: 200 values; inf, 1e39, empty, hex and a row of four fields rejected by line",
           [PREP, "build", prices, w("r7.db"), "--label", "price", "--regression", "--val-fraction", "0.2",
            "--max-rejects", "0.2", "--no-progress"], 0,
           check=lambda: "" if db_count(w("r7.db")) == 200 else f"{db_count(w('r7.db'))} samples")
    d.case("train on the regression db: test_rmse and test_r2",
           [TRAIN, "--db", w("r7.db"), "--ranks", "1", "--epochs", "2"], 0)
    d.case("--stop-at-accuracy on a regression db: refused before any rank starts",
           [TRAIN, "--db", w("r7.db"), "--stop-at-accuracy", "0.9"], 1, needle="no accuracy")
    constant = w("r7c.csv")
    with open(constant, "w") as f:
        f.write("x,y\n" + "".join(f"{k},2.5\n" for k in range(100)))
    d.case("a constant target: std 1, trained without a NaN",
           sh(f"{PREP} build {constant} {w('r7c.db')} --label y --regression --val-fraction 0.2 --no-progress "
              f"&& {TRAIN} --db {w('r7c.db')} --ranks 1 --epochs 2 --json | grep -q '\"test_r2\":0'"), 0)
    d.case("--regression on an IDX folder: refused, naming the format",
           [PREP, "build", FASHION, w("r7i.db"), "--regression"], 1, needle="read as idx")


def round8_data_as_kept(d, w):
    """Data as users keep it: tables in other formats, gray 28 x 28 PNG folders, text and DataLoader words."""
    jsonl = w("r8.jsonl")
    with open(jsonl, "w") as f:
        f.write("".join(f'{{"a": {k}, "label": {k % 2}}}\n' for k in range(20)))
    d.case("a JSON Lines table: named, with the pandas line that writes the CSV",
           [PREP, "build", jsonl, w("r8j.db")], 1, needle="pd.read_json(")
    workbook = w("r8.xlsx")
    with open(workbook, "wb") as f:
        f.write(b"PK\x03\x04" + bytes(26) + b"[Content_Types].xml" + b"PK\x03\x04" + bytes(26) + b"xl/workbook.xml")
    d.case("an Excel workbook: named as one, not told to unzip", [PREP, "build", workbook, w("r8x.db")], 1,
           needle="pd.read_excel(")
    tsv = w("r8t")
    os.makedirs(tsv)
    for split in ("train", "test"):
        with open(os.path.join(tsv, f"{split}.tsv"), "w") as f:
            f.write("a\tb\tlabel\n" + "".join(f"{k}\t{k * 3 % 7}\t{k % 2}\n" for k in range(30)))
    d.case("a folder of train.tsv and test.tsv: read as CSV", [PREP, "build", tsv, w("r8t.db"), "--no-progress"], 0,
           check=lambda: "" if db_count(w("r8t.db")) == 60 else f"{db_count(w('r8t.db'))} samples")
    from PIL import Image
    gray = w("r8g")
    for split in ("training", "testing"):
        for digit in ("0", "1"):
            os.makedirs(os.path.join(gray, split, digit))
            for k in range(3):
                Image.new("L", (28, 28), k * 60).save(os.path.join(gray, split, digit, f"{k}.png"))
    d.case("mnist_png's layout (gray 28 x 28): built at the defaults, with notes naming --size 28 --channels 1",
           [PREP, "build", gray, w("r8g.db"), "--no-progress"], 0,
           check=lambda: "" if "--size 28 keeps them" in json.dumps(json.load(open(w("r8g.db", "manifest.json"))))
           else "no note on the enlarged images")
    script = textwrap.dedent(f"""
        import sys, granary
        granary.write({w("r8s.db")!r}, [{{"text": f"caf\u00e9 {{k}}", "label": k % 2}} for k in range(10)])
        got = granary.Dataset({w("r8s.db")!r})[3]["text"]
        sys.exit(0 if got == "caf\u00e9 3" else f"read back {{got!r}}")
    """)
    d.case("granary.write of a str: read back as the same str", ["/usr/bin/python3", "-c", script], 0)
    script = textwrap.dedent(f"""
        import granary
        loader = granary.Loader({w("r8t.db")!r}, batch_size=8, shuffle=True, num_workers=2, pin_memory=False)
        print(sum(len(y) for _, y in loader))
    """)
    d.case("granary.Loader with a DataLoader line's words (shuffle=True, num_workers, pin_memory)",
           ["/usr/bin/python3", "-c", script], 0)


def round6_known_datasets(d, w):
    """Well-known datasets as downloaded: CIFAR's two versions, Tiny ImageNet's layout."""
    cifar = w("r6", "cifar-10-batches-bin")
    os.makedirs(cifar)
    for name in [f"data_batch_{k}.bin" for k in range(1, 6)] + ["test_batch.bin"]:
        with open(os.path.join(cifar, name), "wb") as f:
            f.write(b"".join(bytes([k % 10]) + bytes([k]) * 3072 for k in range(4)))
    d.case("cifar-10-batches-bin: 20 train, 4 test samples",
           [PREP, "build", cifar, w("r6c.db"), "--no-progress"], 0,
           check=lambda: "" if (db_count(w("r6c.db"), "train"), db_count(w("r6c.db"), "test")) == (20, 4) else "counts")
    with open(os.path.join(cifar, "data_batch_3.bin"), "ab") as f:
        f.write(b"cut")
    d.case("a CIFAR batch cut short", [PREP, "build", cifar, w("r6x.db")], 1, needle="(a cut download?)")
    pickles = w("r6p", "cifar-10-batches-py")
    os.makedirs(pickles)
    for name in ("data_batch_1", "test_batch", "batches.meta"):
        open(os.path.join(pickles, name), "wb").close()
    d.case("cifar-10-batches-py: the Python version, refused with the granary.write command",
           [PREP, "build", pickles, w("r6p.db")], 1, needle="granary.write('DB'")
    tiny = w("r6t", "tiny-imagenet-200")
    for wnid in ("n01443537", "n01629819"):
        image_folder(os.path.join(tiny, "train", wnid), classes=("images",), per_class=2)
    image_folder(os.path.join(tiny, "val"), classes=("images",), per_class=3)
    image_folder(os.path.join(tiny, "test"), classes=("images",), per_class=2)
    with open(os.path.join(tiny, "val", "val_annotations.txt"), "w") as f:
        f.write("".join(f"{k}.jpg\t{('n01443537', 'n01629819')[k % 2]}\t0\t0\t9\t9\n" for k in range(3)))
    pets = w("r6n", "train")
    os.makedirs(pets)
    from PIL import Image
    for k in range(4):
        for animal in ("cat", "dog"):
            Image.new("RGB", (20, 16), (k * 50, 90, 20)).save(os.path.join(pets, f"{animal}.{k}.jpg"))
    d.case("dogs-vs-cats' train/cat.0.jpg ...: the refusal names --label-from-name",
           [PREP, "build", pets, w("r6n.db")], 1, needle="their names say a class (cat, dog")
    d.case("--label-from-name: 8 images, classes cat and dog",
           [PREP, "build", pets, w("r6n.db"), "--label-from-name", "--size", "8", "--no-progress"], 0,
           check=lambda: "" if db_count(w("r6n.db")) == 8 else f"{db_count(w('r6n.db'))} samples")
    d.case("tiny-imagenet-200: train 4, val 3 labelled by val_annotations.txt, test/ left out",
           [PREP, "build", tiny, w("r6t.db"), "--size", "8", "--no-progress"], 0,
           check=lambda: "" if (db_count(w("r6t.db"), "train"), db_count(w("r6t.db"), "val")) == (4, 3) else "counts")


def round4_odd_tables(d, w):
    """CSV files as spreadsheets and other tools write them; IDX files that are not what they say."""
    t = w("r4o")
    os.makedirs(t)
    tables = {"inf.csv": ("a,target\n1,0\ninf,1\n2,0\n", ["--missing", "nan"], "is not a number float32 can hold"),
              "cr.csv": ("a,target\r1,0\r2,1\r", [], None),
              "hex.csv": ("a,target\n0x1b,0\n2,1\n", [], "not hexadecimal"),
              "dup.csv": ("a,a,target\n1,2,0\n2,3,1\n", [], "columns 1 and 2 are both named 'a'")}
    for name, (text, flags, needle) in tables.items():
        with open(os.path.join(t, name), "w", newline="") as f:
            f.write(text)
        d.case(f"{name}: {needle or 'CR-only line ends read as rows'}",
               [PREP, "build", os.path.join(t, name), w(f"r4o-{name}.db"), "--label", "target", "--no-progress"] +
               flags, 1 if needle else 0, needle=needle)
    with open(os.path.join(t, "utf16.csv"), "wb") as f:
        f.write("a,target\n1,0\n".encode("utf-16"))
    d.case("a UTF-16 table", [PREP, "build", os.path.join(t, "utf16.csv"), w("r4o-u.db"), "--label", "target"], 1,
           needle="is UTF-16")
    labels = os.path.join(t, "idx200")
    os.makedirs(labels)
    shutil.copy(os.path.join(FASHION, "train-images-idx3-ubyte.gz"), labels)
    run(sh(f"zcat {FASHION}/train-labels-idx1-ubyte.gz > {labels}/train-labels-idx1-ubyte; "
           f"printf '\\310' | dd of={labels}/train-labels-idx1-ubyte bs=1 seek=8 conv=notrunc 2>/dev/null"))
    d.case("IDX labels holding one 200: 201 classes, said", [PREP, "build", labels, w("r4o-200.db"), "--limit",
           "1000", "--no-progress"], 0, needle="labels run 0..200: 201 classes")
    magic = os.path.join(t, "magic")
    os.makedirs(magic)
    shutil.copy(os.path.join(FASHION, "train-labels-idx1-ubyte.gz"), magic)
    run(sh(f"zcat {FASHION}/train-labels-idx1-ubyte.gz > {magic}/train-images-idx3-ubyte"))
    d.case("IDX images file holding labels (the wrong magic)", [PREP, "build", magic, w("r4o-m.db")], 1,
           needle="expected uint8 images")


def round4_builds(d, w):
    """A build's notes in --json, --limit's subset, a db being built, a failed --resume's advice."""
    ten = image_folder(w("r4", "ten"), classes=tuple("abcdefghij"), per_class=3)

    def limited():
        n = db_count(w("r4lim.db"))
        names = {json.loads(run([PREP, "cat", w("r4lim.db"), "--index", str(i), "--json"])[1])["class_name"]
                 for i in range(n)}
        return "" if n == 6 and len(names) == 6 else f"{n} samples of {len(names)} classes"
    d.case("--limit 6 on a folder of 10 classes: 6 classes, not the first two",
           [PREP, "build", ten, w("r4lim.db"), "--limit", "6", "--size", "8", "--no-progress"], 0, check=limited)
    d.case("--json on a failed build prints the error object", sh(f"{PREP} build {w('nonexistent')} "
           f"{w('r4j.db')} --json | grep -q '\"ok\":false' || exit 9; exit 1"), 1, needle="no such folder")
    big = w("r4big.db")
    script = (f"LD_PRELOAD={os.path.join(os.path.dirname(PREP), '..', 'tests', 'libslow_fsync.so')} "
              f"GRANARY_TEST_FSYNC_DELAY_MS=3000 {PREP} build {FASHION} {big} --no-progress >/dev/null 2>&1 & "
              f"for i in $(seq 200); do [ -e {big}.partial ] && break; sleep 0.05; done; "
              f"{PREP} info {big}; code=$?; wait; exit $code")
    d.case("prep info on a db being built names the builder", sh(script), 1, needle="it is being built by process")
    table = w("r4o", "inf.csv")
    run([PREP, "build", table, w("r4r.db"), "--label", "target", "--missing", "nan", "--no-progress"])
    d.case("--resume with other options: one piece of advice",
           [PREP, "build", table, w("r4r.db"), "--label", "target", "--resume", "--no-progress"], 1,
           needle="resume with the same ones, or build again without --resume to replace it")


def class_names(db):
    with open(os.path.join(db, "manifest.json")) as f:
        return json.load(f)["class_names"]


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
