#!/usr/bin/python3
"""Labels as Python datasets hold them, and writes as notebooks leave them:
class names (str) written as their index in classes=, which they need; a
one-element array label written as its value; a one-hot or several-valued
label warned of at the first sample, on the user's line, and named by train
and granary.Loader with the db's fields; classes with no sample (labels
counted from 1), classes written as floats and image files' bytes warned of; a granary.Writer a notebook cell
left open (its loop raised before close()) named by the next Writer of its
db, which takes its place with resume=True or overwrite=True; a split a db
lacks named with those it has, and a slice of a Dataset with the Subset
that takes it; a path from home ("~/data.db") taken as the shell takes it.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/labels_test.py
"""
import io
import os
import subprocess
import unittest
import unittest.mock
import warnings

import numpy as np
import torch

from testenv import PREP, TRAIN, FolderTest, run  # puts the build's granary on sys.path
import granary  # noqa: E402

NAMES = ["cat", "dog", "bird"]


def images_named(count):
    """(image, class name) samples: a dataset whose labels are names, as a table of file,label gives them."""
    return [(np.full((8, 8, 3), k % 3 * 80, np.uint8), NAMES[k % 3]) for k in range(count)]


class LabelsTest(FolderTest):
    def test_class_names_are_written_as_their_index_in_classes(self):
        samples = images_named(300)
        for workers in (1, 2):
            db = self.path(f"names{workers}.db")
            granary.write(db, samples, classes=sorted(NAMES), workers=workers, progress=False)
            about = granary.describe(db)
            self.assertEqual(about["classes"], ["bird", "cat", "dog"])
            self.assertEqual(about["target_field"], "target")
            dataset = granary.Dataset(db, as_tuple=True)
            self.assertEqual([int(dataset[k][1]) for k in range(6)], [1, 2, 0, 1, 2, 0])
        trained = run(TRAIN, "--db", self.path("names2.db"), "--ranks", "1", "--epochs", "2", "--json")
        self.assertGreater(trained.stdout.count('"epoch"'), 1)
        # A dataset's own .classes (torchvision's attribute) is its classes=; a Writer takes them too.
        class Named:
            classes = NAMES

            def __len__(self):
                return 9

            def __getitem__(self, k):
                return {"image": np.zeros((4, 4), np.uint8), "label": NAMES[k % 3]}
        granary.write(self.path("own.db"), Named(), progress=False)
        self.assertEqual([int(s["label"]) for s in granary.Dataset(self.path("own.db"))][:3], [0, 1, 2])
        with granary.Writer(self.path("writer.db"), classes=NAMES, progress=False) as w:
            for k in range(6):
                w.write({"x": np.zeros(2, np.float32), "label": NAMES[-1 - k % 3]})
        self.assertEqual([int(s["label"]) for s in granary.Dataset(self.path("writer.db"))], [2, 1, 0, 2, 1, 0])

    def test_class_names_without_classes_or_outside_them_are_refused_by_sample(self):
        with self.assertRaisesRegex(granary.InvalidArgumentError,
                                    r"sample 0 of split 'train': field 'target' is the str 'cat', a class name: "
                                    r"pass classes=\[\.\.\.\], the class names in label order"):
            granary.write(self.path("a.db"), images_named(3), progress=False)
        stray = images_named(5) + [(np.zeros((8, 8, 3), np.uint8), "horse")]
        with self.assertRaisesRegex(granary.InvalidArgumentError,
                                    r"sample 5 of split 'train': field 'target' is 'horse', which classes= does not "
                                    r"name \(3 classes: 'cat', 'dog', 'bird'\)"):
            granary.write(self.path("b.db"), stray, classes=NAMES, progress=False)
        mixed = images_named(2) + [(np.zeros((8, 8, 3), np.uint8), 1)]
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"sample 2 .* holds class names \(str\), not int 1"):
            granary.write(self.path("c.db"), mixed, classes=NAMES, progress=False)
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"classes=: names 'cat' twice"):
            granary.write(self.path("d.db"), images_named(3), classes=["cat", "dog", "cat"], progress=False)
        for name in "abcd":
            self.assertFalse(os.path.exists(self.path(f"{name}.db")))
        # A str that is no label (a caption beside an int label) stays text.
        granary.write(self.path("caption.db"), [{"caption": "a cat", "label": 0}, {"caption": "a dog", "label": 1}],
                      progress=False)
        self.assertEqual(granary.Dataset(self.path("caption.db"))[1]["caption"], "a dog")

    def test_classes_without_a_sample_are_warned_of_and_noted(self):
        # Labels counted from 1 (MATLAB's, SVHN's, Oxford Flowers'): class 0 would be an output no sample teaches.
        one_based = [(np.full(4, k, np.float32), 1 + k % 10) for k in range(200)]
        for workers in (1, 2):
            db = self.path(f"one_based{workers}.db")
            with self.assertWarnsRegex(UserWarning, r"labels run 1..10, so class 0 has no sample \(labels counted "
                                                    r"from 1\? write label - 1") as said:
                granary.write(db, one_based, workers=workers, progress=False)
            self.assertEqual(said.filename, __file__)
            self.assertEqual(granary.describe(db)["classes"], [str(k) for k in range(11)])
            self.assertIn("labels run 1..10, so class 0 has no sample", run(PREP, "info", db).stdout)
        ids = [(np.zeros(4, np.float32), [3, 1000][k % 2]) for k in range(40)]
        with self.assertWarnsRegex(UserWarning, r"2 distinct labels among 0..1000: 999 of the 1001 classes have no "
                                                r"sample \(0, 1, 2, 4, 5, 6, 7, 8, \.\.\.\); write the labels as "
                                                r"0..1 \(np.unique"):
            granary.write(self.path("ids.db"), ids, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # named classes, and labels 0..N-1, are as meant
            granary.write(self.path("named.db"), one_based, classes=[str(k) for k in range(11)], progress=False)
            granary.write(self.path("zero_based.db"), [(x, y - 1) for x, y in one_based], progress=False)

    def test_classes_written_as_floats_are_warned_of(self):
        # TensorDataset(X, y.float()), as a BCE loss wants its targets: a regression on 0 and 1, said so.
        x = torch.randn(200, 4)
        for workers in (1, 2):
            with self.assertWarnsRegex(UserWarning, r"label 'target' is float32, so it was written as a number to "
                                                    r"predict .* but its values are 2 integers \(0, 1\); if they "
                                                    r"are classes, write them as ints"):
                granary.write(self.path(f"bce{workers}.db"), torch.utils.data.TensorDataset(x, (x[:, 0] > 0).float()),
                              workers=workers, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a value to predict, or many integers (a count), is as meant
            granary.write(self.path("price.db"), torch.utils.data.TensorDataset(x, x[:, 1] * 3.3), progress=False)
            granary.write(self.path("count.db"), torch.utils.data.TensorDataset(x, torch.arange(200.0)),
                          progress=False)

    def test_a_one_element_label_is_written_as_its_value(self):
        # A table's rows (df[["label"]].to_numpy()) give [3]; so does y.unsqueeze(0), and a price as [value].
        rows = [(np.full(4, k, np.float32), np.array([k % 3])) for k in range(60)]
        granary.write(self.path("classes.db"), rows, progress=False)
        about = granary.describe(self.path("classes.db"))
        self.assertEqual((about["target_field"], about["num_classes"]), ("target", 3))
        self.assertEqual([int(s[1]) for s in granary.Dataset(self.path("classes.db"), as_tuple=True)][:4], [0, 1, 2, 0])
        prices = [(np.full(4, k, np.float32), np.array([k * 1.5], np.float32)) for k in range(60)]
        granary.write(self.path("prices.db"), prices, progress=False)
        x, y = next(iter(granary.Loader(self.path("prices.db"), batch_size=8, shuffle=False, world=1, rank=0)))
        self.assertEqual(list(y.shape), [8])
        self.assertAlmostEqual(float(y[3]), 4.5)
        # A shape schema= declares is kept as declared (and, not being a scalar, warned of as no label).
        with self.assertWarnsRegex(UserWarning, r"field 'target' is int64 \[1\], not a scalar"):
            granary.write(self.path("declared.db"), rows, schema={"input": ("float32", [4]), "target": ("int64", [1])},
                          progress=False)
        self.assertEqual(granary.describe(self.path("declared.db"))["fields"][1]["shape"], [1])

    def test_a_one_hot_or_several_valued_label_is_warned_of_and_named_where_it_is_read(self):
        one_hot = [(np.zeros(5, np.float32), np.eye(3, dtype=np.float32)[k % 3]) for k in range(30)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            granary.write(self.path("onehot.db"), one_hot, progress=False)  # the user's line
        said = [w for w in caught if "one-hot" in str(w.message)]
        self.assertEqual(len(said), 1, [str(w.message) for w in caught])
        self.assertEqual(said[0].filename, __file__)
        self.assertIn("field 'target' is float32 [3], a one-hot vector (of class 0): the db will have no label for "
                      "train and granary.Loader", str(said[0].message))
        self.assertIn("int(y.argmax())", str(said[0].message))
        several = [(np.zeros(5, np.float32), np.array([1, 0, 1])) for _ in range(30)]
        with self.assertWarnsRegex(UserWarning, r"field 'target' is int64 \[3\], not a scalar"):
            granary.write(self.path("several.db"), several, progress=False)
        needle = (r"has no label field to train on \(its fields: input float32 \[5\], target float32 \[3\]\): a label "
                  r"is one integer class or one float value a sample; granary.write takes the one integer scalar field")
        with self.assertRaisesRegex(granary.InvalidArgumentError, needle):
            granary.Loader(self.path("onehot.db"), batch_size=4)
        trained = subprocess.run([TRAIN, "--db", self.path("onehot.db"), "--ranks", "1"], capture_output=True,
                                 text=True)
        self.assertNotEqual(trained.returncode, 0)
        self.assertRegex(trained.stderr, needle)
        self.assertEqual(len(granary.Dataset(self.path("onehot.db"))), 30)  # the vectors are kept, and read

    def test_image_files_bytes_are_warned_of_saying_how_to_write_pixels(self):
        from PIL import Image
        encoded = io.BytesIO()
        Image.new("RGB", (16, 16), (200, 0, 0)).save(encoded, "PNG")  # as a web dataset's shard or Parquet keeps it
        with self.assertWarnsRegex(UserWarning, r"field 'png' holds PNG files' bytes: stored as they are, which train "
                                                r"and granary.Loader .* cannot batch. Decode and resize them"):
            granary.write(self.path("png.db"), [{"png": encoded.getvalue(), "label": 1}] * 3, progress=False)
        self.assertEqual(granary.Dataset(self.path("png.db"))[0]["png"].numpy().tobytes(), encoded.getvalue())
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # other bytes are bytes
            granary.write(self.path("bytes.db"), [{"blob": b"RIFF....WAVE", "label": k} for k in range(2)],
                          progress=False)

    def cell(self, db, fail_at=None, **options):
        """A notebook cell: a Writer made without `with`, which a bug in the loop leaves open."""
        w = granary.Writer(db, progress=False, dictionary="off", **options)  # journaled from the start
        for k in range(2000):
            if k == fail_at:
                raise ValueError("a bug in the cell's loop")
            w.write({"x": np.random.default_rng(k).random(2048, np.float32), "label": k % 3})  # 8 KiB
        return w.close()

    def test_a_writer_a_notebook_left_open_is_named_and_taken_over_on_request(self):
        db = self.path("cell.db")
        try:
            self.cell(db, fail_at=1500)
        except ValueError as e:
            left_open = e.__traceback__  # as IPython keeps sys.last_traceback: the Writer stays alive
        line = f"{__file__}:{self.cell.__code__.co_firstlineno + 6}"  # the cell's w.write(...)
        with self.assertRaisesRegex(granary.FailedPreconditionError,
                                    f"cell.db: a granary.Writer of it that this process opened at {line} is still "
                                    r"open \(its loop raised before close\(\)\?\): call its abort\(\), or close\(\) "
                                    r"to publish what it wrote; or write again with resume=True to continue it, or "
                                    r"overwrite=True to start afresh"):
            self.cell(db)
        earlier = left_open.tb_next.tb_frame.f_locals["w"]
        with self.assertWarnsRegex(UserWarning, f"the granary.Writer of it opened at {line} was left open; it is "
                                                r"ended, and this write continues what it committed"):
            summary = self.cell(db, resume=True)
        self.assertEqual(summary["splits"], [("train", 2000)])
        self.assertGreater(summary["resumed_samples"], 0)  # the first 1,024 (8 MB) were committed a few MB at a time
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"cell.db: the writer was ended by the Writer of "
                                                                  r"the same db opened at"):
            earlier.write({"x": np.zeros(2048, np.float32), "label": 0})
        with self.assertRaisesRegex(granary.InvalidArgumentError, "the writer was ended"):
            earlier.close()
        last = np.random.default_rng(1999).random(2048, np.float32)
        self.assertTrue(np.array_equal(granary.Dataset(db)[1999]["x"], last))
        # overwrite=True starts afresh; a Writer closed or aborted is no obstacle.
        try:
            self.cell(self.path("again.db"), fail_at=10)
        except ValueError as e:
            left_open = e.__traceback__
        with self.assertWarnsRegex(UserWarning, "this write starts afresh"):
            self.assertEqual(self.cell(self.path("again.db"), overwrite=True)["resumed_samples"], 0)
        aborted = granary.Writer(self.path("again2.db"), progress=False)
        aborted.write({"x": np.zeros(2048, np.float32), "label": 0})
        aborted.abort()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            self.cell(self.path("again2.db"))

    def test_a_path_from_home_is_taken_as_the_shell_takes_it(self):
        home = self.path("home")
        os.makedirs(home)
        with unittest.mock.patch.dict(os.environ, {"HOME": home}):
            granary.write("~/names.db", images_named(6), classes=NAMES, progress=False)
            self.assertEqual(len(granary.Dataset("~/names.db")), 6)
            self.assertEqual(len(granary.Loader("~/names.db", batch_size=2, world=1, rank=0).dataset), 6)
        self.assertTrue(os.path.isdir(os.path.join(home, "names.db")))
        self.assertFalse(os.path.exists("~"))

    def test_a_split_the_db_lacks_or_a_slice_is_named_with_what_to_ask_instead(self):
        db = self.path("splits.db")
        granary.write(db, {"train": images_named(6), "test": images_named(3)}, classes=NAMES, progress=False)
        for backend in ("native", "python"):
            with self.assertRaisesRegex(granary.NotFoundError, r"no split 'val' \(its splits: (train, test|test, "
                                                               r"train)\)"):
                granary.Dataset(db, split="val", backend=backend)
        with self.assertRaisesRegex(granary.NotFoundError, r"no split 'validation' \(its splits: train, test\)"):
            granary.Loader(db, split="validation", batch_size=2)
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"shuffle must be 'full', 'block', 'none' \(or "
                                                                  r"True, False\), not 'yes'"):
            granary.Loader(db, shuffle="yes", batch_size=2)
        dataset = granary.Dataset(db)
        with self.assertRaisesRegex(TypeError, r"takes one index, not a slice \[2:5\]: torch.utils.data.Subset\("
                                               r"dataset, range\(len\(dataset\)\)\[2:5\]\) is that part of it"):
            dataset[2:5]
        part = torch.utils.data.Subset(dataset, range(len(dataset))[2:5])  # as the error says
        self.assertEqual([int(s["target"]) for s in part], [2, 0, 1])


if __name__ == "__main__":
    unittest.main()
