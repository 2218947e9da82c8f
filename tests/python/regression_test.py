#!/usr/bin/python3
"""A number to predict, from Python: granary.write of (features, float)
samples stores a float32 regression target that `train` fits with no flags;
granary.Loader batches it as float32 (a CSV db of prep build --regression
too), granary.Dataset hands it over as it is, the saved model predicts in the
target's units, and what is no regression target is refused by name.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/regression_test.py
"""
import json
import os
import shutil
import tempfile
import unittest

import numpy as np

from testenv import PREP, TRAIN, run  # puts the build's granary on sys.path
import granary  # noqa: E402
import torch  # noqa: E402


def samples(x, y):
    return [(row, float(value)) for row, value in zip(x, y)]


class RegressionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="granary-regression-test-")
        rng = np.random.default_rng(3)
        cls.x = rng.normal(size=(1500, 4)).astype(np.float32)
        cls.y = cls.x @ np.array([3.0, -2.0, 0.5, 1.0]) * 100 + 5000 + rng.normal(0, 5, 1500)
        cls.db = os.path.join(cls.tmp, "db")
        granary.write(cls.db, {"train": samples(cls.x[:1200], cls.y[:1200]),
                               "test": samples(cls.x[1200:], cls.y[1200:])}, progress=False)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_a_float_target_is_a_regression_db_that_train_fits(self):
        info = granary.describe(self.db)
        self.assertEqual(info["label_field"], "target")
        self.assertEqual(info["num_classes"], 0)
        model = os.path.join(self.tmp, "m.pt")
        out = run(TRAIN, "--db", self.db, "--epochs", "15", "--dropout", "0", "--lr", "0.003", "--save", model,
                  "--json").stdout
        last = json.loads(out)["epochs"][-1]
        self.assertGreater(last["test_r2"], 0.99, last)
        self.assertEqual(granary.model_info(model)["regression_target"], "target")
        # The saved model's one output is the price itself, not a standardised value.
        x, y = next(iter(granary.Loader(self.db, split="test", batch_size=300, shuffle="none")))
        self.assertEqual((x.dtype, y.dtype, tuple(y.shape)), (torch.float32, torch.float32, (300,)))
        np.testing.assert_allclose(y.numpy(), self.y[1200:1500].astype(np.float32))
        with torch.no_grad():
            predicted = torch.jit.load(model)(x).flatten()
        rmse = float(((predicted - y) ** 2).mean().sqrt())
        self.assertAlmostEqual(rmse, last["test_rmse"], delta=0.01 * last["test_rmse"])

    def test_dataset_and_a_prep_db_give_the_same_values(self):
        table = os.path.join(self.tmp, "t.csv")
        with open(table, "w") as f:
            f.write("a,b,c,d,price\n")
            for row, value in zip(self.x[:50], self.y[:50]):
                f.write(",".join(f"{v:.9g}" for v in row) + f",{value:.9g}\n")
        csv_db = os.path.join(self.tmp, "csv-db")
        run(PREP, "build", table, csv_db, "--label", "price", "--regression")
        x, y = next(iter(granary.Loader(csv_db, batch_size=50, shuffle="none")))
        np.testing.assert_allclose(y.numpy(), self.y[:50].astype(np.float32))
        features, target = granary.Dataset(self.db, as_tuple=True)[7]
        self.assertEqual(float(target), float(np.float32(self.y[7])))
        np.testing.assert_array_equal(np.asarray(features), self.x[7])

    def test_workers_write_the_same_values_and_name_a_bad_one(self):
        class Houses(torch.utils.data.Dataset):  # map-style, as a user's own dataset is
            def __init__(self, x, y):
                self.x, self.y = x, y

            def __len__(self):
                return len(self.y)

            def __getitem__(self, i):
                return self.x[i], float(self.y[i])

        db = os.path.join(self.tmp, "workers-db")
        granary.write(db, Houses(self.x[:200], self.y[:200]), workers=2, progress=False)
        _, y = next(iter(granary.Loader(db, batch_size=200, shuffle="none")))
        np.testing.assert_allclose(y.numpy(), self.y[:200].astype(np.float32))
        y = self.y[:200].copy()
        y[123] = np.inf
        with self.assertRaisesRegex(granary.Error, "sample 123 of split 'train': target is inf"):
            granary.write(os.path.join(self.tmp, "inf-db"), Houses(self.x[:200], y), workers=2, progress=False)

    def test_images_with_a_value_to_predict_train_the_convnet(self):
        # 16 x 16 gray images whose target is their mean brightness: a regression the convnet learns at once.
        rng = np.random.default_rng(5)
        levels = rng.uniform(20, 230, 700)
        images = [np.clip(level + rng.normal(0, 20, (16, 16, 1)), 0, 255).astype(np.uint8) for level in levels]
        db = os.path.join(self.tmp, "brightness-db")
        granary.write(db, {"train": [(image, float(image.mean())) for image in images[:600]],
                           "test": [(image, float(image.mean())) for image in images[600:]]}, progress=False)
        model = os.path.join(self.tmp, "brightness.pt")
        out = run(TRAIN, "--db", db, "--epochs", "6", "--lr", "0.003", "--save", model, "--json").stdout
        report = json.loads(out)
        self.assertEqual(report["config"]["model"]["name"], "convnet")
        self.assertGreater(report["epochs"][-1]["test_r2"], 0.95, report["epochs"][-1])
        x, y = next(iter(granary.Loader(db, split="test", batch_size=100, shuffle="none")))
        with torch.no_grad():
            predicted = torch.jit.load(model)(x).flatten()  # in the target's units: brightness 0-255
        rmse = float(((predicted - y) ** 2).mean().sqrt())
        self.assertAlmostEqual(rmse, report["epochs"][-1]["test_rmse"], delta=0.01 * rmse + 1e-3)

    def test_a_users_torchscript_model_may_return_n_or_n_by_1_values(self):
        # PyTorch scripts often squeeze the one output for MSELoss: train takes N as it takes N x 1.
        class Linear(torch.nn.Module):
            def __init__(self, squeeze: bool):
                super().__init__()
                self.layer = torch.nn.Linear(4, 1)
                self.squeeze = squeeze

            def forward(self, x):
                y = self.layer(x)
                return y.squeeze(1) if self.squeeze else y

        epochs = {}
        for squeeze in (True, False):
            model = os.path.join(self.tmp, f"linear-{squeeze}.pt")
            torch.manual_seed(0)  # the same weights either way
            torch.jit.script(Linear(squeeze)).save(model)
            out = run(TRAIN, "--db", self.db, "--model", model, "--epochs", "3", "--lr", "0.5", "--ranks", "1",
                      "--json").stdout
            epochs[squeeze] = json.loads(out)["epochs"]
            self.assertLess(epochs[squeeze][-1]["test_rmse"], epochs[squeeze][0]["test_rmse"])
        for a, b in zip(epochs[True], epochs[False]):
            self.assertAlmostEqual(a["test_rmse"], b["test_rmse"], delta=1e-4 * b["test_rmse"])

    def test_what_is_no_value_to_predict_is_refused(self):
        bad = [(self.x[0], 1.0), (self.x[1], float("nan"))]
        with self.assertRaisesRegex(granary.InvalidArgumentError, "sample 1 of split 'train': target is nan"):
            granary.write(os.path.join(self.tmp, "nan-db"), bad, progress=False)
        with self.assertRaisesRegex(granary.InvalidArgumentError, "no classes"):
            granary.write(os.path.join(self.tmp, "classes-db"), samples(self.x[:4], self.y[:4]), classes=["a", "b"],
                          progress=False)
        with self.assertRaisesRegex(granary.InvalidArgumentError, "a label is a scalar"):
            granary.write(os.path.join(self.tmp, "vector-db"), [{"x": self.x[0], "y": self.x[1]}], label="y",
                          progress=False)


if __name__ == "__main__":
    unittest.main()
