"""Round 20 of the hostile drill (twenty-eighth session): tables as numpy and
UCI save them (fields between runs of spaces, numpy.savetxt's "# " before a
header, a line above the table that is none of its rows, a test file whose
labels carry a '.' the training file's lack) and LIBSVM files (a9a and a9a.t,
multi-label), ARFF files and WebDataset shards, each built and trained as a
newcomer would."""
import io
import json
import os
import random
import tarfile

from drill_cases.common import PREP, TRAIN, run


VIRGINICA = "'Iris virginica'"  # an ARFF value with a space, quoted as Weka writes it


def info(db):
    """prep info --json of a db."""
    _, out, _, _, _ = run([PREP, "info", db, "--json"])
    return json.loads(out)


def adult_rows(rnd, n, period):
    """Lines as UCI's adult.data writes them (", " between fields, '?' missing), the label with a '.' if `period`."""
    rows = []
    for _ in range(n):
        age, hours = rnd.randint(17, 90), rnd.randint(1, 99)
        label = ">50K" if age > 40 and hours > 40 else "<=50K"
        rows.append(f"{age}, {rnd.choice(['Private', 'State-gov', '?'])}, {hours}, {label}{'.' if period else ''}\n")
    return "".join(rows)


def a9a_lines(rnd, n, largest):
    """LIBSVM lines of binary features up to index `largest`, +1 where feature 3 or 40 is set."""
    lines = []
    for _ in range(n):
        features = sorted(rnd.sample(range(1, largest + 1), 14))
        label = "+1" if 3 in features or 40 in features else "-1"
        lines.append(label + " " + " ".join(f"{i}:1" for i in features) + " \n")
    return "".join(lines)


def shard(path, png, labels):
    """A WebDataset shard: KEY.png beside KEY.cls for each label, as its ShardWriter writes them."""
    with tarfile.open(path, "w") as tar:
        for k, label in enumerate(labels):
            for name, data in ((f"{k:06d}.png", png), (f"{k:06d}.cls", str(label).encode())):
                member = tarfile.TarInfo(name)
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))


def round20(d, w):
    """Round 20's cases."""
    rnd = random.Random(20)
    with open(w("r20savetxt.txt"), "w") as f:  # np.savetxt(..., header="a b label")
        f.write("# a b label\n" + "".join(f"{x:.18e} {rnd.gauss(0, 1):.18e} {float(x > 0):.18e}\n"
                                          for x in (rnd.gauss(0, 1) for _ in range(200))))
    d.case("prep build of numpy.savetxt's table (fields between spaces, '# ' before the header): its columns named",
           [PREP, "build", w("r20savetxt.txt"), w("r20savetxt.db"), "--no-progress"], 0,
           needle="the '#' before the header (numpy.savetxt's comment mark) left out",
           check=lambda: "" if info(w("r20savetxt.db"))["element_names"]["features"] == ["a", "b"] else "not a, b")
    with open(w("r20housing.data"), "w") as f:  # UCI's housing.data: no header, aligned by spaces
        f.write("".join(f" {rnd.uniform(0, 1):.5f}  {rnd.uniform(0, 100):6.2f}   {rnd.uniform(5, 50):5.2f}\n"
                        for _ in range(300)))
    d.case("prep build --no-header --label 3 --regression of UCI's housing.data (aligned by runs of spaces)",
           [PREP, "build", w("r20housing.data"), w("r20housing.db"), "--no-header", "--label", "3", "--regression",
            "--val-fraction", "0.2", "--no-progress"], 0, needle="columns separated by whitespace")
    d.case("... and train of it: an MLP scored in RMSE",
           [TRAIN, "--db", w("r20housing.db"), "--ranks", "1", "--epochs", "2"], 0, report=True, needle="test_rmse")
    adult = w("r20adult")
    os.makedirs(adult, exist_ok=True)
    with open(os.path.join(adult, "train.csv"), "w") as f:
        f.write(adult_rows(rnd, 400, period=False))
    with open(os.path.join(adult, "test.csv"), "w") as f:
        f.write("|1x3 Cross validator\n" + adult_rows(rnd, 150, period=True))
    d.case("prep build of adult.data and adult.test as train.csv, test.csv: the first line left out, '<=50K.' read as "
           "'<=50K'", [PREP, "build", adult, w("r20adult.db"), "--no-header", "--label", "4", "--missing", "nan",
                       "--no-progress"], 0, needle="is no row of the table below",
           check=lambda: "" if info(w("r20adult.db"))["class_names"] == ["<=50K", ">50K"] else "not two classes")
    run([PREP, "build", os.path.join(adult, "train.csv"), w("r20adtr.db"), "--no-header", "--label", "4",
         "--missing", "nan", "--no-progress"])
    run([TRAIN, "--db", w("r20adtr.db"), "--ranks", "1", "--epochs", "3", "--save", w("r20adult.pt")])
    d.case("prep build adult.test --like the adult.data db: its labels read as the db's classes",
           [PREP, "build", os.path.join(adult, "test.csv"), w("r20adte.db"), "--like", w("r20adtr.db"),
            "--no-progress"], 0, needle="'<=50K.', '>50K.' read as '<=50K', '>50K'")
    d.case("... and the saved model scored on it (was: every row rejected, no db)",
           [TRAIN, "--db", w("r20adte.db"), "--model", w("r20adult.pt"), "--eval-only", "--eval-split", "train"], 0,
           report=True, needle="150 samples  acc")
    with open(w("r20a9a"), "w") as f:
        f.write(a9a_lines(rnd, 1500, 123))
    with open(w("r20a9a.t"), "w") as f:
        f.write(a9a_lines(rnd, 500, 122))
    d.case("prep build of LIBSVM's a9a (label, then index:value): its 123 features dense",
           [PREP, "build", w("r20a9a"), w("r20a9a.db"), "--val-fraction", "0.2", "--no-progress"], 0,
           needle="a LIBSVM file: 123 features (indices 1..123",
           check=lambda: "" if info(w("r20a9a.db"))["schema"]["fields"][0]["shape"] == [123] else "not 123")
    run([TRAIN, "--db", w("r20a9a.db"), "--ranks", "1", "--epochs", "3", "--save", w("r20a9a.pt")])
    d.case("prep build of a9a.t (largest index 122) --like the a9a db: 123 features, as the model reads",
           [PREP, "build", w("r20a9a.t"), w("r20a9at.db"), "--like", w("r20a9a.db"), "--no-progress"], 0,
           check=lambda: "" if info(w("r20a9at.db"))["schema"]["fields"][0]["shape"] == [123] else "not 123")
    d.case("... and the a9a model scored on it",
           [TRAIN, "--db", w("r20a9at.db"), "--model", w("r20a9a.pt"), "--eval-only", "--eval-split", "train"], 0,
           report=True, needle="500 samples  acc")
    with open(w("r20iris.arff"), "w") as f:  # as OpenML serves it
        f.write("% 1. Title: Iris Plants Database\n@RELATION iris\n@ATTRIBUTE 'sepal length' REAL\n"
                "@ATTRIBUTE petalwidth REAL\n@ATTRIBUTE species {Iris-setosa,'Iris virginica'}\n@DATA\n" +
                "".join(f"{rnd.uniform(4, 6):.1f},{w_:.1f},{'Iris-setosa' if w_ < 1 else VIRGINICA}\n"
                        for w_ in (rnd.uniform(0.1, 2.5) for _ in range(150))))
    d.case("prep build of OpenML's iris.arff (@attribute lines, then @data): its attributes the columns, the last "
           "the label", [PREP, "build", w("r20iris.arff"), w("r20iris.db"), "--val-fraction", "0.2", "--no-progress"],
           0, needle="label column 'species' (the ARFF file's last attribute",
           check=lambda: "" if info(w("r20iris.db"))["class_names"] == ["Iris virginica", "Iris-setosa"] else "classes")
    d.case("... and train of it", [TRAIN, "--db", w("r20iris.db"), "--ranks", "1", "--epochs", "2"], 0, report=True,
           needle="test_acc")
    with open(w("r20multi"), "w") as f:
        f.write("1,3 1:0.5 2:1\n2 1:1\n")
    d.case("prep build of a multi-label LIBSVM file: refused, saying what writes it",
           [PREP, "build", w("r20multi"), w("r20multi.db"), "--no-progress"], 1,
           needle="several labels a line (multi-label) are not read")
    run([PREP, "build", "/usr/share/datasets/fashion-mnist", w("r20one.db"), "--limit", "1", "--no-progress"])
    run([PREP, "cat", w("r20one.db"), "0", "--png", w("r20.png")])
    with open(w("r20.png"), "rb") as f:
        png = f.read()
    os.makedirs(w("r20wds"), exist_ok=True)
    shard(w("r20wds", "shard-train-000000.tar"), png, [0, 11, 2, 0])
    shard(w("r20wds", "shard-val-000000.tar"), png, [11, 2])

    def classes_by_label():  # the .cls integers are class indices, as a table's integer labels are
        built = info(w("r20wds.db"))
        names, splits = built["class_names"], [s["name"] for s in built["splits"]]
        return "" if names == [str(k) for k in range(12)] and splits == ["train", "val"] else f"{names} {splits}"

    d.case("prep build of a folder of WebDataset shards (KEY.png beside KEY.cls, split by their names): read in place",
           [PREP, "build", w("r20wds"), w("r20wds.db"), "--size", "28", "--no-progress"], 0,
           needle="2 WebDataset shard(s) of 6 samples", check=classes_by_label)
    d.case("... and train of it", [TRAIN, "--db", w("r20wds.db"), "--ranks", "1", "--epochs", "1"], 0, report=True,
           needle="test_acc")
