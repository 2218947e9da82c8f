#!/usr/bin/python3
"""A model `train --save`d, used on new image files and table rows from Python:
granary.load_image gives exactly the input training saw for that file (the
db's record of it, scaled and normalised as the model card says), the saved
model classifies the folder's images, and what load_image cannot know is
refused (a feature model, a file that is no image, a model without a card); granary.load_table gives a
table's rows (Kaggle's test.csv, no label, its columns in any order) as the features the model's db held.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/predict_test.py
"""
import io
import os
import shutil
import tempfile
import unittest

import numpy as np

from testenv import PREP, ROOT, TRAIN, run  # puts the build's granary on sys.path
import granary  # noqa: E402
import torch  # noqa: E402


class PredictTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from PIL import Image
        cls.tmp = tempfile.mkdtemp(prefix="granary-predict-test-")
        cls.folder = os.path.join(cls.tmp, "colours")
        rng = np.random.default_rng(6)
        for c, colour in enumerate(((200, 40, 40), (40, 200, 40), (40, 40, 200))):
            os.makedirs(os.path.join(cls.folder, f"class{c}"))
            for k in range(40):  # photographs of other sizes and shapes: resized and cropped by prep
                size = (int(rng.integers(20, 60)), int(rng.integers(20, 60)))
                pixels = np.clip(np.array(colour) + rng.normal(0, 30, size[::-1] + (3,)), 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(os.path.join(cls.folder, f"class{c}", f"{k:02d}.jpg"), quality=90)
        cls.db, cls.model = os.path.join(cls.tmp, "db"), os.path.join(cls.tmp, "model.pt")
        run(PREP, "build", cls.folder, cls.db, "--size", "16", "--no-progress")
        run(TRAIN, "--db", cls.db, "--epochs", "3", "--batch-size", "16", "--mean", "0.5", "--std", "0.25",
            "--save", cls.model)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_an_image_file_is_the_input_training_saw_and_is_classified(self):
        dataset = granary.Dataset(self.db, split="train")
        names = sorted(f"class{c}/{k:02d}.jpg" for c in range(3) for k in range(40))  # the db's order: by path
        model, info = torch.jit.load(self.model), granary.model_info(self.model)
        correct = 0
        for i, name in enumerate(names):
            path = os.path.join(self.folder, name)
            x = granary.load_image(path, self.model)
            stored = dataset[i]["image"].permute(2, 0, 1).float() / 255
            self.assertTrue(torch.allclose(x, (stored - 0.5) / 0.25, rtol=0, atol=1e-5), name)  # a pixel off: 0.016
            with open(path, "rb") as f:  # a file object, and the model card's dict, do the same
                self.assertTrue(torch.equal(granary.load_image(f, info), x))
            correct += info["classes"][int(model(x[None]).argmax())] == name.split("/")[0]
        self.assertGreater(correct / len(names), 0.9)

    def test_the_readmes_example_runs(self):
        import contextlib
        import re
        with open(os.path.join(ROOT, "README.md")) as f:
            block = next(b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S) if "granary.load_image(" in b)
        photo = os.path.join(self.folder, "class2", "07.jpg")
        code = block.replace('"model.pt"', repr(self.model)).replace('"new_photo.jpg"', repr(photo))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, {"torch": torch, "granary": granary})
        self.assertIn(printed.getvalue().strip(), ("class0", "class1", "class2"))

    def test_what_load_image_cannot_know_is_refused(self):
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"notes\.txt: not a JPEG, PNG or WebP image"):
            path = os.path.join(self.tmp, "notes.txt")
            with open(path, "w") as f:
                f.write("not an image")
            granary.load_image(path, self.model)
        table = os.path.join(self.tmp, "t.csv")
        with open(table, "w") as f:
            f.write("a,b,label\n" + "".join(f"{i},{i % 5},{i % 2}\n" for i in range(60)))
        features_model = os.path.join(self.tmp, "mlp.pt")
        run(PREP, "build", table, os.path.join(self.tmp, "t.db"), "--no-progress")
        run(TRAIN, "--db", os.path.join(self.tmp, "t.db"), "--epochs", "1", "--save", features_model)
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"the model takes \[2\] \(features\)"):
            granary.load_image(io.BytesIO(b""), features_model)
        plain = os.path.join(self.tmp, "plain.pt")
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), plain)
        with self.assertRaisesRegex(granary.FormatError, r"no granary.json in it"):
            granary.load_image(io.BytesIO(b""), plain)


class TableTest(unittest.TestCase):
    """granary.load_table: a table's rows as the features the model's db held."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="granary-table-test-")
        cls.train_csv, cls.test_csv = os.path.join(cls.tmp, "train.csv"), os.path.join(cls.tmp, "test.csv")
        rng = np.random.default_rng(3)
        with open(cls.train_csv, "w") as f:
            f.write("PassengerId,Survived,Pclass,Sex,Age,Embarked\n")
            for i in range(300):
                sex, age = ("male", "female")[i % 2], "" if i % 7 == 0 else f"{rng.uniform(1, 70):.1f}"
                f.write(f"{i},{int(sex == 'female')},{1 + i % 3},{sex},{age},{'CQS'[i % 3]}\n")
        with open(cls.test_csv, "w") as f:  # no label, the columns in another order, a port never seen, an age missing
            f.write("Embarked,Sex,PassengerId,Age,Pclass\nS,female,900,30.5,1\nX,male,901,,3\nC,male,902,41,2\n")
        cls.db, cls.model = os.path.join(cls.tmp, "train.db"), os.path.join(cls.tmp, "model.pt")
        run(PREP, "build", cls.train_csv, cls.db, "--label", "Survived", "--drop", "PassengerId", "--missing", "nan",
            "--no-progress")
        run(TRAIN, "--db", cls.db, "--epochs", "20", "--lr", "0.01", "--ranks", "1", "--save", cls.model)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_a_tables_rows_are_the_features_its_db_holds(self):
        x, rows = granary.load_table(self.train_csv, self.model)
        dataset = granary.Dataset(self.db)
        self.assertEqual(x.shape, (300, len(granary.model_info(self.model)["input_names"])))
        for i in range(300):  # the db keeps the table's order
            self.assertTrue(torch.equal(torch.nan_to_num(x[i], -1.0),
                                        torch.nan_to_num(dataset[i]["features"], -1.0)), i)
        self.assertEqual(rows[5]["PassengerId"], "5")

    def test_new_rows_are_predicted_and_what_the_db_never_had_is_said(self):
        import contextlib
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            x, rows = granary.load_table(self.test_csv, self.model)
        info = granary.model_info(self.model)
        names = info["input_names"]
        self.assertEqual(names, ["Pclass", "Sex=female", "Sex=male", "Age", "Embarked=C", "Embarked=Q", "Embarked=S"])
        self.assertEqual(x[0].tolist(), [1.0, 1.0, 0.0, 30.5, 0.0, 0.0, 1.0])  # the db's order, not test.csv's
        self.assertTrue(all(np.isnan(v) for v in x[1, 4:].tolist()))  # 'X': no port the db had
        self.assertTrue(np.isnan(x[1, 3].item()))
        self.assertIn("values taken as NaN (each its feature's mean to a model train saved): 1 missing in 'Age', "
                      "1 in 'Embarked' none of its categories", said.getvalue())
        predicted = [info["classes"][k] for k in torch.jit.load(self.model)(x).argmax(1).tolist()]
        self.assertEqual([r["PassengerId"] for r in rows], ["900", "901", "902"])
        self.assertEqual(predicted, ["1", "0", "0"])  # survived as the table's rule says: the women

    def test_the_readmes_example_runs(self):
        import re
        with open(os.path.join(ROOT, "README.md")) as f:
            block = next(b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S) if "granary.load_table(" in b)
        out = os.path.join(self.tmp, "submission.csv")
        code = (block.replace('"model.pt"', repr(self.model)).replace('"test.csv"', repr(self.test_csv))
                .replace('"submission.csv"', repr(out)))
        exec(code, {"torch": torch, "granary": granary})
        with open(out) as f:
            self.assertEqual(f.read().splitlines(), ["PassengerId,Survived", "900,1", "901,0", "902,0"])

    def test_a_title_above_the_header_is_left_out_and_said(self):
        import contextlib
        titled = os.path.join(self.tmp, "titled.csv")
        with open(titled, "w") as f:  # a spreadsheet's export with its title above the table
            f.write("Passengers 1912\n\nPclass,Sex,Age,Embarked\n1,female,30.5,S\n3,male,22,C\n")
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            x, rows = granary.load_table(titled, self.model)
        self.assertEqual(x[0].tolist(), [1.0, 1.0, 0.0, 30.5, 0.0, 0.0, 1.0])
        self.assertEqual([r["Age"] for r in rows], ["30.5", "22"])
        self.assertIn(f"granary.load_table: {titled}: lines 1-2 ('Passengers 1912') are no row of the table below "
                      f"(its 4 columns are separated by ','): left out", said.getvalue())

    def test_a_table_without_a_header_and_a_libsvm_file_are_read_as_their_dbs_were(self):
        import contextlib
        data, libsvm = os.path.join(self.tmp, "iris.data"), os.path.join(self.tmp, "a9a")
        with open(data, "w") as f:  # UCI's iris.data: no header
            f.write("".join(f"{4 + i % 3}.{i % 10},{2 + i % 2}.5,{'ab'[i % 2]}\n" for i in range(60)))
        with open(libsvm, "w") as f:
            f.write("".join(f"{'+1' if i % 2 else '-1'} {1 + i % 5}:1 9:{i % 3}\n" for i in range(60)))
        models = []
        for raw, flags in ((data, ["--no-header", "--label", "3"]), (libsvm, [])):
            db, model = raw + ".db", raw + ".pt"
            run(PREP, "build", raw, db, "--no-progress", *flags)
            run(TRAIN, "--db", db, "--epochs", "1", "--ranks", "1", "--save", model)
            models.append(model)
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            x, rows = granary.load_table(data, models[0])
        self.assertEqual(x.shape, (60, 2))
        self.assertEqual(x[0].tolist(), [4.0, 2.5])  # the first row is data
        self.assertEqual(rows[1], {"1": "5.1", "2": "3.5", "3": "b"})
        self.assertIn("read without a header, its columns numbered 1..3", said.getvalue())
        held_out = libsvm + ".t"  # its largest index 4, the db's 9
        with open(held_out, "w") as f:
            f.write("-1 2:1 4:0.5\n+1 1:1\n")
        x, rows = granary.load_table(held_out, models[1])
        self.assertEqual(x.shape, (2, 9))
        self.assertEqual(x[0].tolist(), [0, 1, 0, 0.5, 0, 0, 0, 0, 0])
        self.assertEqual([r["label"] for r in rows], ["-1", "1"])
        with open(held_out, "w") as f:
            f.write("-1 2:1 12:1\n")
        with self.assertRaisesRegex(granary.InvalidArgumentError,
                                    r"a9a\.t:1: feature index 12 is outside the db's 1\.\.9"):
            granary.load_table(held_out, models[1])

    def test_what_load_table_cannot_read_is_refused(self):
        short = os.path.join(self.tmp, "short.csv")
        with open(short, "w") as f:
            f.write("Pclass,Sex\n1,male\n")
        with self.assertRaisesRegex(granary.InvalidArgumentError,
                                    r"short\.csv: lacks the column\(s\) of model .*model\.pt's feature\(s\) 'Age', "
                                    r"'Embarked=C'"):
            granary.load_table(short, self.model)
        bad = os.path.join(self.tmp, "bad.csv")
        with open(bad, "w") as f:
            f.write("Pclass,Sex,Age,Embarked\n1,male,old,S\n")
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"bad\.csv:2: column 'Age': 'old' is not a number"):
            granary.load_table(bad, self.model)
        images = os.path.join(self.tmp, "images.pt")
        run(PREP, "build", "/usr/share/datasets/fashion-mnist", os.path.join(self.tmp, "f.db"), "--limit", "64",
            "--no-progress")
        run(TRAIN, "--db", os.path.join(self.tmp, "f.db"), "--epochs", "1", "--save", images)
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"names no table columns: it reads image"):
            granary.load_table(self.test_csv, images)


if __name__ == "__main__":
    unittest.main()
