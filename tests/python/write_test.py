#!/usr/bin/python3
"""granary.write and granary.Writer (python/granary/writer.py over
preprocess/sample_writer.h) against prep and train: the same Fashion-MNIST
through torchvision gives prep's content hash, dbs written from Python read
back sample for sample and train with no flags, a torchvision ImageFolder
trains as prep's db of the same folder does, and hostile use (a sample that
does not fit, an exception inside the block, a killed writer, two writers
of one path, an existing db or folder) leaves no db that looks complete; a
killed write resumed with resume=True makes the db an uninterrupted one does.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/write_test.py
"""
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import unittest
from unittest import mock

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("GRANARY_BUILD", os.path.join(ROOT, "build")))
sys.path.insert(0, os.path.join(BUILD, "python"))
import granary  # noqa: E402
from testenv import FolderTest  # noqa: E402

PREP = os.path.join(BUILD, "preprocess/prep")
TRAIN = os.path.join(BUILD, "trainer/train")
LOADER = os.path.join(BUILD, "loader/loader")
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def run(*args, check=True, env=None):
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done


def prep_info(db):
    """What the db holds (granary.describe), after `prep info` described it too."""
    assert "granary python" in run(PREP, "info", db).stdout
    return granary.describe(db)


class WriteTest(FolderTest):
    def assert_no_db(self, db):
        self.assertFalse(os.path.exists(db), f"{db} exists")
        self.assertNotIn(os.path.basename(db), os.listdir(os.path.dirname(db)))

    def test_torchvision_fashion_mnist_gives_preps_content_hash(self):
        import torchvision
        root = self.path("tv")
        raw = os.path.join(root, "FashionMNIST", "raw")
        os.makedirs(raw)
        for name in os.listdir(FASHION_MNIST):
            with gzip.open(os.path.join(FASHION_MNIST, name)) as f, open(os.path.join(raw, name[:-3]), "wb") as out:
                out.write(f.read())
        prep_db, py_db = self.path("prep.db"), self.path("py.db")
        run(PREP, "build", FASHION_MNIST, prep_db, "--no-progress")
        summary = granary.write(py_db, {"train": torchvision.datasets.FashionMNIST(root, train=True),
                                        "test": torchvision.datasets.FashionMNIST(root, train=False)})
        ours, theirs = prep_info(py_db), granary.describe(prep_db)
        self.assertEqual(summary["content_hash"], theirs["content_hash"])
        self.assertEqual(ours["content_hash"], theirs["content_hash"])
        self.assertEqual([(s["name"], s["samples"]) for s in ours["splits"]], [("train", 60000), ("test", 10000)])
        self.assertEqual(ours["classes"], torchvision.datasets.FashionMNIST.classes)
        self.assertIn("content hash matches", run(PREP, "verify", py_db).stdout)
        d = granary.describe(py_db)
        self.assertEqual((d["input_field"], d["target_field"], d["input_shape"]), ("input", "target", [1, 28, 28]))

    def test_the_readmes_python_examples_run_and_their_dbs_train(self):
        with open(os.path.join(ROOT, "README.md")) as f:
            section = f.read().split("### Any dataset from Python")[1].split("\n### ")[0]
        blocks = re.findall(r"```python\n(.*?)```", section, re.S)
        self.assertEqual(len(blocks), 2)
        raw = os.path.join(self.tmp, "tv", "FashionMNIST", "raw")
        os.makedirs(raw)
        for name in os.listdir(FASHION_MNIST):  # the first 600 of each file: enough to run the example
            with gzip.open(os.path.join(FASHION_MNIST, name)) as f:
                data = f.read()
            dims = data[3]
            header = bytearray(data[:4 + 4 * dims])
            count = min(600, int.from_bytes(header[4:8], "big"))
            header[4:8] = count.to_bytes(4, "big")
            item = len(data[4 + 4 * dims:]) // int.from_bytes(data[4:8], "big")
            with open(os.path.join(raw, name[:-3]), "wb") as out:
                out.write(bytes(header) + data[4 + 4 * dims:4 + 4 * dims + count * item])
        env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
        for block in blocks:
            done = subprocess.run([sys.executable, "-c", block], cwd=self.tmp, capture_output=True, text=True, env=env)
            self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(dict(granary.describe(self.path("fashion-tv.db"))["splits"][0]), {"name": "train",
                                                                                        "samples": 600, "shards": 1})
        report = json.loads(run(TRAIN, "--db", self.path("sums.db"), "--epochs", "3", "--json").stdout)
        self.assertEqual(report["config"]["model"]["name"], "mlp")
        self.assertGreater(report["epochs"][-1]["test_accuracy"], 0.8)

    def test_every_kind_of_value_reads_back_as_written(self):
        rng = np.random.default_rng(1)
        samples = [{"photo": rng.integers(0, 256, (6, 5, 3), dtype=np.uint8),
                    "gray": rng.integers(0, 256, (4, 4), dtype=np.uint8),
                    "features": rng.standard_normal(7),  # float64 stays float64
                    "weight": float(k) / 3,
                    "flag": k % 2 == 0,
                    "text": "é" * (k % 5),
                    "blob": bytes(range(k % 9)),
                    "label": k % 4} for k in range(300)]
        db = self.path("kinds.db")
        granary.write(db, samples, threads=2)
        info = prep_info(db)
        fields = {f["name"]: (f["dtype"], f["shape"], f.get("layout", "")) for f in info["fields"]}
        self.assertEqual(fields["photo"], ("uint8", [6, 5, 3], "HWC"))
        self.assertEqual(fields["gray"], ("uint8", [1, 4, 4], "CHW"))
        self.assertEqual(fields["features"][:2], ("float64", [7]))
        self.assertEqual(fields["weight"][:2], ("float32", []))
        self.assertEqual(fields["text"], ("uint8", [-1], "utf-8"))
        self.assertEqual(fields["blob"], ("uint8", [-1], ""))
        self.assertEqual(info["label_field"], "label")
        self.assertEqual(info["num_classes"], 4)
        dataset = granary.Dataset(db, "train")
        for k in (0, 1, 157, 299):
            got, want = dataset[k], samples[k]
            np.testing.assert_array_equal(got["photo"], want["photo"])
            np.testing.assert_array_equal(got["gray"], want["gray"][None])
            np.testing.assert_array_equal(got["features"], want["features"])
            self.assertEqual(float(got["weight"]), float(np.float32(want["weight"])))
            self.assertEqual(int(got["flag"]), int(want["flag"]))
            self.assertEqual(got["text"], want["text"])
            self.assertEqual(bytes(got["blob"].numpy()), want["blob"])
            self.assertEqual(int(got["label"]), want["label"])
        # A variable-length field cannot be batched by granary.Loader, which says how it can be read.
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"field 'blob' has variable dims; batching needs a "
                                    r"fixed shape \(read such a field with granary.Dataset in a DataLoader: "
                                    r"collate_fn=granary.pad_collate"):
            granary.Loader(db, input_field="blob")

    def test_a_feature_db_and_an_image_db_train_with_no_flags(self):
        rng = np.random.default_rng(2)
        centers = rng.standard_normal((3, 10)) * 3
        features = [(centers[k % 3] + rng.standard_normal(10)).astype(np.float32) for k in range(1500)]
        feature_db = self.path("features.db")
        granary.write(feature_db, {"train": [(x, k % 3) for k, x in enumerate(features[:1200])],
                                   "test": [(x, (k + 1200) % 3) for k, x in enumerate(features[1200:])]})
        # The features' statistics, per split, as prep records a CSV table's (what the MLP standardises with).
        recorded = granary.describe(feature_db)["statistics"]
        self.assertEqual(sorted(recorded), ["test", "train"])
        train = np.stack(features[:1200]).astype(np.float64)
        self.assertEqual(recorded["train"]["input"]["samples"], 1200)
        np.testing.assert_allclose(recorded["train"]["input"]["mean"], train.mean(0), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(recorded["train"]["input"]["std"], train.std(0), rtol=1e-9)
        self.assertEqual(recorded["train"]["input"]["min"], train.min(0).tolist())
        report = json.loads(run(TRAIN, "--db", feature_db, "--epochs", "3", "--json").stdout)
        self.assertEqual(report["config"]["model"]["name"], "mlp")  # features: the MLP, with no flags
        self.assertGreater(report["epochs"][-1]["test_accuracy"], 0.9)

        images = np.zeros((600, 8, 8), np.uint8)
        for k in range(600):  # class k % 2: a bright top half or a bright bottom half
            images[k, :4 if k % 2 == 0 else 8, :] = 200
            images[k, :4 if k % 2 else 0, :] = 0
        image_db = self.path("images.db")
        granary.write(image_db, [(images[k], k % 2) for k in range(600)], val_fraction=0.2)
        report = json.loads(run(TRAIN, "--db", image_db, "--epochs", "2", "--json").stdout)
        self.assertEqual(report["config"]["data"]["eval_split"], "val")
        bench = json.loads(run(LOADER, "bench", image_db, "--json").stdout)  # the same fields as train reads
        self.assertEqual(bench["samples"], len(granary.Dataset(image_db, "train")))
        loader = granary.Loader(image_db, batch_size=32, threads=1)
        x, y = next(iter(loader))
        self.assertEqual(tuple(x.shape), (32, 1, 8, 8))

    def test_an_image_folder_through_torchvision_trains_as_preps_db_of_it(self):
        import torchvision
        from PIL import Image
        folder = self.path("colours")
        rng = np.random.default_rng(3)
        for c, colour in enumerate(((200, 40, 40), (40, 200, 40), (40, 40, 200))):
            os.makedirs(os.path.join(folder, f"class{c}"))
            for k in range(60):
                pixels = np.clip(np.array(colour) + rng.normal(0, 40, (24, 24, 3)), 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(os.path.join(folder, f"class{c}", f"{k}.png"))
        prep_db, py_db = self.path("prep.db"), self.path("py.db")
        run(PREP, "build", folder, prep_db, "--size", "16", "--val-fraction", "0.25", "--no-progress")
        dataset = torchvision.datasets.ImageFolder(folder, transform=torchvision.transforms.Resize((16, 16)))
        granary.write(py_db, dataset, val_fraction=0.25, workers=2)
        self.assertEqual(prep_info(py_db)["classes"], ["class0", "class1", "class2"])
        accuracy = {}
        for db in (prep_db, py_db):
            report = json.loads(run(TRAIN, "--db", db, "--epochs", "4", "--batch-size", "16", "--json").stdout)
            accuracy[db] = report["epochs"][-1]["test_accuracy"]
        self.assertGreater(min(accuracy.values()), 0.9, accuracy)
        self.assertLess(abs(accuracy[prep_db] - accuracy[py_db]), 0.1, accuracy)

    def test_workers_and_threads_do_not_change_the_records(self):
        rng = np.random.default_rng(4)
        # 2,003 samples: the workers' batches fill the shared slots again and again, and the last is short.
        data = [{"image": rng.integers(0, 256, (3, 9, 9), dtype=np.uint8), "weight": rng.random(5),
                 "label": int(k % 7)} for k in range(2003)]
        hashes = set()
        for workers, threads in ((1, 1), (2, 2), (3, 0)):
            db = self.path(f"w{workers}.db")
            hashes.add(granary.write(db, data, workers=workers, threads=threads)["content_hash"])
        self.assertEqual(len(hashes), 1)
        d = granary.Dataset(self.path("w3.db"))
        for k in (0, 124, 125, 2002):
            self.assertTrue(np.array_equal(d[k]["image"], data[k]["image"]), k)
            self.assertTrue(np.array_equal(d[k]["weight"], data[k]["weight"]), k)
        # Fields of fixed shape come back through shared memory; bytes of any length through the pool's pipe.
        from granary.samples import _infer_schema
        fixed = _infer_schema(data[0], 0, "train", None)
        slots = granary.write_workers._Slots.make(fixed, 125, 8)
        columns = slots.columns(7, 125)  # a uint8 column of 243-byte rows, then float64 ones: each aligned
        self.assertEqual([c.shape for c in columns], [(125, 3, 9, 9), (125, 5), (125,)])
        self.assertEqual([c.ctypes.data % 64 for c in columns], [0, 0, 0])
        del columns
        slots.memory.close()
        texts = [{"text": bytes(k % 50), "label": k % 3} for k in range(700)]
        self.assertIsNone(granary.write_workers._Slots.make(_infer_schema(texts[0], 0, "train", None), 125, 8))
        self.assertEqual(granary.write(self.path("t1.db"), texts)["content_hash"],
                         granary.write(self.path("t2.db"), texts, workers=2)["content_hash"])
        # A worker's sample that does not fit is named, and no db is left.
        bad = data[:1500] + [{"image": data[0]["image"], "weight": rng.random(4), "label": 1}] + data[1500:]
        with self.assertRaisesRegex(granary.InvalidArgumentError,
                                    r"sample 1500 of split 'train': field 'weight' has shape \[4\]"):
            granary.write(self.path("bad.db"), bad, workers=2)
        self.assert_no_db(self.path("bad.db"))
        with self.assertRaisesRegex(granary.InvalidArgumentError, "not a map-style dataset"):
            granary.write(self.path("gen.db"), (s for s in data), workers=2)
        self.assert_no_db(self.path("gen.db"))

    def test_workers_run_the_dataset_on_one_torch_thread_each(self):
        import torch
        before = torch.get_num_threads()
        torch.set_num_threads(3)  # more than one, whatever torch chose on this machine
        self.addCleanup(torch.set_num_threads, before)

        class Threads(torch.utils.data.Dataset):  # what a transform made of torch ops would run on
            def __len__(self):
                return 40

            def __getitem__(self, k):
                return {"x": np.array([torch.get_num_threads()], np.float32), "label": k % 2}
        granary.write(self.path("threads.db"), Threads(), workers=2)
        d = granary.Dataset(self.path("threads.db"))
        self.assertEqual({float(d[k]["x"][0]) for k in range(len(d))}, {1.0})  # as DataLoader's workers
        self.assertEqual(torch.get_num_threads(), 3)  # the caller's own are left alone

    def test_tables_that_iterate_as_something_else_are_refused_saying_how_to_write_their_rows(self):
        class DataFrame:  # as pandas' (not installed here): iterating it gives its column names
            __module__ = "pandas.core.frame"
            columns = ["a", "label"]

            def __iter__(self):
                return iter(self.columns)
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"split 'train' is a pandas DataFrame, which "
                                    r"iterates over its column names, not its rows: write it as a CSV table"):
            granary.write(self.path("df.db"), DataFrame())
        self.assert_no_db(self.path("df.db"))
        columns = {"features": np.zeros((10, 3), np.float32), "label": np.arange(10) % 2}
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"samples is a dict of 2 arrays of 10 rows "
                                    r"\('features', 'label'\): a dict's keys name splits"):
            granary.write(self.path("columns.db"), columns)
        self.assert_no_db(self.path("columns.db"))
        # Splits that are arrays, named as splits, are splits.
        splits = {"train": np.zeros((10, 3), np.float32), "test": np.ones((10, 3), np.float32)}
        self.assertEqual(granary.write(self.path("arrays.db"), splits)["splits"], [("train", 10), ("test", 10)])

    def test_a_worker_killed_is_named_and_leaves_no_db_nor_process(self):
        # A dataset whose decoder crashes a worker (here: SIGKILL, as the OOM killer sends) ends the write
        # with the samples that were being read, where multiprocessing.Pool would have waited for ever.
        script = ("import os, signal, sys, numpy as np\n"
                  f"sys.path.insert(0, {os.path.join(BUILD, 'python')!r})\n"
                  "import multiprocessing, granary\n"
                  "parent = os.getpid()\n"
                  "class Crashing:\n"
                  "    def __len__(self): return 4000\n"
                  "    def __getitem__(self, i):\n"
                  "        if i == 3000 and os.getpid() != parent: os.kill(os.getpid(), signal.SIGKILL)\n"
                  "        return np.full((3, 8, 8), i % 251, np.uint8), i % 5\n"
                  "try:\n"
                  f"    granary.write({self.path('crash.db')!r}, Crashing(), workers=2)\n"
                  "except granary.WorkerError as e:\n"
                  "    print(e)\n"
                  "print('children left:', len(multiprocessing.active_children()))\n")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertRegex(done.stdout, r"a worker process ended abruptly \(killed by a signal: a crash in the "
                                      r"dataset's code, or the out-of-memory killer\) while reading split 'train' "
                                      r"\(samples \d+ to \d+ were being read\)")
        first, last = map(int, re.search(r"samples (\d+) to (\d+)", done.stdout).groups())
        self.assertTrue(first <= 3000 <= last, done.stdout)
        self.assertIn("children left: 0", done.stdout)
        self.assert_no_db(self.path("crash.db"))
        self.assertFalse(os.path.exists(self.path("crash.db") + ".partial"))

    def test_a_worker_the_out_of_memory_killer_ends_is_said_to_be_ended_so(self):
        # A dataset whose items take more memory than a container allows (docker run -m): the kernel's count
        # of such kills names the cause, where the message above could only guess between two.
        name = f"granary-test-write-oom-{os.getpid()}"
        if os.access("/sys/fs/cgroup/memory", os.W_OK):
            folder, files = f"/sys/fs/cgroup/memory/{name}", {"memory.limit_in_bytes": str(256 << 20)}
        elif "memory" in open("/sys/fs/cgroup/cgroup.subtree_control").read() and os.access("/sys/fs/cgroup",
                                                                                           os.W_OK):
            folder, files = f"/sys/fs/cgroup/{name}", {"memory.max": str(256 << 20), "memory.swap.max": "0"}
        else:
            self.skipTest("this process may not make a memory cgroup")
        os.makedirs(folder, exist_ok=True)
        try:
            for file, value in files.items():
                with open(os.path.join(folder, file), "w") as f:
                    f.write(value)
            script = ("import os, sys, numpy as np\n"
                      f"sys.path.insert(0, {os.path.join(BUILD, 'python')!r})\n"
                      "import granary\n"
                      "parent = os.getpid()\n"
                      "class Large:\n"
                      "    def __len__(self): return 4000\n"
                      "    def __getitem__(self, i):\n"
                      "        if i == 3000 and os.getpid() != parent: self.held = b'x' * (1 << 30)\n"
                      "        return np.full((3, 8, 8), i % 251, np.uint8), i % 5\n"
                      "try:\n"
                      f"    granary.write({self.path('large.db')!r}, Large(), workers=2)\n"
                      "except granary.WorkerError as e:\n"
                      "    print(e)\n")
            joined = f"echo $$ > {folder}/cgroup.procs && exec {sys.executable} -c \"$0\""
            done = subprocess.run(["sh", "-c", joined, script], capture_output=True, text=True, timeout=120)
        finally:
            os.rmdir(folder)  # empty: the write and its workers have ended
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertRegex(done.stdout, r"a worker process ended abruptly \(the kernel's out-of-memory killer ended it, "
                                      r"the write's processes having outgrown the 256 MiB their memory cgroup allows: "
                                      r"fewer workers \(workers=2 now hold 2 copies")
        self.assert_no_db(self.path("large.db"))

    def test_a_torch_iterable_dataset_is_read_as_an_iterable(self):
        # torch's Dataset makes [] raise NotImplementedError; with a len, an IterableDataset looks map-style.
        import torch

        class Stream(torch.utils.data.IterableDataset):
            def __len__(self):
                return 50

            def __iter__(self):
                return ((np.full(4, k, np.float32), k % 2) for k in range(50))

        summary = granary.write(self.path("stream.db"), Stream())
        self.assertEqual(summary["splits"], [("train", 50)])
        self.assertEqual(float(granary.Dataset(self.path("stream.db"))[49]["input"][0]), 49.0)
        with self.assertRaisesRegex(granary.InvalidArgumentError, "is not a map-style dataset"):
            granary.write(self.path("stream2.db"), Stream(), workers=2)

    def test_split_of_and_val_fraction_name_each_items_split(self):
        data = [(np.full(4, k, np.float32), k % 2) for k in range(100)]
        db = self.path("split_of.db")
        granary.write(db, data, split_of=lambda i: "test" if i % 10 == 0 else "train")
        self.assertEqual([(s["name"], s["samples"]) for s in prep_info(db)["splits"]], [("test", 10), ("train", 90)])
        db2 = self.path("val.db")
        s1 = granary.write(db2, data, val_fraction=0.3)
        splits = dict(s1["splits"])
        self.assertEqual(splits["train"] + splits["val"], 100)
        self.assertTrue(15 <= splits["val"] <= 45, splits)
        s2 = granary.write(self.path("val2.db"), data, val_fraction=0.3)
        self.assertEqual(s1["content_hash"], s2["content_hash"])  # the same items each run

    def test_a_transform_that_draws_at_random_is_warned_of(self):
        from PIL import Image
        import torch
        import torchvision
        import warnings
        folder = self.path("few")
        os.makedirs(os.path.join(folder, "a"))
        for k in range(4):
            Image.new("RGB", (20, 20), (k * 50, 0, 0)).save(os.path.join(folder, "a", f"{k}.png"))
        T = torchvision.transforms
        augmented = T.Compose([T.RandomApply([T.ColorJitter(0.2)], p=0.5), T.RandomResizedCrop(8)])
        for transform, expected in ((augmented, "(RandomApply, ColorJitter, RandomResizedCrop)"),
                                    (torch.nn.Sequential(T.Resize(8), T.RandomHorizontalFlip()), "(RandomHorizontalFlip)")):
            dataset = torch.utils.data.Subset(torchvision.datasets.ImageFolder(folder, transform=transform), [0, 1, 2])
            with self.assertWarnsRegex(UserWarning, r"split 'train': the dataset's transform draws at random "
                                       + re.escape(expected) + r"; the db stores one draw per sample.*augment='crop,flip'"):
                granary.write(self.path("augmented.db"), dataset, overwrite=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a transform that does not draw is not warned of
            granary.write(self.path("resized.db"), torchvision.datasets.ImageFolder(folder, transform=T.Resize((8, 8))))

    def test_images_of_another_size_are_refused_saying_how_to_resize_them(self):
        from PIL import Image
        photos = [(Image.new("RGB", size), 0) for size in ((40, 30), (40, 30), (50, 30))]  # PIL sizes are W x H
        with self.assertRaisesRegex(granary.InvalidArgumentError,
                                    r"sample 2 of split 'train': field 'input' has shape \[30, 50, 3\], but the "
                                    r"db's is \[30, 40, 3\] \(from the first sample\); a field's images share one "
                                    r"size: resize them in the dataset .*Resize\(\(H, W\)\).*--size WxH"):
            granary.write(self.path("sizes.db"), photos)
        chw = [(np.zeros((3, 8, 8), np.float32), 0), (np.zeros((3, 8, 9), np.float32), 0)]
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"\[3, 8, 9\].*share one size"):
            granary.write(self.path("chw.db"), chw)
        channels = [(np.zeros((8, 8, 3), np.uint8), 0), (np.zeros((8, 8, 4), np.uint8), 0)]
        with self.assertRaises(granary.InvalidArgumentError) as refused:  # another channel count: not a size
            granary.write(self.path("rgba.db"), channels)
        self.assertNotIn("resize", str(refused.exception))

    def test_a_sample_that_does_not_fit_is_named_and_no_db_is_left(self):
        db = self.path("bad.db")
        data = [(np.zeros((2, 3), np.float32), 1)] * 5 + [(np.zeros((3, 3), np.float32), 1)]
        with self.assertRaisesRegex(granary.InvalidArgumentError,
                                    r"sample 5 of split 'train': field 'input' has shape \[3, 3\], but the db's "
                                    r"is \[2, 3\]"):
            granary.write(db, data)
        self.assert_no_db(db)
        self.assertFalse(os.path.exists(db + ".partial"))
        for bad, message in (({"a": 1}, r"fields \['a'\], but the db's are \['input', 'target'\]"),
                             ((np.zeros((2, 3), np.float32), "x"), "field 'target' is int64 \\[\\] in the db, not str"),
                             ((np.zeros((2, 3), np.complex64), 1), "complex64")):
            with self.assertRaisesRegex(granary.InvalidArgumentError, message):
                granary.write(db, data[:3] + [bad])
            self.assert_no_db(db)
        with self.assertRaisesRegex(granary.InvalidArgumentError, "label -1 is negative"):
            granary.write(db, [(np.zeros(2, np.float32), -1)])
        with self.assertRaisesRegex(granary.InvalidArgumentError, "zstd_level=30"):
            granary.write(db, data[:3], zstd_level=30)
        with self.assertRaisesRegex(granary.InvalidArgumentError, "sample 1 of split 'test': field 'input'"):
            with granary.Writer(db) as w:  # a spooled split's samples are checked as they come
                w.write(data[0], "train")
                w.write(data[0], "test")
                w.write(data[5], "test")
        self.assert_no_db(db)
        self.assertEqual([f for f in os.listdir(self.tmp) if "spool" in f], [])

    def test_splits_may_interleave(self):
        db = self.path("interleaved.db")
        made = []  # the spools' temporary files: one per waiting split (there was one per sample)
        spool_file = granary.writer.tempfile.TemporaryFile
        with mock.patch.object(granary.writer.tempfile, "TemporaryFile",
                               lambda *a, **k: made.append(1) or spool_file(*a, **k)):
            with granary.Writer(db, batch=7) as w:
                for k in range(100):
                    w.write((np.full(3, k, np.float32), k % 2), split=("train", "val", "test")[k % 3])
        self.assertEqual(len(made), 2)
        d = granary.describe(db)
        self.assertEqual([(s["name"], s["samples"]) for s in d["splits"]], [("train", 34), ("val", 33), ("test", 33)])
        for split, first in (("train", 0), ("val", 1), ("test", 2)):
            values = [int(granary.Dataset(db, split)[i]["input"][0]) for i in range(len(granary.Dataset(db, split)))]
            self.assertEqual(values, list(range(first, 100, 3)))

    def test_an_exception_in_the_block_or_a_kill_leaves_no_db(self):
        db = self.path("aborted.db")
        with self.assertRaises(KeyError):
            with granary.Writer(db) as w:
                for k in range(5000):
                    w.write((np.full(16, k, np.float32), k % 3))
                raise KeyError("the user's own error")
        self.assert_no_db(db)
        self.assertFalse(os.path.exists(db + ".partial"))
        script = ("import os, signal, sys, numpy as np\n"
                  f"sys.path.insert(0, {os.path.join(BUILD, 'python')!r})\n"
                  "import granary\n"
                  f"w = granary.Writer({db!r}, batch=100)\n"
                  "for k in range(3000):\n"
                  "    w.write((np.full(64, k, np.float32), k % 3))\n"
                  "os.kill(os.getpid(), signal.SIGKILL)\n")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        self.assertEqual(done.returncode, -signal.SIGKILL, done.stderr)
        self.assert_no_db(db)
        self.assertTrue(os.path.exists(db + ".partial"))  # no reader opens it
        self.assertNotEqual(run(PREP, "info", db, check=False).returncode, 0)
        granary.write(db, [(np.zeros(64, np.float32), 0)])  # the killed writer's partial folder is replaced
        self.assertEqual(prep_info(db)["splits"][0]["samples"], 1)
        self.assertFalse(os.path.exists(db + ".partial"))

    def test_two_writers_of_one_path_and_existing_paths(self):
        db = self.path("busy.db")
        first = granary.Writer(db)
        first.write((np.zeros(3, np.float32), 0))
        with self.assertRaisesRegex(granary.Error, "busy.db"):
            granary.write(db, [(np.zeros(3, np.float32), 0)])
        first.close()
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"busy.db: already exists \(pass overwrite=True"):
            granary.write(db, [(np.zeros(3, np.float32), 1)])
        self.assertEqual(granary.write(db, [(np.zeros(3, np.float32), 1)] * 2, overwrite=True)["splits"],
                         [("train", 2)])
        folder = self.path("mine")
        os.makedirs(folder)
        open(os.path.join(folder, "keep.txt"), "w").close()
        with self.assertRaisesRegex(granary.Error, "mine"):
            granary.write(folder, [(np.zeros(3, np.float32), 1)], overwrite=True)
        self.assertTrue(os.path.exists(os.path.join(folder, "keep.txt")))
        # Where the system refuses the write: a WriteError (an OSError), naming the path and why.
        with self.assertRaisesRegex(granary.WriteError, r"keep.txt/x.db.partial: create directory failed: Not a "
                                                        r"directory \(errno 20\)"):
            granary.write(os.path.join(folder, "keep.txt", "x.db"), [(np.zeros(3, np.float32), 1)])
        self.assertTrue(issubclass(granary.WriteError, OSError))

    # A map-style dataset of 12 KiB images (records that are not small: the write is journaled after 16
    # samples), in two splits; `kill_at` kills the writing process when that item is read.
    RESUMABLE = ("import os, signal, sys, numpy as np\n"
                 f"sys.path.insert(0, {os.path.join(BUILD, 'python')!r})\n"
                 "import granary\n"
                 "class Images:\n"
                 "    def __init__(self, n, kill_at=-1, parent=os.getpid()):\n"
                 "        self.n, self.kill_at, self.parent, self.read = n, kill_at, parent, []\n"
                 "    def __len__(self): return self.n\n"
                 "    def __getitem__(self, k):\n"
                 "        if k == self.kill_at: os.kill(self.parent, signal.SIGKILL)\n"
                 "        self.read.append(k)\n"
                 "        return np.random.default_rng(k).integers(0, 256, (64, 64, 3), np.uint8), k % 7\n")

    def test_a_killed_write_resumes_to_the_db_an_uninterrupted_one_makes(self):
        db = self.path("resumed.db")
        script = self.RESUMABLE + (f"granary.write({db!r}, {{'train': Images(1500, kill_at=1200), "
                                   f"'test': Images(300)}}, workers=2)\n")
        # A worker kills the writing process: the workers go with it (they held the build's lock).
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, -signal.SIGKILL, done.stderr)
        self.assert_no_db(db)
        self.assertTrue(os.path.exists(db + ".partial"))
        with self.assertRaisesRegex(granary.NotFoundError, r"resumed.db.partial holds an interrupted build: "
                                                           r"granary.write\(\.\.\., resume=True\) continues it"):
            granary.Dataset(db)
        exec(self.RESUMABLE, namespace := {})
        images = namespace["Images"]
        with self.assertRaisesRegex(granary.FailedPreconditionError, r"zstd_level.*resume with the same samples"):
            granary.write(db, {"train": images(1500), "test": images(300)}, zstd_level=5, resume=True)
        self.assertTrue(os.path.exists(db + ".partial"))  # refused: kept
        train, test = images(1500), images(300)
        summary = granary.write(db, {"train": train, "test": test}, resume=True)
        stored = summary["resumed_samples"]
        self.assertTrue(300 <= stored < 1200, summary)  # the samples committed before the kill
        self.assertEqual(train.read[0], 0)  # the schema's sample
        self.assertEqual(train.read[1:], list(range(stored, 1500)))  # the stored ones are not read again
        whole = granary.write(self.path("whole.db"), {"train": images(1500), "test": images(300)})
        self.assertEqual(summary["content_hash"], whole["content_hash"])
        self.assertEqual(summary["splits"], [("train", 1500), ("test", 300)])
        self.assertEqual(prep_info(db)["classes"], [str(k) for k in range(7)])
        self.assertEqual(prep_info(db)["class_counts"], prep_info(self.path("whole.db"))["class_counts"])
        # On a terminal (progress=True) the write ends with a summary line, which says what was kept.
        script = self.RESUMABLE + (f"granary.write({self.path('shown.db')!r}, Images(40), progress=True)\n")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        self.assertRegex(done.stderr, r"granary.write: wrote .*shown.db in [\d.]+ s: 1 split, 40 samples, [\d.]+ MB "
                                      r"\([\d.]+x of decoded\), content hash xxh64:[0-9a-f]{16}\n$")
        self.assertFalse(os.path.exists(db + ".partial"))
        self.assertEqual(run(PREP, "verify", db).returncode, 0)

    def test_a_writer_resumed_skips_the_samples_stored_and_names_one_too_many(self):
        # The same generator code run again with resume=True, splits interleaved: killed while split 'val' (the
        # first to come) streamed and 'train' waited in its spool; .resumed says what the writer skips.
        db = self.path("generator.db")
        body = ("with granary.Writer({db!r}, resume={resume}, batch=50) as w:\n"
                "    for k in range(2000):\n"
                "        if k == {kill_at}: os.kill(os.getpid(), signal.SIGKILL)\n"
                "        w.write((np.random.default_rng(k).integers(0, 256, 12288, np.uint8), k % 3),\n"
                "                split='val' if k % 4 == 0 else 'train')\n"
                "print(json.dumps([w.resumed, w.summary['content_hash'], w.summary['resumed_samples']]))\n")
        runs = {}
        for name, resume, kill_at, path in (("killed", False, 1700, db), ("resumed", True, -1, db),
                                             ("whole", False, -1, self.path("whole.db"))):
            script = self.RESUMABLE + "import json\n" + body.format(db=path, resume=resume, kill_at=kill_at)
            runs[name] = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        self.assertEqual(runs["killed"].returncode, -signal.SIGKILL, runs["killed"].stderr)
        for name in ("resumed", "whole"):
            self.assertEqual(runs[name].returncode, 0, runs[name].stderr)
        resumed, resumed_hash, stored = json.loads(runs["resumed"].stdout)
        whole_hash = json.loads(runs["whole"].stdout)[1]
        self.assertEqual(list(resumed), ["val"])
        self.assertTrue(0 < resumed["val"] == stored <= 425, runs["resumed"].stdout)
        self.assertEqual(resumed_hash, whole_hash)
        self.assertEqual([(s["name"], s["samples"]) for s in granary.describe(db)["splits"]],
                         [("val", 500), ("train", 1500)])

        # Generators in granary.write: 'train' finished, 'test' killed; resumed with one 'train' sample more.
        more = self.path("more.db")
        gen = ("def gen(n, kill_at=-1):\n"
               "    for k in range(n):\n"
               "        if k == kill_at: os.kill(os.getpid(), signal.SIGKILL)\n"
               "        yield np.random.default_rng(k).integers(0, 256, (64, 64, 3), np.uint8), k % 7\n")
        script = self.RESUMABLE + gen + f"granary.write({more!r}, {{'train': gen(400), 'test': gen(1300, 1100)}})\n"
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, -signal.SIGKILL, done.stderr)
        exec(self.RESUMABLE + gen, namespace := {})
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"split 'train': the interrupted write finished it "
                                                                  r"with 400 samples, and more came now"):
            granary.write(more, {"train": namespace["gen"](401), "test": namespace["gen"](1300)}, resume=True)
        summary = granary.write(more, {"train": namespace["gen"](400), "test": namespace["gen"](1300)}, resume=True)
        self.assertTrue(400 < summary["resumed_samples"] <= 400 + 1024, summary)  # handed over 1024 at a time
        self.assertEqual(summary["splits"], [("train", 400), ("test", 1300)])

    def test_a_write_its_disk_cannot_hold_is_warned_of_long_before_the_disk_fills(self):
        # A 8 MiB disk (a tmpfs in a private mount namespace) for 5,000 samples of 8 kB: after the first thousand the
        # write says, on the user's line, what the rest needs; it then fails on the full disk, and the same write
        # with resume=True on the disk grown finishes with no warning (-W error).
        if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
            self.skipTest("no unshare: user namespaces are off")
        disk = self.path("disk")
        os.mkdir(disk)
        script = (f"import sys; sys.path.insert(0, {os.path.join(BUILD, 'python')!r})\n"
                  "import numpy as np, granary\n"
                  "rng = np.random.default_rng(0)\n"
                  "data = [(rng.integers(0, 256, (64, 64), np.uint8), k % 3) for k in range(5000)]\n"
                  "try:\n"
                  f"    granary.write({disk + '/db'!r}, data, dictionary='off', resume=True)\n"
                  "except granary.WriteError as e:\n"
                  "    print('failed:', e, file=sys.stderr)\n")
        done = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=8m tmpfs {disk} && "
                               f"{sys.executable} -c \"$1\"; echo grown >&2; mount -o remount,size=64m {disk} && "
                               f"{sys.executable} -W error -c \"$1\"; ls {disk}", "sh", script],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        first, second = done.stderr.split("grown\n")
        self.assertRegex(first, r"<string>:6: UserWarning: granary.write: .*/disk/db.partial: the db will need about "
                                r"4\d MB more \(4000 samples still to come, at the 8.2 kB a sample of the 1000 "
                                r"written\), but its disk has 8.\d MB free: it will fill before the db is complete\. "
                                r".*granary.write\(\.\.\., resume=True\) continues it\n"
                                r"failed: .*No space left on device")
        self.assertEqual(second, "")
        self.assertEqual(done.stdout, "db\n")

    def test_an_error_that_stops_a_journaled_write_says_it_can_be_resumed(self):
        db = self.path("noted.db")
        with self.assertRaises(KeyError) as caught:
            with granary.Writer(db, batch=100) as w:
                for k in range(500):
                    w.write((np.random.default_rng(k).integers(0, 256, (64, 64, 3), np.uint8), k % 3))
                raise KeyError("the user's own error")
        self.assertIn(f"granary: {db}.partial keeps the samples written so far; the same write with resume=True "
                      f"continues from there", getattr(caught.exception, "__notes__", []))
        self.assert_no_db(db)


if __name__ == "__main__":
    unittest.main()
