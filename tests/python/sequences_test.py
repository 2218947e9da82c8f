#!/usr/bin/python3
"""Text and sequences from Python: a str given to granary.write is stored as
a text field (uint8 [-1], layout "utf-8", docs/FORMAT.md) and read back as the
same str by granary.Dataset (either backend, in DataLoader workers too),
while bytes stay bytes; the two are not mixed in one field, a str UTF-8
cannot hold is refused by its sample, and a db whose text is not UTF-8 is
named by the reader and by `prep verify`. `prep cat` and `prep info` show text
as text. Token ids and time series of any length are written with schema=
and -1 where each sample states the dim, read back with their own shape, and
batched by granary.pad_collate, padded to each batch's longest.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/sequences_test.py
"""
import functools
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

from testenv import PREP, TRAIN, run  # puts the build's granary on sys.path
import granary  # noqa: E402
import torch  # noqa: E402

CAPTIONS = ["a photo of a cat", "ein Foto einer Katze (ÄÖÜ ß)", "猫の写真", "emoji 🐈‍⬛ and a tab\there", "",
            "a line\nbreak"]


class Captions(torch.utils.data.Dataset):
    """A map-style dataset of captions and raw bytes, as a user's would be."""

    def __len__(self):
        return 120

    def __getitem__(self, i):
        return {"caption": CAPTIONS[i % len(CAPTIONS)] + f" #{i}", "blob": bytes([i % 256, 255, 0]), "label": i % 3}


class SequencesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="granary-sequences-test-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def test_a_str_is_read_back_as_the_same_str_and_bytes_as_bytes(self):
        db = self.path("captions")
        granary.write(db, Captions(), workers=2, progress=False)
        fields = {f["name"]: f for f in granary.describe(db)["fields"]}
        self.assertEqual(fields["caption"], {"name": "caption", "dtype": "uint8", "shape": [-1], "layout": "utf-8"})
        self.assertEqual(fields["blob"], {"name": "blob", "dtype": "uint8", "shape": [-1], "layout": ""})
        data = Captions()
        for backend in ("native", "python"):
            ds = granary.Dataset(db, backend=backend)
            for i in (0, 1, 2, 3, 4, 5, 119):
                sample = ds[i]
                self.assertEqual(sample["caption"], data[i]["caption"], (backend, i))
                self.assertIsInstance(sample["blob"], torch.Tensor)
                self.assertEqual(bytes(sample["blob"].numpy()), data[i]["blob"])
        # DataLoader's workers read the db again after fork; its collate makes a list of the strs.
        loader = torch.utils.data.DataLoader(granary.Dataset(db), batch_size=8, num_workers=2)
        batch = next(iter(loader))
        self.assertEqual(batch["caption"], [data[i]["caption"] for i in range(8)])
        self.assertEqual(batch["label"].tolist(), [i % 3 for i in range(8)])
        # prep shows the text as text and checks it.
        cat = run(PREP, "cat", db, "--index", "2").stdout
        self.assertIn('caption uint8 [', cat)
        self.assertIn('"猫の写真 #2"', cat)
        record = json.loads(run(PREP, "cat", db, "3", "--json").stdout)  # the index given as `prep cat DB 3`
        self.assertEqual(record["fields"]["caption"]["text"], data[3]["caption"])
        self.assertIn("caption uint8 [-1]  (text, UTF-8)", run(PREP, "info", db).stdout)
        run(PREP, "verify", db)
        # train has no model of text: it says where such a field is read.
        failed = subprocess.run([TRAIN, "--db", db, "--input-field", "caption"], capture_output=True, text=True)
        self.assertEqual(failed.returncode, 1, failed.stderr)
        self.assertIn("field 'caption' has shape [-1]: training needs a fixed shape of at least one dim (it is text); "
                      "train's models take images or feature vectors: read such a field in your own script with "
                      "granary.Dataset", failed.stderr)

    def test_pad_collate_pads_each_field_that_varies_and_gives_its_lengths(self):
        grids = [np.full((1 + i % 3, 1 + i % 2), i + 1, np.int16) for i in range(6)]  # two dims vary
        samples = [{"tokens": np.arange(1 + (i * 5) % 7, dtype=np.int64) + 1, "grid": grids[i],
                    "text": f"sample {i}", "label": i % 2} for i in range(6)]
        db = self.path("padded")
        granary.write(db, samples, schema={"tokens": ("int64", [-1]), "grid": ("int16", [-1, -1]),
                                           "text": ("uint8", [-1], "utf-8"), "label": ("int64", [])}, progress=False)
        for workers in (0, 2):
            loader = torch.utils.data.DataLoader(granary.Dataset(db), batch_size=3, collate_fn=granary.pad_collate,
                                                 num_workers=workers)
            batch = next(iter(loader))
            lengths = [1 + (i * 5) % 7 for i in range(3)]  # 1, 6, 4
            self.assertEqual(batch["tokens_length"].tolist(), lengths)
            self.assertEqual(batch["tokens"].shape, (3, 6))
            for k, n in enumerate(lengths):
                self.assertEqual(batch["tokens"][k].tolist(), list(range(1, n + 1)) + [0] * (6 - n))
            self.assertEqual(batch["grid"].dtype, torch.int16)
            self.assertEqual(batch["grid_length"].tolist(), [[1, 1], [2, 2], [3, 1]])
            self.assertEqual(batch["grid"][2].tolist(), [[3, 0], [3, 0], [3, 0]])
            self.assertEqual(batch["text"], ["sample 0", "sample 1", "sample 2"])  # a text field's strs: a list
            self.assertEqual(batch["label"].tolist(), [0, 1, 0])
            self.assertNotIn("label_length", batch)
        # As tuples: the padded field is a (padded, lengths) pair; another padding value through partial.
        pairs = [(np.arange(n, dtype=np.float32) + 1, n % 2) for n in (2, 5, 3)]
        tuples = self.path("padded-tuples")
        granary.write(tuples, pairs, schema={"input": ("float32", [-1]), "target": ("int64", [])}, progress=False)
        pad = functools.partial(granary.pad_collate, padding_value=-1)
        (values, lengths), targets = pad([granary.Dataset(tuples, as_tuple=True)[k] for k in range(3)])
        self.assertEqual(values.tolist(), [[1, 2, -1, -1, -1], [1, 2, 3, 4, 5], [1, 2, 3, -1, -1]])
        self.assertEqual((lengths.tolist(), targets.tolist()), ([2, 5, 3], [0, 1, 1]))
        # Fields of one shape batch as DataLoader's own collate does.
        same = [{"x": torch.ones(2), "y": 1}, {"x": torch.zeros(2), "y": 0}]
        self.assertEqual(granary.pad_collate(same)["x"].tolist(), [[1, 1], [0, 0]])
        with self.assertRaisesRegex(ValueError, "field 'x' varies in length and 'x_length', where its lengths go, is "
                                                "a field of the samples too"):
            granary.pad_collate([{"x": torch.ones(2), "x_length": 2}, {"x": torch.ones(3), "x_length": 3}])
        with self.assertRaisesRegex(TypeError, "field 'x' holds tensors of different dims or dtypes"):
            granary.pad_collate([{"x": torch.ones(2)}, {"x": torch.ones(3, dtype=torch.int64)}])
        # granary.Loader, which batches in C++, names the way.
        with self.assertRaisesRegex(granary.InvalidArgumentError, "collate_fn=granary.pad_collate"):
            granary.Loader(db, input_field="tokens", batch_size=2)

    def test_str_and_bytes_are_not_mixed_in_a_field(self):
        first = {"caption": "text", "blob": b"\x00", "label": 0}
        cases = [({"caption": b"bytes", "blob": b"", "label": 1}, "field 'caption' holds str, not bytes"),
                 ({"caption": "ok", "blob": "text", "label": 1}, "field 'blob' holds bytes, not str"),
                 ({"caption": np.zeros(3, np.uint8), "blob": b"", "label": 1}, "holds str, not uint8 [3]"),
                 ({"caption": "\ud800", "blob": b"", "label": 1}, "a str that UTF-8 cannot hold")]
        for sample, message in cases:
            db = self.path("mixed")
            with self.assertRaises(granary.InvalidArgumentError) as caught:
                granary.write(db, [first, first, sample], progress=False)
            self.assertIn("sample 2 of split 'train'", str(caught.exception))
            self.assertIn(message, str(caught.exception))
            self.assertFalse(os.path.exists(db))
        # A schema given by hand says which: text is ("uint8", [-1], "utf-8") (or None for [-1]).
        with self.assertRaises(granary.InvalidArgumentError) as caught:
            granary.write(self.path("bytes-schema"), [{"t": "a"}], schema={"t": ("uint8", None)}, progress=False)
        self.assertIn("('uint8', [-1], 'utf-8')", str(caught.exception))
        db = self.path("text-schema")
        granary.write(db, [{"t": "a"}, {"t": "bc"}], schema={"t": ("uint8", None, "utf-8")}, progress=False)
        self.assertEqual(granary.Dataset(db)[1]["t"], "bc")
        with self.assertRaises(granary.InvalidArgumentError) as caught:
            granary.write(self.path("int-text"), [{"t": "a"}], schema={"t": ("int32", None, "utf-8")}, progress=False)
        self.assertIn("layout 'utf-8' (text) is for uint8 of shape [-1], not int32 [-1]", str(caught.exception))

    def test_text_that_is_not_utf8_is_named_by_readers_and_verify(self):
        db = self.path("lying")
        granary.write(db, [{"t": b"fine", "label": 1}, {"t": b"\xff\xfe", "label": 0}], progress=False)
        manifest_path = os.path.join(db, "manifest.json")
        with open(manifest_path) as f:
            manifest = json.load(f)
        manifest["schema"]["fields"][0]["layout"] = "utf-8"  # the manifest lies: these bytes are no text
        with open(manifest_path, "w") as f:
            json.dump(manifest, f)
        for backend in ("native", "python"):
            ds = granary.Dataset(db, backend=backend)
            self.assertEqual(ds[0]["t"], "fine")
            with self.assertRaises(granary.CorruptionError) as caught:
                ds[1]
            self.assertIn("sample 1 of split 'train': field 't' is not UTF-8 text", str(caught.exception))
        verify = subprocess.run([PREP, "verify", db], capture_output=True, text=True)
        self.assertEqual(verify.returncode, 1, verify.stdout + verify.stderr)
        self.assertIn("sample 1: field 't' is not UTF-8 text", verify.stdout + verify.stderr)
        self.assertIn("(not UTF-8 text", run(PREP, "cat", db, "--index", "1").stdout)
        # A layout that does not fit its field is refused by every reader.
        manifest["schema"]["fields"][1]["layout"] = "utf-8"
        with open(manifest_path, "w") as f:
            json.dump(manifest, f)
        for backend in ("native", "python"):
            with self.assertRaises(granary.CorruptionError) as caught:
                granary.Dataset(db, backend=backend)
            self.assertIn("'label'", str(caught.exception))
        self.assertNotEqual(subprocess.run([PREP, "info", db], capture_output=True).returncode, 0)

    def test_sequences_of_any_length_keep_their_own_shape(self):
        lengths = [1 + (i * 7) % 23 for i in range(150)]
        samples = [{"tokens": np.arange(n, dtype=np.int64) + i, "series": np.full((n % 5 + 1, 3), i, np.float32),
                    "label": i % 2} for i, n in enumerate(lengths)]
        # Inferred from the first sample, the length is fixed: the refusal says how to declare it.
        with self.assertRaises(granary.InvalidArgumentError) as caught:
            granary.write(self.path("fixed"), samples, progress=False)
        self.assertIn("sample 1 of split 'train': field 'tokens' has shape [8], but the db's is [1] (from the first "
                      "sample); where it varies", str(caught.exception))
        self.assertIn("schema={'tokens': ('int64', [-1]), ...}", str(caught.exception))
        schema = {"tokens": ("int64", [-1]), "series": ("float32", [-1, 3]), "label": ("int64", [])}
        for workers in (1, 2):
            db = self.path(f"sequences-{workers}")
            granary.write(db, samples, schema=schema, workers=workers, val_fraction=0.2, progress=False)
            self.assertEqual(granary.describe(db)["label_field"], "label")
            run(PREP, "verify", db)
            for backend in ("native", "python"):
                for split in ("train", "val"):
                    ds = granary.Dataset(db, split, backend=backend)
                    for k in (0, len(ds) - 1):
                        got = ds[k]
                        i = int(got["tokens"][0])  # each sample starts at its own index
                        np.testing.assert_array_equal(got["tokens"].numpy(), samples[i]["tokens"])
                        np.testing.assert_array_equal(got["series"].numpy(), samples[i]["series"])
        # The user's own collate pads them, as for any sequence dataset.
        def pad(batch):
            tokens = torch.nn.utils.rnn.pad_sequence([b["tokens"] for b in batch], batch_first=True)
            return tokens, torch.stack([b["label"] for b in batch])
        tokens, labels = next(iter(torch.utils.data.DataLoader(granary.Dataset(db), batch_size=4, collate_fn=pad,
                                                               num_workers=2)))
        self.assertEqual(tokens.shape[0], 4)
        self.assertEqual(labels.shape, (4,))
        # A dim the schema fixes is still checked; a sample of another rank too.
        for bad, message in ((np.ones((2, 4), np.float32), "has shape [2, 4], but the db's is [-1, 3] (from schema=)"),
                             (np.ones(3, np.float32), "has shape [3], but the db's is [-1, 3]")):
            with self.assertRaises(granary.InvalidArgumentError) as caught:
                granary.write(self.path("bad-series"), samples[:2] + [dict(samples[2], series=bad)], schema=schema,
                              progress=False)
            self.assertIn("sample 2 of split 'train': field 'series' " + message, str(caught.exception))
        # train names what it cannot batch.
        failed = subprocess.run([TRAIN, "--db", db, "--input-field", "tokens", "--epochs", "1"], capture_output=True,
                                text=True)
        self.assertNotEqual(failed.returncode, 0)
        self.assertIn("field 'tokens' has shape [-1]: training needs a fixed shape", failed.stderr)

    def test_a_value_no_field_holds_is_named_by_its_sample_and_field(self):
        good = {"x": np.ones(3, np.float32), "label": 1}
        # (value, message, refused in a later sample too): a later sample's float16, bfloat16 or uint16 is
        # converted to the field's float32, which holds its values (below).
        cases = [(None, "is None (a missing value)", True), ({"a": 1}, "is a dict", True),
                 ([[1, 2], [3]], "is nested lists of different lengths", True),
                 (["a", "b"], "is an array of str values", True),
                 (np.ones(3, np.float16), "is float16, a dtype granary does not store", False),
                 (torch.ones(3, dtype=torch.bfloat16), "is a torch.bfloat16 tensor, a dtype granary does not store",
                  False),
                 (np.ones(3, np.uint16), "is uint16, a dtype granary does not store (it stores uint8, int8, int16, "
                  "int32, int64, float32, float64): convert it to int32 first", False)]
        for value, message, later_too in cases:
            for position in (0, 2) if later_too else (0,):  # the first sample (the schema comes from it), a later one
                samples = [good, good, good]
                samples[position] = {"x": value, "label": 1}
                with self.assertRaises(granary.InvalidArgumentError, msg=(value, position)) as caught:
                    granary.write(self.path("bad-value"), samples, progress=False)
                self.assertIn(f"sample {position} of split 'train': field 'x': {message}", str(caught.exception))
                self.assertFalse(os.path.exists(self.path("bad-value")))
        db = self.path("converted")
        granary.write(db, [good, {"x": torch.full((3,), 0.5, dtype=torch.bfloat16), "label": 0},
                           {"x": np.full(3, 0.25, np.float16), "label": 1}], progress=False)
        self.assertEqual([float(granary.Dataset(db)[k]["x"][0]) for k in range(3)], [1.0, 0.5, 0.25])

    def test_an_image_of_other_channels_is_named_with_the_convert_that_fits_it(self):
        from PIL import Image  # a folder of photographs read without convert(): a gray or RGBA file among them
        for first, later in (("RGB", "L"), ("RGB", "RGBA"), ("L", "RGB")):
            samples = [(Image.new(first, (16, 16)), 0), (Image.new(later, (16, 16)), 1)]
            with self.assertRaises(granary.InvalidArgumentError, msg=(first, later)) as caught:
                granary.write(self.path("modes"), samples, progress=False)
            self.assertIn("sample 1 of split 'train': field 'input' has shape", str(caught.exception))
            self.assertIn("a field's images share one number of channels: convert each as torchvision's ImageFolder "
                          "does (Image.open(path).convert('RGB'), or 'L' for gray)", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
