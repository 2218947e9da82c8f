#!/usr/bin/python3
"""Well-known datasets as they are downloaded, through prep and through
torchvision + granary.write: CIFAR-10's binary version built by prep holds
the samples torchvision reads from its Python version, which prep refuses
with a command that writes it; that command runs as printed; a CIFAR db
trains with no flags. A Kaggle competition folder (train.csv, test.csv
without labels) builds and trains, saying where its evaluation split is
to come from. NumPy's files (Keras's mnist.npz, X.npy and y.npy) are
refused by prep with the granary.write call that writes them, which runs
as printed, as are class folders of text (aclImdb's reviews) and of
audio (Speech Commands' clips, its lists of held-out clips as splits);
granary.write warns of NumPy's float64 and refuses a tuple of columns, and
shows its progress in a Jupyter notebook.
A dataset written through torchvision's ToTensor()
and Normalize() is not normalised a second time by granary.Loader; one
written after ToTensor() alone is warned of (float pixels, 4x the bytes).
granary.Dataset hands a torchvision transform a PIL image, as ImageFolder
does; a granary.Loader looped over again without set_epoch() says so, and
takes DataLoader's arguments that mean the same (shuffle=True, num_workers)
or refuses them naming what it does instead; a
torchvision model name given to train is refused with a command that makes
it train.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/datasets_test.py
"""
import json
import os
import pickle
import re
import subprocess
import sys
import textwrap
import unittest
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("GRANARY_BUILD", os.path.join(ROOT, "build")))
sys.path.insert(0, os.path.join(BUILD, "python"))
import granary  # noqa: E402
from testenv import FolderTest  # noqa: E402

PREP = os.path.join(BUILD, "preprocess/prep")
TRAIN = os.path.join(BUILD, "trainer/train")
CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]

# torchvision checks the MD5 of CIFAR's real files; these are made up.
NO_MD5_CHECK = """
import torchvision.datasets.cifar as cifar
cifar.check_integrity = lambda *args, **kwargs: True
cifar.CIFAR10._check_integrity = lambda self: True
"""


def run(*args, check=True, **kwargs):
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def write_cifar10(root, per_batch, seed=0):
    """The same made-up CIFAR-10 in both versions: root/cifar-10-batches-py
    (pickles of str keys, as torchvision loads them) and
    root/cifar-10-batches-bin (records of a label byte and CHW pixels)."""
    rng = np.random.default_rng(seed)
    py, binary = os.path.join(root, "cifar-10-batches-py"), os.path.join(root, "cifar-10-batches-bin")
    os.makedirs(py)
    os.makedirs(binary)
    for name in [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
        labels = rng.integers(0, 10, per_batch)
        # Each class a colour of its own, so a model can learn it; noise besides.
        data = (labels[:, None] * 25 + rng.integers(0, 8, (per_batch, 3072))).astype(np.uint8)
        with open(os.path.join(py, name), "wb") as f:
            pickle.dump({"batch_label": name, "labels": [int(x) for x in labels], "data": data}, f)
        np.concatenate([labels.astype(np.uint8)[:, None], data], axis=1).tofile(os.path.join(binary, name + ".bin"))
    with open(os.path.join(py, "batches.meta"), "wb") as f:
        pickle.dump({"label_names": CLASSES}, f)
    with open(os.path.join(binary, "batches.meta.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n\n")  # CIFAR's own file ends in blank lines
    return py, binary


class Case(FolderTest):
    """A test with a folder of its own (self.tmp)."""

    def cifar_db(self, per_batch):
        """prep's db (self.tmp/db) of a made-up CIFAR-10 of `per_batch` samples a batch."""
        _, binary = write_cifar10(self.tmp, per_batch)
        db = os.path.join(self.tmp, "db")
        run(PREP, "build", binary, db, "--no-progress")
        return db


class CifarTest(Case):

    def test_the_python_versions_command_writes_the_samples_of_the_binary_version(self):
        py, binary = write_cifar10(self.tmp, 30)
        bin_db, py_db = os.path.join(self.tmp, "bin.db"), os.path.join(self.tmp, "py.db")
        run(PREP, "build", binary, bin_db, "--no-progress")
        refused = run(PREP, "build", py, py_db, check=False, cwd=self.tmp)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("holds CIFAR-10 as Python pickles", refused.stderr)
        self.assertFalse(os.path.exists(py_db))
        # The command as printed, DB replaced, in a Python that skips torchvision's MD5 check.
        command = re.search(r'python3 -c "(.*?)"$', refused.stderr.strip()).group(1).replace("'DB'", repr(py_db))
        with open(os.path.join(self.tmp, "sitecustomize.py"), "w") as f:
            f.write(NO_MD5_CHECK)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([self.tmp, os.path.join(BUILD, "python")]))
        run("/usr/bin/python3", "-c", command, cwd=self.tmp, env=env)
        ours, theirs = granary.describe(bin_db), granary.describe(py_db)
        self.assertEqual(ours["classes"], CLASSES)
        self.assertEqual(theirs["classes"], CLASSES)
        for split, count in (("train", 150), ("test", 30)):
            a, b = granary.Dataset(bin_db, split=split), granary.Dataset(py_db, split=split)
            self.assertEqual((len(a), len(b)), (count, count))
            for i in range(count):
                x, y = a[i], b[i]  # prep's CHW beside granary.write's HWC (a PIL image's layout)
                self.assertTrue(np.array_equal(x["image"].numpy(), y["input"].permute(2, 0, 1).numpy()), (split, i))
                self.assertEqual(int(x["label"]), int(y["target"]), (split, i))

    def test_a_cifar_db_trains_with_no_flags(self):
        db = self.cifar_db(100)
        report = json.loads(run(TRAIN, "--db", db, "--epochs", "6", "--batch-size", "32", "--json").stdout)
        self.assertEqual(report["config"]["data"]["eval_split"], "test")
        self.assertGreater(report["epochs"][-1]["test_accuracy"], 0.8)


class KaggleTest(Case):
    def test_a_competition_folder_trains_and_says_where_its_evaluation_split_comes_from(self):
        tmp = self.tmp
        rng = np.random.default_rng(5)
        with open(os.path.join(tmp, "train.csv"), "w") as train, open(os.path.join(tmp, "test.csv"), "w") as test:
            train.write("PassengerId,Survived,Pclass,Sex,Fare\n")
            test.write("PassengerId,Pclass,Sex,Fare\n")
            for i in range(600):
                sex = ("male", "female")[i % 2]
                survived = int(sex == "female") if rng.random() < 0.9 else int(sex == "male")
                fields = [str(i), str(rng.integers(1, 4)), sex, f"{rng.random() * 80:.2f}"]
                train.write(",".join(fields[:1] + [str(survived)] + fields[1:]) + "\n")
                if i < 100:
                    test.write(",".join(fields) + "\n")
        db = os.path.join(tmp, "db")
        built = run(PREP, "build", tmp, db, "--drop", "PassengerId", "--no-progress")
        self.assertIn("label column 'Survived' (the column test.csv lacks", built.stderr)
        self.assertIn("(a test set without labels, as Kaggle ships them): left out", built.stderr)
        trained = run(TRAIN, "--db", db, "--epochs", "1")
        self.assertIn("train: no evaluation: no split to evaluate on", trained.stdout)
        run(PREP, "build", tmp, db, "--drop", "PassengerId", "--val-fraction", "0.2", "--force", "--no-progress")
        report = json.loads(run(TRAIN, "--db", db, "--epochs", "8", "--lr", "0.01", "--json").stdout)
        self.assertEqual(report["config"]["data"]["eval_split"], "val")
        self.assertGreater(report["epochs"][-1]["test_accuracy"], 0.8)


class NumpyTest(Case):
    def test_numpy_files_are_refused_with_the_python_that_writes_them_and_it_runs_as_printed(self):
        tmp = self.tmp
        python = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
        rng = np.random.default_rng(7)
        # Keras's mnist.npz (keras.datasets' download): images whose brightness says the class.
        labels = rng.integers(0, 3, 400).astype(np.uint8)
        images = (labels[:, None, None] * 100 + rng.integers(0, 40, (400, 28, 28))).astype(np.uint8)
        np.savez(os.path.join(tmp, "mnist.npz"), x_train=images[:300], y_train=labels[:300], x_test=images[300:],
                 y_test=labels[300:])
        refused = run(PREP, "build", "mnist.npz", "db", check=False, cwd=tmp)
        self.assertEqual(refused.returncode, 1, refused.stderr)
        self.assertIn("mnist.npz: is a NumPy archive (.npz) of the arrays x_train, y_train, x_test, y_test: prep "
                      "reads CSV tables, IDX files and image folders, not arrays", refused.stderr)
        code = refused.stderr.split("write them from Python: ", 1)[1].strip()
        subprocess.run([sys.executable, "-c", code], cwd=tmp, env=python, check=True)
        report = json.loads(run(TRAIN, "--db", os.path.join(tmp, "db"), "--epochs", "4", "--json").stdout)
        self.assertEqual(report["config"]["data"]["eval_split"], "test")
        self.assertGreater(report["epochs"][-1]["test_accuracy"], 0.9)
        # Features and labels saved apart (scikit-learn's X, y), given by the folder or by one of them.
        os.mkdir(os.path.join(tmp, "arrays"))
        features = rng.normal(size=(200, 6)).astype(np.float32)
        np.save(os.path.join(tmp, "arrays", "X.npy"), features)
        np.save(os.path.join(tmp, "arrays", "y.npy"), (features[:, 0] > 0).astype(np.int64))
        for raw in ("arrays", "arrays/X.npy"):
            refused = run(PREP, "build", raw, "features.db", check=False, cwd=tmp)
            self.assertEqual(refused.returncode, 1, refused.stderr)
            self.assertIn("granary.write('features.db', zip(np.load('arrays/X.npy'), np.load('arrays/y.npy')))",
                          refused.stderr)
        self.assertIn("arrays/X.npy: is a NumPy array (dtype '<f4', shape (200, 6))", refused.stderr)
        subprocess.run([sys.executable, "-c", refused.stderr.split("from Python: ", 1)[1]], cwd=tmp, env=python,
                       check=True)
        info = json.loads(run(PREP, "info", os.path.join(tmp, "features.db"), "--json").stdout)
        self.assertEqual([(s["name"], s["count"]) for s in info["splits"]], [("train", 200)])
        self.assertEqual([f["shape"] for f in info["schema"]["fields"]], [[6], []])
        # scikit-learn's float64: warned of (twice float32's bytes); float32, or float64 asked for by schema=, not.
        wide = [(row, int(row[0] > 0)) for row in features.astype(np.float64)[:20]]
        with self.assertWarnsRegex(UserWarning, r"split 'train': field\(s\) 'input' hold float64 values \(NumPy's "
                                                r"default\): stored as they are, twice float32's bytes"):
            granary.write(os.path.join(tmp, "wide.db"), wide, progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            granary.write(os.path.join(tmp, "narrow.db"), [(x.astype(np.float32), y) for x, y in wide], progress=False)
            granary.write(os.path.join(tmp, "asked.db"), wide, schema={"input": ("float64", [6]),
                                                                       "target": ("int64", [])}, progress=False)
        # The same arrays given to granary.write as they are, a tuple of columns: refused, naming zip().
        columns = r"split 'train' is a tuple of 2 arrays of 200 rows \(shapes \[200, 6\], \[200\]\): columns.*zip"
        with self.assertRaisesRegex(granary.InvalidArgumentError, columns):
            granary.write(os.path.join(tmp, "columns.db"), (features, features[:, 0] > 0))
        self.assertFalse(os.path.exists(os.path.join(tmp, "columns.db")))


class TextAudioFoldersTest(Case):
    def printed_code_run(self, raw, db):
        """prep build RAW DB refused (exit 1); the Python its message ends with, run as printed in self.tmp."""
        refused = run(PREP, "build", raw, db, check=False, cwd=self.tmp)
        self.assertEqual(refused.returncode, 1, refused.stderr)
        subprocess.run([sys.executable, "-c", "import " + refused.stderr.split(": import ", 1)[1]], cwd=self.tmp,
                       env=dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python")), check=True)
        return refused.stderr

    def test_aclimdbs_folders_of_reviews_are_written_as_text_by_the_printed_code(self):
        for split, label, k, review in (("train", "pos", 0, "A film \u00e9clatant.<br />10/10"),
                                        ("train", "neg", 1, "Dull."), ("test", "pos", 2, "Fine."),
                                        ("test", "neg", 3, "Bad."), ("train", "unsup", 4, "no label")):
            os.makedirs(os.path.join(self.tmp, "aclImdb", split, label), exist_ok=True)
            with open(os.path.join(self.tmp, "aclImdb", split, label, f"{k}_7.txt"), "w", encoding="utf-8") as f:
                f.write(review)
        with open(os.path.join(self.tmp, "aclImdb", "train", "urls_pos.txt"), "w") as f:
            f.write("http://www.imdb.com/title/tt0453418/usercomments\n")
        stderr = self.printed_code_run("aclImdb", "imdb.db")
        self.assertIn("aclImdb: its class folders (neg/, pos/) hold 4 .txt files and no image: text", stderr)
        self.assertIn("unsup/ left out (no class)", stderr)
        train = granary.Dataset(os.path.join(self.tmp, "imdb.db"), split="train")
        self.assertEqual(sorted((s["text"], int(s["label"])) for s in train),
                         [("A film \u00e9clatant.<br />10/10", 1), ("Dull.", 0)])
        self.assertEqual(len(granary.Dataset(os.path.join(self.tmp, "imdb.db"), split="test")), 2)

    def test_speech_commands_clips_are_written_as_their_samples_in_the_splits_its_lists_name(self):
        import wave
        clips = {}
        for word in ("yes", "no", "_background_noise_"):
            os.makedirs(os.path.join(self.tmp, "speech", word))
            for k in range(3):
                samples = (np.arange(800 + 100 * k) * (k + 1) % 2000 - 1000).astype(np.int16)
                name = f"{word}/{k}_nohash_0.wav"
                with wave.open(os.path.join(self.tmp, "speech", name), "wb") as w:
                    w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000), w.writeframes(samples.tobytes())
                clips[name] = samples
        for listed, name in (("validation_list.txt", "yes/1_nohash_0.wav"), ("testing_list.txt", "no/2_nohash_0.wav")):
            with open(os.path.join(self.tmp, "speech", listed), "w") as f:
                f.write(name + "\n")
        self.printed_code_run("speech", "words.db")
        db = os.path.join(self.tmp, "words.db")
        self.assertEqual([len(granary.Dataset(db, split=s)) for s in ("train", "val", "test")], [4, 1, 1])
        val = granary.Dataset(db, split="val")[0]
        self.assertEqual(int(val["label"]), 1)  # classes ['no', 'yes']
        np.testing.assert_array_equal(val["audio"].numpy(), clips["yes/1_nohash_0.wav"])


class NotebookTest(Case):
    def test_a_write_in_a_jupyter_notebook_shows_its_progress(self):
        # A notebook's kernel (ipykernel loaded) gives stderr no terminal, but redraws a line on "\r" as one does.
        script = textwrap.dedent(f"""
            import sys, types
            if sys.argv[1] == "notebook":
                sys.modules["ipykernel"] = types.ModuleType("ipykernel")
            import granary
            granary.write({os.path.join(self.tmp, "nb")!r} + sys.argv[1], [(k, k % 2) for k in range(50)])
        """)
        env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
        notebook = run(sys.executable, "-c", script, "notebook", env=env).stderr
        self.assertIn("granary.write: train: 50/50 samples", notebook)
        self.assertIn("granary.write: wrote ", notebook)
        self.assertEqual(run(sys.executable, "-c", script, "pipe", env=env).stderr, "")


class TransformedTest(Case):
    def test_images_normalised_when_written_are_not_normalised_again(self):
        import torchvision.transforms as T
        from PIL import Image
        tmp = self.tmp
        rng = np.random.default_rng(4)
        pictures = [Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)) for _ in range(40)]
        # ToTensor()'s floats are 8-bit pixels at 4x the bytes: warned of; normalised ones are not pixels.
        with self.assertWarnsRegex(UserWarning, r"field 'input' holds float32 images of values k/255 \(ToTensor\(\) "
                                                r"of 8-bit pixels\): stored as they are, 4x the bytes"):
            granary.write(os.path.join(tmp, "unit"), [(T.ToTensor()(p), k % 2) for k, p in enumerate(pictures)])
        normalise = T.Compose([T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            granary.write(os.path.join(tmp, "normalised"), [(normalise(p), k % 2) for k, p in enumerate(pictures)])
        # Values in [0, 1] (ToTensor's): ImageNet's mean and std applied, as asked.
        x, _ = next(iter(granary.Loader(os.path.join(tmp, "unit"), batch_size=40, shuffle="none", normalize=True)))
        first = T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))(T.ToTensor()(pictures[0]))
        self.assertTrue(np.allclose(x[0].numpy(), first.numpy(), atol=1e-5))
        # Normalised already: normalize=True refused naming the values; False reads them as written.
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"normalize=True: field 'input' of split 'train' "
                                    r"holds float values from -2\.\d+ to 2\.\d+, not images in \[0, 1\]"):
            granary.Loader(os.path.join(tmp, "normalised"), normalize=True)
        x, _ = next(iter(granary.Loader(os.path.join(tmp, "normalised"), batch_size=40, shuffle="none")))
        self.assertTrue(np.allclose(x[0].numpy(), first.numpy(), atol=1e-5))


class TorchvisionTransformTest(Case):
    def test_a_transform_written_for_imagefolder_gets_what_imagefolder_gives(self):
        import torch
        import torchvision.transforms as T
        tmp = self.tmp
        _, binary = write_cifar10(tmp, 4)  # CHW images
        folder = os.path.join(tmp, "folder")  # HWC images
        from PIL import Image
        for c in ("a", "b"):
            os.makedirs(os.path.join(folder, c))
            for k in range(3):
                pixels = np.random.default_rng(k).integers(0, 256, (20, 24, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(os.path.join(folder, c, f"{k}.png"))
        for raw, flags in ((binary, []), (folder, ["--size", "16"])):
            db = raw + ".db"
            run(PREP, "build", raw, db, "--no-progress", *flags)
            stored = granary.Dataset(db, as_tuple=True)[1][0]
            chw = stored if stored.shape[0] == 3 else stored.permute(2, 0, 1)
            # A horizontal flip flips columns (an H x W x C tensor's flip would swap its colours).
            flipped = granary.Dataset(db, as_tuple=True, transform=T.Compose([T.RandomHorizontalFlip(p=1.0),
                                                                               T.ToTensor()]))[1][0]
            self.assertTrue(torch.allclose(flipped, chw.flip(-1).float() / 255), db)
            cropped = granary.Dataset(db, as_tuple=True, transform=T.Compose([T.RandomCrop(12), T.ToTensor()]))[1][0]
            self.assertEqual(tuple(cropped.shape), (3, 12, 12))
        gray = granary.Dataset(os.path.join(tmp, "folder.db"), as_tuple=True, transform=T.Grayscale())[0][0]
        self.assertEqual(gray.mode, "L")


class TorchvisionModelTest(Case):
    def test_a_torchvision_model_name_is_refused_with_a_command_that_makes_it_train(self):
        tmp, db = self.tmp, self.cifar_db(8)
        refused = run(TRAIN, "--db", db, "--model", "resnet18", check=False, cwd=tmp)
        self.assertNotEqual(refused.returncode, 0)
        command = re.search(r'python3 -c "(.*?)"', refused.stderr).group(1).replace("num_classes=N", "num_classes=10")
        run("/usr/bin/python3", "-c", command, cwd=tmp)
        report = json.loads(run(TRAIN, "--db", db, "--model", "resnet18.pt", "--epochs", "1", "--batch-size", "16",
                                "--json", cwd=tmp).stdout)
        self.assertEqual(len(report["epochs"]), 1)


class DataLoaderHabitsTest(Case):
    def test_a_second_pass_without_set_epoch_is_warned_of_once(self):
        db = self.cifar_db(8)
        loader = granary.Loader(db, batch_size=16)
        first = [y.tolist() for _, y in loader]
        # DataLoader(shuffle=True)'s habit: loop again, expecting another order.
        with self.assertWarnsRegex(UserWarning, r"a second pass over epoch 0 without set_epoch\(\): the same order"):
            again = [y.tolist() for _, y in loader]
        self.assertEqual(again, first)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            [y.tolist() for _, y in loader]  # said once
            fresh = granary.Loader(db, batch_size=16)
            for epoch in range(3):  # DistributedSampler's habit: nothing to say
                fresh.set_epoch(epoch)
                orders = [y.tolist() for _, y in fresh]
        self.assertNotEqual(orders, first)

    def test_dataloaders_arguments_are_taken_or_refused_naming_what_to_do(self):
        db = self.cifar_db(8)
        # A script's DataLoader line with its first argument changed: the same words, the same meaning.
        with self.assertWarnsRegex(UserWarning, "pin_memory=True is for copies to a GPU; granary trains on CPUs"):
            loader = granary.Loader(db, batch_size=16, shuffle=True, num_workers=3, pin_memory=True,
                                    persistent_workers=True)
        self.assertEqual(loader._args[6], 3)  # threads
        ordered = granary.Loader(db, batch_size=16, shuffle=False, num_workers=0)
        self.assertEqual(ordered._args[6], 1)  # num_workers=0: one thread beside the loop
        unshuffled = granary.Loader(db, batch_size=16, shuffle="none")
        self.assertEqual([y.tolist() for _, y in ordered], [y.tolist() for _, y in unshuffled])
        shuffled = [y.tolist() for _, y in loader]
        self.assertNotEqual(shuffled, [y.tolist() for _, y in unshuffled])
        self.assertEqual(sorted(sum(shuffled, [])), sorted(sum([y.tolist() for _, y in unshuffled], [])))
        for kwargs, message in (({"collate_fn": list}, "takes no collate_fn= .* granary.Dataset in a DataLoader"),
                                ({"sampler": None}, r"takes no sampler= .*\(rank=, world=, shuffle="),
                                ({"prefetch_factor": 2}, "prefetch= is the number of batches"),
                                ({"batchsize": 8}, "unexpected keyword argument 'batchsize': did you mean batch_size="),
                                ({"num_workers": 2, "threads": 2}, "give threads= or num_workers="),
                                ({"shuffle": 1}, "shuffle must be 'full', 'block', 'none'")):
            with self.assertRaisesRegex((TypeError, granary.InvalidArgumentError), message):
                granary.Loader(db, **kwargs)
        # granary.write too names the argument meant, before it reads a sample.
        for kwargs, message in (({"num_workers": 2}, r"takes no num_workers= \(workers=N reads the dataset"),
                                ({"force": True}, r"takes no force= \(overwrite=True"),
                                ({"val_frac": 0.1}, "unexpected keyword argument 'val_frac': did you mean "
                                                    "val_fraction=")):
            with self.assertRaisesRegex(TypeError, message):
                granary.write(os.path.join(self.tmp, "w.db"), iter(()), **kwargs)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "w.db")))


if __name__ == "__main__":
    unittest.main()
