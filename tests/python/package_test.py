#!/usr/bin/python3
"""The granary Python package (python/granary, built into build/python) against
the C++ tools: its readers give what `prep cat` gives, DataLoader workers and
Loader ranks cover a split exactly once, a Loader resumes mid-epoch on another
world size, a 2-process DDP run trains, and bad dbs raise granary.Error
subclasses with the C++ tools' message.

    GRANARY_PYTHONPATH=build/python GRANARY_PREP=build/preprocess/prep /usr/bin/python3 tests/python/package_test.py
"""
import collections
import concurrent.futures
import json
import multiprocessing
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHONPATH = os.environ.get("GRANARY_PYTHONPATH", os.path.join(ROOT, "build/python"))
sys.path.insert(0, PYTHONPATH)
import granary  # noqa: E402
import torch  # noqa: E402
import torch.utils.data  # noqa: E402

PREP = os.environ.get("GRANARY_PREP", os.path.join(ROOT, "build/preprocess/prep"))
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def run(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def write_idx(path, array, type_code, big_endian):
    with open(path, "wb") as f:
        f.write(bytes([0, 0, type_code, array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape))
        f.write(array.astype(big_endian).tobytes())


def id_images(n):
    """2 x 2 uint8 images that spell their index: pixels (i % 256, i // 256, 7, 9)."""
    images = np.zeros((n, 2, 2), np.uint8)
    images[:, 0, 0] = np.arange(n) % 256
    images[:, 0, 1] = np.arange(n) // 256
    images[:, 1, 0], images[:, 1, 1] = 7, 9
    return images


def stored_ids(images):
    """Indices spelled by a batch of id_images as stored (uint8, N x 1 x 2 x 2)."""
    pixels = images.reshape(len(images), 4).long()
    return (pixels[:, 0] + 256 * pixels[:, 1]).tolist()


def ids_of(batch_input):
    """Indices spelled by a Loader batch of id_images (float values / 255, N x 1 x 2 x 2)."""
    pixels = torch.round(batch_input * 255).to(torch.int64).reshape(len(batch_input), 4)
    return (pixels[:, 0] + 256 * pixels[:, 1]).tolist()


def _ids_read_by(loader):
    """What a Loader that came by pickle (into a spawned process) reads: the rest of its epoch."""
    return [i for x, _ in loader for i in ids_of(x)]


class _IterableLoader(torch.utils.data.IterableDataset):
    """A granary.Loader handed to DataLoader workers (created in the parent)."""

    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        return iter(self.loader)


class PackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="granary-package-")
        cls.dbs = {}
        rng = np.random.default_rng(0)
        raw = os.path.join(cls.tmp, "raw-idx")  # uint8 images (prep's IDX images are uint8)
        os.makedirs(raw)
        write_idx(os.path.join(raw, "train-images-idx3-ubyte"), rng.integers(0, 256, (40, 3, 5)), 0x08, ">u1")
        write_idx(os.path.join(raw, "train-labels-idx1-ubyte"), np.arange(40) % 10, 0x08, ">u1")
        cls.dbs["idx"] = os.path.join(cls.tmp, "idx")
        run(PREP, "build", raw, cls.dbs["idx"], "--no-progress")
        csv = os.path.join(cls.tmp, "t.csv")  # float32 features, int64 labels
        with open(csv, "w") as f:
            f.write("a,b,y\n" + "".join(f"{i * 0.5},{-i},{i % 3}\n" for i in range(50)))
        cls.dbs["csv"] = os.path.join(cls.tmp, "csv")
        run(PREP, "build", csv, cls.dbs["csv"], "--label", "y", "--no-progress")
        ids = os.path.join(cls.tmp, "raw-ids")
        os.makedirs(ids)
        write_idx(os.path.join(ids, "train-images-idx3-ubyte"), id_images(1001), 0x08, ">u1")
        write_idx(os.path.join(ids, "train-labels-idx1-ubyte"), np.arange(1001) % 10, 0x08, ">u1")
        cls.dbs["ids"] = os.path.join(cls.tmp, "ids")
        run(PREP, "build", ids, cls.dbs["ids"], "--no-progress", "--shards", "3")
        cls.dbs["fashion"] = os.path.join(cls.tmp, "fashion")
        run(PREP, "build", FASHION_MNIST, cls.dbs["fashion"], "--limit", "1200", "--no-progress")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_both_python_readers_equal_prep_cat_on_every_dtype(self):
        # Every dtype prep writes: uint8 images, float32 features, int64 labels.
        self.assertTrue(granary.native_available())
        for name in ("idx", "csv", "fashion"):
            db = self.dbs[name]
            native = granary.Dataset(db, backend="native")
            python = granary.Dataset(db, backend="python")
            self.assertEqual(len(native), len(python))
            for index in (0, 7, len(native) - 1):
                with self.subTest(dtype=name, index=index):
                    cat = json.loads(run(PREP, "cat", db, "--split", "train", "--index", str(index),
                                         "--json").stdout)["fields"]
                    for sample in (native[index], python[index]):
                        self.assertEqual(set(sample), set(cat))
                        for field, tensor in sample.items():
                            self.assertEqual(str(tensor.dtype), "torch." + cat[field]["dtype"])
                            self.assertEqual(list(tensor.shape), cat[field]["shape"])
                            np.testing.assert_array_equal(tensor.reshape(-1).numpy(),
                                                          np.array(cat[field]["values"], tensor.numpy().dtype))
        x, y = granary.Dataset(self.dbs["csv"], as_tuple=True)[4]
        self.assertEqual(x.tolist(), [2.0, -4.0])
        self.assertEqual(int(y), 1)

    def test_a_dataloader_with_two_workers_covers_the_split_once(self):
        dataset = granary.Dataset(self.dbs["ids"], as_tuple=True)
        loader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2)
        seen = []
        for images, labels in loader:
            self.assertEqual(images.dtype, torch.uint8)
            seen += stored_ids(images)
            self.assertEqual(labels.tolist(), [i % 10 for i in seen[-len(labels):]])
        self.assertEqual(sorted(seen), list(range(1001)))
        # DistributedSampler's ranks split it too (its own padding: 1001 over 2).
        halves = []
        for rank in range(2):
            sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas=2, rank=rank)
            loader = torch.utils.data.DataLoader(dataset, batch_size=50, sampler=sampler, num_workers=2)
            halves.append([i for images, _ in loader for i in stored_ids(images)])
        self.assertEqual(set(halves[0]) | set(halves[1]), set(range(1001)))
        self.assertEqual(len(halves[0]) + len(halves[1]), 1002)

    def test_a_db_rebuilt_under_a_dataset_is_refused_in_its_workers_naming_both_hashes(self):
        db = os.path.join(self.tmp, "rebuilt")
        raw = os.path.join(self.tmp, "raw-rebuilt")
        os.makedirs(raw)
        write_idx(os.path.join(raw, "train-images-idx3-ubyte"), id_images(60), 0x08, ">u1")
        write_idx(os.path.join(raw, "train-labels-idx1-ubyte"), np.arange(60) % 10, 0x08, ">u1")
        run(PREP, "build", raw, db, "--no-progress")
        for backend in ("native", "python"):
            with self.subTest(backend=backend):
                dataset = granary.Dataset(db, as_tuple=True, backend=backend)
                first = dataset.content_hash
                loader = torch.utils.data.DataLoader(dataset, batch_size=20, num_workers=2)
                self.assertEqual(sum(len(y) for _, y in loader), 60)
                # Other content, the same count: labels shifted by one.
                write_idx(os.path.join(raw, "train-labels-idx1-ubyte"), (np.arange(60) + 1) % 10, 0x08, ">u1")
                run(PREP, "build", raw, db, "--no-progress", "--force")
                with self.assertRaises(Exception) as caught:
                    for _ in loader:
                        pass
                message = str(caught.exception)
                self.assertIn("FailedPreconditionError", message)
                self.assertIn(first, message)
                now = granary.describe(db)["content_hash"]
                self.assertNotEqual(now, first)
                self.assertIn(now, message)
                write_idx(os.path.join(raw, "train-labels-idx1-ubyte"), np.arange(60) % 10, 0x08, ">u1")
                run(PREP, "build", raw, db, "--no-progress", "--force")
        # A Loader opened again after fork checks the same.
        loader = granary.Loader(db, batch_size=20, threads=1)
        write_idx(os.path.join(raw, "train-labels-idx1-ubyte"), (np.arange(60) + 1) % 10, 0x08, ">u1")
        run(PREP, "build", raw, db, "--no-progress", "--force")
        pid = os.fork()
        if pid == 0:
            try:
                list(loader)
                os._exit(0)
            except granary.FailedPreconditionError:
                os._exit(3)
            finally:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 3)

    def test_drop_last_is_dataloaders_and_sampler_drop_last_distributedsamplers(self):
        # DataLoader's drop_last: the last short batch of a rank is not given.
        loader = granary.Loader(self.dbs["ids"], batch_size=100, threads=1, drop_last=True)
        sizes = [len(y) for _, y in loader]
        self.assertEqual(sizes, [100] * 10)
        self.assertEqual(len(loader), 10)
        self.assertEqual(len(granary.Loader(self.dbs["ids"], batch_size=100, threads=1)), 11)
        # DistributedSampler's drop_last: 1001 over 2 ranks is 500 each, not 501 with one padded.
        for sampler_drop_last, per_rank in ((False, 501), (True, 500)):
            loader = granary.Loader(self.dbs["ids"], batch_size=1000, rank=1, world=2, threads=1,
                                    sampler_drop_last=sampler_drop_last)
            self.assertEqual(sum(len(y) for _, y in loader), per_rank)

    def test_a_loop_written_for_dataloader_finds_its_attributes(self):
        # PyTorch's MNIST example logs batch_idx * len(data) of len(train_loader.dataset) and divides its summed
        # test loss by len(test_loader.dataset); DDP scripts call train_loader.sampler.set_epoch(epoch).
        loader = granary.Loader(self.dbs["ids"], batch_size=100, rank=1, world=2, threads=1)
        self.assertEqual((loader.batch_size, len(loader), len(loader.dataset)), (100, 6, 1001))
        self.assertEqual(len(loader.sampler), 501)  # this rank's samples, one padded
        self.assertEqual((loader.sampler.rank, loader.sampler.num_replicas), (1, 2))
        self.assertEqual(loader.dataset.classes, loader.classes)
        x, y = loader.dataset[0]
        self.assertEqual(int(y), 0)
        loader.sampler.set_epoch(3)
        self.assertEqual(loader.sampler.epoch, 3)
        by_sampler = torch.cat([y for _, y in loader])
        other = granary.Loader(self.dbs["ids"], batch_size=100, rank=1, world=2, threads=1)
        other.set_epoch(3)
        self.assertTrue(torch.equal(by_sampler, torch.cat([y for _, y in other])))
        other.set_epoch(4)
        self.assertFalse(torch.equal(by_sampler, torch.cat([y for _, y in other])))

    def test_two_iterators_of_one_loader_never_share_its_stream(self):
        loader = granary.Loader(self.dbs["ids"], batch_size=100, threads=2)
        with self.assertRaises(granary.FailedPreconditionError):
            for _ in zip(iter(loader), iter(loader)):
                pass
        # The newest iterator reads the whole epoch, once; an older one raises.
        old = iter(loader)
        next(old)
        ids = [i for images, _ in loader for i in ids_of(images)]
        self.assertEqual(sorted(ids), list(range(1001)))
        with self.assertRaises(granary.FailedPreconditionError):
            next(old)
        # A loop left early leaves the next one a whole epoch.
        for _ in loader:
            break
        self.assertEqual(sum(len(y) for _, y in loader), 1001)

    def test_loader_ranks_cover_an_epoch_once_plus_the_reported_padding(self):
        for epoch in (0, 3):
            counts = collections.Counter()
            padded = None
            for rank in range(2):
                loader = granary.Loader(self.dbs["ids"], batch_size=64, rank=rank, world=2, seed=5, threads=2)
                loader.set_epoch(epoch)
                padded = loader.plan()["padded"]
                batches = 0
                for images, labels in loader:
                    self.assertEqual(images.dtype, torch.float32)
                    self.assertEqual(list(images.shape[1:]), [1, 2, 2])
                    ids = ids_of(images)
                    self.assertEqual(labels.tolist(), [i % 10 for i in ids])
                    counts.update(ids)
                    batches += 1
                self.assertEqual(batches, len(loader))
            self.assertEqual(padded, 1)
            self.assertEqual(set(counts), set(range(1001)))
            self.assertEqual(sum(counts.values()), 1001 + padded)
        # Epochs are shuffled differently, and as `loader order` says.
        first = [ids_of(x) for x, _ in granary.Loader(self.dbs["ids"], batch_size=1001, seed=5)][0]
        order = json.loads(run(os.path.join(os.path.dirname(PREP), "../loader/loader"), "order", self.dbs["ids"],
                               "--seed", "5", "--json").stdout)["indices"]
        self.assertEqual(first, order)

    def test_a_loader_resumes_mid_epoch_on_another_world_size(self):
        consumed = []
        loaders = [granary.Loader(self.dbs["ids"], batch_size=50, rank=r, world=2, seed=1) for r in range(2)]
        iterators = [iter(loader) for loader in loaders]
        for _ in range(4):  # ranks step in lockstep, as in training
            for it in iterators:
                consumed += ids_of(next(it)[0])
        state = loaders[0].state_dict()
        self.assertEqual(state, {"epoch": 0, "position": 400})
        self.assertEqual(loaders[1].state_dict(), state)
        resumed = granary.Loader(self.dbs["ids"], batch_size=64, seed=1)
        resumed.load_state_dict(state)
        self.assertEqual(len(resumed), (1001 - 400 + 63) // 64)
        rest = [i for x, _ in resumed for i in ids_of(x)]
        self.assertEqual(sorted(consumed + rest), list(range(1001)))

    def test_describe_tells_what_a_db_holds_and_fields_can_be_named(self):
        about = granary.describe(self.dbs["fashion"])
        info = json.loads(run(PREP, "info", self.dbs["fashion"], "--json").stdout)
        self.assertEqual(about["content_hash"], info["content_hash"])
        self.assertEqual([(s["name"], s["samples"]) for s in about["splits"]], [("train", 1200), ("test", 1200)])
        self.assertEqual({f["name"]: (f["dtype"], f["shape"]) for f in about["fields"]},
                         {"image": ("uint8", [1, 28, 28]), "label": ("int64", [])})
        self.assertEqual((about["input_field"], about["target_field"], about["input_shape"]), ("image", "label", [1, 28, 28]))
        self.assertEqual((about["num_classes"], len(about["classes"])), (10, 10))
        x, _ = next(iter(granary.Loader(self.dbs["fashion"], batch_size=4)))
        self.assertEqual(list(x.shape[1:]), about["input_shape"])  # what the Loader batches
        csv = granary.describe(self.dbs["csv"])
        self.assertEqual((csv["input_field"], csv["input_shape"], csv["num_classes"]), ("features", [2], 3))
        self.assertEqual(about["statistics"], {})  # images: none
        # A feature db's statistics are its training features' (what to standardise with).
        features = np.stack([np.asarray(x) for x, _ in granary.Dataset(self.dbs["csv"], as_tuple=True)])
        recorded = csv["statistics"]["train"]["features"]
        self.assertEqual((recorded["samples"], recorded["missing"]), (len(features), [0, 0]))
        np.testing.assert_allclose(recorded["mean"], features.astype(np.float64).mean(0), rtol=1e-12)
        np.testing.assert_allclose(recorded["std"], features.astype(np.float64).std(0), rtol=1e-9)
        self.assertEqual(recorded["max"], features.max(0).tolist())
        # The fields by name; a wrong name is refused, naming it.
        x, y = next(iter(granary.Loader(self.dbs["csv"], batch_size=5, shuffle="none", input_field="features",
                                        target_field="label")))
        self.assertEqual(x[1].tolist(), [0.5, -1.0])
        with self.assertRaises(granary.InvalidArgumentError) as caught:
            granary.Loader(self.dbs["csv"], input_field="nope")
        self.assertIn("input_field nope", str(caught.exception))
        with self.assertRaises(granary.InvalidArgumentError) as caught:
            granary.Dataset(self.dbs["csv"], as_tuple=True, target_field="nope")
        self.assertIn("target_field nope", str(caught.exception))
        with self.assertRaises(granary.NotFoundError):
            granary.describe(os.path.join(self.tmp, "absent"))
        # The class and feature names, as torchvision's ImageFolder gives classes and class_to_idx.
        fashion = granary.Dataset(self.dbs["fashion"])
        self.assertEqual(fashion.classes, about["classes"])
        self.assertEqual(fashion.class_to_idx[fashion.classes[9]], 9)
        self.assertEqual(fashion.element_names, {})
        for table in (granary.Dataset(self.dbs["csv"]), granary.Loader(self.dbs["csv"])):
            self.assertEqual((table.classes, table.element_names), (["0", "1", "2"], {"features": ["a", "b"]}))

    def test_a_loader_used_after_fork_opens_its_own_in_the_child(self):
        # Its threads stay in the parent: iterated in a forked child it used to
        # deadlock or crash; now the child opens its own and gets the same epoch.
        loader = granary.Loader(self.dbs["ids"], batch_size=100, seed=2, threads=2)
        expected = [i for x, _ in loader for i in ids_of(x)]
        for attempt in range(4):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report what it read, then leave without cleanup
                os.close(read)
                try:
                    got = [i for x, _ in loader for i in ids_of(x)]
                    os.write(write, json.dumps(got).encode())
                finally:
                    os._exit(0)
            os.close(write)
            with os.fdopen(read) as f:
                got = json.loads(f.read() or "null")
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0, attempt)
            self.assertEqual(got, expected, attempt)
        # In DataLoader fork workers (each opens its own; each worker yields its loader's batches).
        wrapped = torch.utils.data.DataLoader(_IterableLoader(loader), batch_size=None, num_workers=2)
        self.assertEqual(sorted(i for x, _ in wrapped for i in ids_of(x)), sorted(expected * 2))
        self.assertEqual([i for x, _ in loader for i in ids_of(x)], expected)  # the parent's still works

    def test_a_loader_pickled_into_a_spawned_process_opens_there_where_it_stood(self):
        loader = granary.Loader(self.dbs["ids"], batch_size=100, seed=2, threads=2)
        loader.set_epoch(3)
        expected = [i for x, _ in loader for i in ids_of(x)]
        it = iter(loader)
        next(it)
        state = loader.state_dict()  # one batch into epoch 3
        loader.set_epoch(3)
        loader.load_state_dict(state)
        with concurrent.futures.ProcessPoolExecutor(1, multiprocessing.get_context("spawn")) as pool:
            got = pool.submit(_ids_read_by, loader).result(timeout=120)
        self.assertEqual(got, expected[100:])
        self.assertEqual([i for x, _ in pickle.loads(pickle.dumps(loader)) for i in ids_of(x)], expected[100:])

    def test_batches_are_not_copied_and_channels_last_keeps_the_shape(self):
        loader = granary.Loader(self.dbs["fashion"], batch_size=100, threads=2, channels_last=True,
                                normalize=(0.5, 0.25))
        x, y = next(iter(loader))
        self.assertEqual(list(x.shape), [100, 1, 28, 28])
        self.assertTrue(x.is_contiguous(memory_format=torch.channels_last))
        reference = granary.Dataset(self.dbs["fashion"])
        order = json.loads(run(os.path.join(os.path.dirname(PREP), "../loader/loader"), "order", self.dbs["fashion"],
                               "--json").stdout)["indices"]
        first = reference[order[0]]["image"].float() / 255
        torch.testing.assert_close(x[0], (first - 0.5) / 0.25)
        self.assertEqual(int(y[0]), int(reference[order[0]]["label"]))
        # normalize=True: 0.5 / 0.5 for gray images (ImageNet's for RGB); features are refused (below).
        x, _ = next(iter(granary.Loader(self.dbs["fashion"], batch_size=3, shuffle="none", normalize=True)))
        first = granary.Dataset(self.dbs["fashion"])[0]["image"].float() / 255
        torch.testing.assert_close(x[0], (first - 0.5) / 0.5)

    def test_bad_dbs_raise_granary_errors_with_the_tools_message(self):
        def prep_error(*args):
            result = run(PREP, *args, check=False)
            self.assertNotEqual(result.returncode, 0)
            return result.stderr.strip().split("\n")[-1].removeprefix("prep: ")

        not_a_db = os.path.join(self.tmp, "not-a-db")
        os.makedirs(not_a_db, exist_ok=True)
        for make in (lambda: granary.Dataset(not_a_db), lambda: granary.Loader(not_a_db)):
            with self.assertRaises(granary.NotFoundError) as caught:
                make()
            self.assertEqual(str(caught.exception), prep_error("info", not_a_db))
        split_folder = os.path.join(self.dbs["idx"], "train")  # a db's split folder where the db goes
        for backend in ("native", "python"):
            with self.assertRaises(granary.NotFoundError) as caught:
                granary.Dataset(split_folder, backend=backend)
            self.assertEqual(str(caught.exception), prep_error("info", split_folder))
            self.assertIn(f"it lies inside the db {self.dbs['idx']}: name the db itself", str(caught.exception))
        with self.assertRaises(granary.NotFoundError):
            granary.Dataset(self.dbs["csv"], split="test")

        newer = os.path.join(self.tmp, "newer")
        shutil.copytree(self.dbs["csv"], newer)
        with open(os.path.join(newer, "manifest.json")) as f:
            manifest = json.load(f)
        manifest["format_version"] += 1
        with open(os.path.join(newer, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        for backend in ("native", "python"):
            with self.assertRaises(granary.FormatError) as caught:
                granary.Dataset(newer, backend=backend)
            self.assertIn("is newer than this reader's", str(caught.exception))
        with self.assertRaises(granary.FormatError) as caught:
            granary.Loader(newer)
        self.assertEqual(str(caught.exception), prep_error("info", newer))

        for name, value in (("batch_size", 0), ("threads", 0), ("rank", 2), ("augment", "spin"),
                            ("batch_size", True), ("batch_size", 64.0), ("normalize", (float("nan"), 1)),
                            ("normalize", (0.5, 0))):
            with self.assertRaises(granary.InvalidArgumentError, msg=f"{name}={value!r}"):
                granary.Loader(self.dbs["ids"], world=2, **{name: value})
        loader = granary.Loader(self.dbs["ids"], batch_size=64)
        for state in ({"epoch": -1, "position": 0}, {"epoch": 2 ** 64, "position": 0}, {"epoch": 0, "position": -1},
                      {"epoch": 0, "position": 1002}, {"epoch": 1.5, "position": 0}):
            with self.assertRaises(granary.InvalidArgumentError, msg=str(state)):
                loader.load_state_dict(state)
        loader.load_state_dict({"epoch": np.int64(3), "position": 1001})  # numpy integers are integers
        dataset = granary.Dataset(self.dbs["ids"])
        for index in (1.7, True, len(dataset), -len(dataset) - 1):
            with self.assertRaises(IndexError, msg=repr(index)):
                dataset[index]
        self.assertEqual(ids_of(dataset[np.int64(-1)]["image"].float().unsqueeze(0) / 255), [1000])

        # A manifest whose counts lie: both readers refuse, the pure-Python one too.
        lying = os.path.join(self.tmp, "lying")
        shutil.copytree(self.dbs["ids"], lying)
        with open(os.path.join(lying, "manifest.json")) as f:
            manifest = json.load(f)
        manifest["splits"][0]["count"] += 500
        manifest["splits"][0]["shards"][-1]["count"] += 500
        del manifest["class_counts"]  # which would have to lie too: the shards' counts are what is checked
        with open(os.path.join(lying, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        for backend in ("native", "python"):
            with self.assertRaises(granary.CorruptionError, msg=backend) as caught:
                dataset = granary.Dataset(lying, backend=backend)
                dataset[len(dataset) - 1]
            self.assertIn("the manifest says", str(caught.exception))
        # A db repository cloned without git-lfs: its shards, dictionary and manifest are pointers, named so.
        pointer = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 929792\n"
        lfs = os.path.join(self.tmp, "lfs")
        shutil.copytree(self.dbs["ids"], lfs)
        with open(os.path.join(lfs, "manifest.json")) as f:
            paths = [os.path.join(lfs, json.load(f)["splits"][0]["shards"][0]["path"])]
        if os.path.exists(os.path.join(lfs, "zstd.dict")):
            paths.append(os.path.join(lfs, "zstd.dict"))
        paths.append(os.path.join(lfs, "manifest.json"))  # last: the others are read through it
        for path in paths:
            with open(path, "w") as f:
                f.write(pointer)
            for backend in ("native", "python"):
                with self.assertRaises(granary.CorruptionError, msg=f"{backend} {path}") as caught:
                    dataset = granary.Dataset(lfs, backend=backend)
                    dataset[0]
                self.assertIn(f"{os.path.basename(path)}: is a Git LFS pointer, not the file itself",
                              str(caught.exception))
        # Element names that are no names: refused by both readers, as a CorruptionError.
        names = os.path.join(self.tmp, "names")
        shutil.copytree(self.dbs["csv"], names)
        with open(os.path.join(names, "manifest.json")) as f:
            manifest = json.load(f)
        manifest["element_names"] = {"features": ["a", 2]}
        with open(os.path.join(names, "manifest.json"), "w") as f:
            json.dump(manifest, f)
        for backend in ("native", "python"):
            with self.assertRaises(granary.CorruptionError, msg=backend) as caught:
                granary.Dataset(names, backend=backend)
            self.assertIn("element_names", str(caught.exception))

    def test_a_corrupt_record_is_a_corruption_error_naming_shard_and_key(self):
        db = os.path.join(self.tmp, "corrupt")
        shutil.copytree(self.dbs["fashion"], db)
        shard = os.path.join(db, "train", "shard-00000.mdb")
        import lmdb
        with lmdb.open(shard, subdir=False, readonly=True, lock=False).begin() as txn:
            key, value = list(txn.cursor())[2]  # the third record
        index = int.from_bytes(key, "big")
        with open(shard, "r+b") as f:  # flip a byte in the middle of its value
            data = f.read()
            at = data.find(value)
            self.assertEqual(data.find(value, at + 1), -1)
            f.seek(at + len(value) // 2)
            f.write(bytes([data[at + len(value) // 2] ^ 0x10]))
        result = run(PREP, "cat", db, "--split", "train", "--index", str(index), check=False)
        self.assertNotEqual(result.returncode, 0)
        message = result.stderr.strip().split("\n")[-1].removeprefix("prep: ")
        self.assertIn(f"shard-00000.mdb, key {index}: checksum mismatch", message)
        with self.assertRaises(granary.CorruptionError) as caught:
            granary.Dataset(db, backend="native")[index]
        self.assertEqual(str(caught.exception), message)
        with self.assertRaises(granary.CorruptionError) as caught:
            for _ in granary.Loader(db, batch_size=64, shuffle="none"):
                pass
        self.assertIn("shard-00000.mdb, key", str(caught.exception))

    def test_paths_in_any_form_arguments_by_their_names_and_what_a_saved_model_expects(self):
        # Round 3: a name that is not UTF-8, as bytes or as os.fsdecode's str;
        # a NUL byte (C would cut the name there) is an error, not another db.
        odd = os.path.join(os.fsencode(self.tmp), b"odd\xff.db")
        shutil.copytree(self.dbs["fashion"], os.fsdecode(odd))
        for path in (odd, os.fsdecode(odd)):
            self.assertEqual(granary.describe(path)["path"], os.fsdecode(odd))
            self.assertEqual(next(iter(granary.Loader(path, batch_size=2)))[0].shape[0], 2)
            for backend in ("native", "python"):
                self.assertEqual(len(granary.Dataset(path, backend=backend)), 1200)
        for call in (granary.describe, granary.Loader, lambda p: granary.Dataset(p, backend="python")):
            with self.assertRaises(granary.InvalidArgumentError) as caught:
                call(self.dbs["fashion"] + "\0junk")
            self.assertIn("cannot contain a NUL byte", str(caught.exception))
        with self.assertRaises(granary.NotFoundError) as caught:
            granary.describe(os.path.join(os.fsencode(self.tmp), b"absent\xfe.db"))
        self.assertIn(os.fsdecode(b"absent\xfe.db"), str(caught.exception))
        # The argument the user passed is named; set_epoch checks its epoch.
        with self.assertRaises(granary.InvalidArgumentError) as caught:
            granary.Loader(self.dbs["fashion"], target_field="image")
        self.assertIn("target_field image: is the input field", str(caught.exception))
        with self.assertRaises(granary.InvalidArgumentError):
            granary.Loader(self.dbs["fashion"]).set_epoch(-1)
        # Features: (mean, std) is for images; normalize=True standardises with the train split's statistics.
        with self.assertRaises(granary.InvalidArgumentError) as caught:
            granary.Loader(self.dbs["csv"], normalize=(100.0, 0.001))
        self.assertIn("normalisation is for images", str(caught.exception))
        raw, _ = next(iter(granary.Loader(self.dbs["csv"], batch_size=1 << 16, shuffle="none")))
        scaled, _ = next(iter(granary.Loader(self.dbs["csv"], batch_size=1 << 16, shuffle="none", normalize=True)))
        recorded = granary.describe(self.dbs["csv"])["statistics"]["train"]["features"]
        np.testing.assert_allclose(raw.mean(0).numpy(), recorded["mean"], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(scaled.numpy(), ((raw - torch.tensor(recorded["mean"])) /
                                                    torch.tensor(recorded["std"])).numpy(), rtol=1e-5, atol=1e-5)
        # A model `train --save`s says how its input was normalised.
        train = os.path.join(os.path.dirname(PREP), "../trainer/train")
        model = os.path.join(self.tmp, "ms.pt")
        run(train, "--db", self.dbs["fashion"], "--epochs", "1", "--ranks", "1", "--mean", "0.5", "--std", "0.25",
            "--save", model)
        info = granary.model_info(model)
        self.assertEqual((info["input_field"], info["input_shape"], info["normalize"]), ("image", [1, 28, 28], (0.5, 0.25)))
        self.assertEqual(len(info["classes"]), 10)
        files = {"granary.json": ""}
        torch.jit.load(model, _extra_files=files)
        self.assertEqual(json.loads(files["granary.json"])["mean"], 0.5)

    def test_a_two_process_ddp_run_trains(self):
        env = dict(os.environ, PYTHONPATH=PYTHONPATH)
        result = subprocess.run([sys.executable, os.path.join(ROOT, "examples/train_ddp.py"), self.dbs["fashion"],
                                 "--world", "2", "--epochs", "2", "--batch-size", "32", "--threads", "1"],
                                capture_output=True, text=True, env=env, timeout=240)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([line["epoch"] for line in lines], [0, 1])
        self.assertLess(lines[1]["loss"], lines[0]["loss"])
        self.assertEqual(lines[-1]["samples"], 1200)
        self.assertEqual(len(set(lines[-1]["parameter_checksums"])), 1)  # the ranks agree
        # The same script as two ranks of granary's launcher: the same run.
        launch = os.path.join(os.path.dirname(PREP), "../trainer/launch")
        under = subprocess.run([launch, "--ranks", "2", "--threads", "1", "--", sys.executable,
                                os.path.join(ROOT, "examples/train_ddp.py"), self.dbs["fashion"], "--epochs", "2",
                                "--batch-size", "32"], capture_output=True, text=True, env=env, timeout=240)
        self.assertEqual(under.returncode, 0, under.stderr)
        launched = [json.loads(line) for line in under.stdout.splitlines() if line.startswith("{")]
        for alone, ranked in zip(lines, launched):
            for key in ("epoch", "loss", "samples", "parameter_checksums"):
                self.assertEqual(alone[key], ranked[key], key)
        self.assertEqual(len(launched), 2)

    def test_a_loader_takes_rank_world_and_threads_from_the_launchers_variables(self):
        explicit = [ids_of(x) for x, _ in granary.Loader(self.dbs["ids"], batch_size=2000, rank=1, world=3, seed=2)]
        saved = dict(os.environ)
        try:
            os.environ.update(RANK="1", WORLD_SIZE="3")
            from_env = [ids_of(x) for x, _ in granary.Loader(self.dbs["ids"], batch_size=2000, seed=2)]
            self.assertEqual(from_env, explicit)
            given = [ids_of(x) for x, _ in granary.Loader(self.dbs["ids"], batch_size=2000, rank=0, world=1)]
            self.assertEqual(len(given[0]), 1001)  # what the caller says wins
            os.environ["GRANARY_LOADER_THREADS"] = "100000"
            with self.assertRaisesRegex(granary.InvalidArgumentError, "threads must be an integer in 1..[0-9]+, "
                                                                      "got 100000"):
                granary.Loader(self.dbs["ids"])
            os.environ["WORLD_SIZE"] = "two"
            with self.assertRaisesRegex(granary.InvalidArgumentError, "WORLD_SIZE='two' in the environment"):
                granary.Loader(self.dbs["ids"], threads=1)
        finally:
            os.environ.clear()
            os.environ.update(saved)


if __name__ == "__main__":
    unittest.main()
