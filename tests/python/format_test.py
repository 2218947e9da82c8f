#!/usr/bin/python3
"""docs/FORMAT.md against the C++ code: dbs that `prep build` writes are read
by tools/granary_db.py, a reader written from the spec alone, and the two
agree on every sample, hash and epoch order.

    GRANARY_PREP=build/preprocess/prep GRANARY_LOADER=build/loader/loader /usr/bin/python3 tests/python/format_test.py
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import xxhash

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import granary_db  # noqa: E402

PREP = os.environ.get("GRANARY_PREP", os.path.join(ROOT, "build/preprocess/prep"))
LOADER = os.environ.get("GRANARY_LOADER", os.path.join(ROOT, "build/loader/loader"))
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


def prep(*args):
    return subprocess.run([PREP, *args], check=True, capture_output=True, text=True).stdout


def prep_cat(db, split, index):
    """Sample `index` as prep cat --json gives it: {field: (shape, values)}."""
    fields = json.loads(prep("cat", db, "--split", split, "--index", str(index), "--json"))["fields"]
    return {name: (f["shape"], f["values"]) for name, f in fields.items()}


def as_cat(sample):
    """A sample as prep cat --json spells it: non-finite floats as strings."""
    def spell(v):
        if isinstance(v, float) and not math.isfinite(v):
            return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        return v
    return {name: (list(a.shape), [spell(v) for v in a.reshape(-1).tolist()]) for name, a in sample.items()}


class FormatTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="granary-format-")
        cls.dbs = {}
        # Real Fashion-MNIST images under each codec: 2 = zstd with the db's
        # dictionary (small packed records), 1 = plain zstd, 0 = none; and one
        # sample per record.
        for name, options in {"dictionary": ["--shards", "2", "--dictionary", "on"], "zstd": ["--dictionary", "off"],
                              "none": ["--zstd-level", "0"], "unpacked": ["--block-bytes", "1"]}.items():
            db = os.path.join(cls.tmp, name)
            prep("build", FASHION_MNIST, db, "--limit", "1500", "--no-progress", *options)
            cls.dbs[name] = db
        csv = os.path.join(cls.tmp, "t.csv")
        with open(csv, "w") as f:
            f.write('width,"height, cm",kind\n')
            for i in range(300):
                f.write(f"{i * 0.25},{'' if i % 7 == 0 else -i * 1e-3},{['dog', 'cat', 'bird'][i % 3]}\n")
        cls.dbs["csv"] = os.path.join(cls.tmp, "csv")
        prep("build", csv, cls.dbs["csv"], "--label", "kind", "--missing", "nan", "--no-progress")
        # Names are bytes: Latin-1 labels (not UTF-8) become class names.
        latin1 = os.path.join(cls.tmp, "latin1.csv")
        with open(latin1, "wb") as f:
            f.write(b"x,kind\n" + b"".join(b"%d,%s\n" % (i, [b"caf\xe9", b"th\xe9", b"ok"][i % 3]) for i in range(30)))
        cls.dbs["latin1"] = os.path.join(cls.tmp, "latin1")
        prep("build", latin1, cls.dbs["latin1"], "--label", "kind", "--no-progress")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_every_db_verifies_record_by_record_and_hash_by_hash(self):
        for name, db in self.dbs.items():
            with self.subTest(db=name):
                granary_db.Db(db).verify()

    def test_names_that_are_not_utf8_come_back_as_their_bytes(self):
        names = granary_db.Db(self.dbs["latin1"]).manifest["class_names"]
        self.assertEqual(sorted(os.fsencode(n) for n in names), [b"caf\xe9", b"ok", b"th\xe9"])
        info = json.loads(prep("info", self.dbs["latin1"], "--json"))
        self.assertEqual(sorted(granary_db.decode_name(n) for n in info["class_names"]), [b"caf\xe9", b"ok", b"th\xe9"])

    def test_samples_match_prep_cat(self):
        for name, db in self.dbs.items():
            reader = granary_db.Db(db)
            for split_name, split in reader.splits.items():
                boundaries = [s["first"] for s in split.shards] + [s["first"] + s["count"] - 1 for s in split.shards]
                for i in sorted({0, 1, 17, len(split) // 2, len(split) - 1, *boundaries}):
                    with self.subTest(db=name, split=split_name, index=i):
                        self.assertEqual(as_cat(split[i]), prep_cat(db, split_name, i))

    def test_the_codec_does_not_change_the_content(self):
        hashes = {name: granary_db.Db(self.dbs[name]).manifest["content_hash"]
                  for name in ("dictionary", "zstd", "none", "unpacked")}
        self.assertEqual(len(set(hashes.values())), 1, hashes)
        samples = [as_cat(granary_db.Db(self.dbs[name])["train"][777]) for name in hashes]
        self.assertTrue(all(s == samples[0] for s in samples))

    def test_csv_rows_read_back_with_missing_values_as_nan(self):
        db = granary_db.Db(self.dbs["csv"])
        self.assertEqual(db.manifest["class_names"], ["bird", "cat", "dog"])
        row = db["train"][7]  # width 1.75, height missing, kind cat
        self.assertEqual(row["features"][0], 1.75)
        self.assertTrue(math.isnan(row["features"][1]))
        self.assertEqual(int(row["label"]), 1)
        self.assertEqual(as_cat(row), prep_cat(self.dbs["csv"], "train", 7))

    def test_a_flipped_byte_is_corruption_naming_shard_and_key(self):
        db = os.path.join(self.tmp, "flipped")
        shutil.copytree(self.dbs["none"], db)
        shard = os.path.join(db, "train/shard-00000.mdb")
        key = 40  # a record's first sample: records of 'none' hold several
        first_keys = [k for k, _ in granary_db.Db(db)["train"].records()]
        key = max(k for k in first_keys if k <= key)
        import lmdb
        with lmdb.open(shard, subdir=False, readonly=True, lock=False).begin() as txn:
            value = txn.get(key.to_bytes(8, "big"))
        with open(shard, "r+b") as f:
            data = f.read()
            at = data.find(value)
            self.assertGreater(at, 0)
            self.assertEqual(data.find(value, at + 1), -1)
            f.seek(at + len(value) // 2)
            f.write(bytes([data[at + len(value) // 2] ^ 0x10]))
        with self.assertRaises(granary_db.CorruptionError) as caught:
            granary_db.Db(db)["train"][key]
        self.assertIn(f"train/shard-00000.mdb, key {key}: checksum mismatch", str(caught.exception))
        # prep verify, the C++ side, finds the same record.
        report = subprocess.run([PREP, "verify", db, "--json"], capture_output=True, text=True)
        self.assertNotEqual(report.returncode, 0)
        self.assertIn(f"key {key}", report.stdout)

    def test_a_frame_claiming_a_gigabyte_is_refused_before_decompressing(self):
        # FORMAT.md: P <= 32768 * B. 13 bytes: a zstd frame declaring 1 GiB
        # (one 128 KiB RLE block), under a correct checksum.
        db = granary_db.Db(self.dbs["zstd"])
        frame = bytes.fromhex("28b52ffda00000004003001000")
        header = struct.pack("<BBHII", 1, 1, len(db.fields), 1 << 30, 1)
        value = header + struct.pack("<Q", xxhash.xxh64_intdigest(header + frame)) + frame
        with self.assertRaises(granary_db.CorruptionError) as caught:
            db.decode(value, "crafted")
        self.assertIn("crafted: a zstd frame of 13 bytes cannot hold the 1073741824 bytes", str(caught.exception))

    def test_a_newer_format_is_refused(self):
        db = os.path.join(self.tmp, "newer")
        shutil.copytree(self.dbs["csv"], db)
        path = os.path.join(db, "manifest.json")
        with open(path) as f:
            manifest = json.load(f)
        manifest["format_version"] = granary_db.FORMAT_VERSION + 1
        with open(path, "w") as f:
            json.dump(manifest, f)
        with self.assertRaises(granary_db.FormatError):
            granary_db.Db(db)

    def test_lying_descriptions_are_refused_as_prep_refuses_them(self):
        # FORMAT.md: a reader refuses element_names, statistics and
        # class_counts that do not fit the schema and splits.
        with open(os.path.join(self.dbs["csv"], "manifest.json")) as f:
            manifest = json.load(f)
        n = manifest["splits"][0]["count"]
        features, names = manifest["statistics"]["train"]["features"], manifest["element_names"]["features"]
        lies = {"class_counts.train: not one count for each of the db's 3 classes summing to the split's "
                f"{n} samples": ("class_counts", "train", [n, 1, 0]),
                f"element_names.features: 1 names for {len(names)} elements": ("element_names", "features", names[:1]),
                "statistics.train.features: std[0] is not what": ("statistics", "train", {
                    "features": dict(features, std=[-1.0] + features["std"][1:])}),
                "statistics.train.features: mean[1] is not what": ("statistics", "train", {
                    "features": dict(features, mean=[features["mean"][0], None] + features["mean"][2:])}),
                "class_counts.nowhere: no such split": ("class_counts", "nowhere", [n, 0, 0])}
        for said, (member, key, value) in lies.items():
            with self.subTest(said=said):
                db = os.path.join(self.tmp, "lying")
                shutil.rmtree(db, ignore_errors=True)
                shutil.copytree(self.dbs["csv"], db)
                lying = json.loads(json.dumps(manifest))
                lying[member][key] = value
                with open(os.path.join(db, "manifest.json"), "w") as f:
                    json.dump(lying, f)
                with self.assertRaises(granary_db.CorruptionError) as caught:
                    granary_db.Db(db)
                self.assertIn(said, str(caught.exception))
                refused = subprocess.run([PREP, "info", db], capture_output=True, text=True)
                self.assertNotEqual(refused.returncode, 0)
                self.assertIn(said, refused.stderr)

    def test_epoch_order_matches_loader_order(self):
        db = self.dbs["dictionary"]
        n = len(granary_db.Db(db)["train"])
        for epoch, rank, world, shuffle, start, drop_last in [(0, 0, 1, "full", 0, False), (3, 1, 3, "full", 0, False),
                                                              (2, 2, 4, "block", 0, True), (5, 0, 2, "full", 701, False),
                                                              (1, 6, 7, "none", 10, False)]:
            with self.subTest(epoch=epoch, rank=rank, world=world, shuffle=shuffle, start=start):
                args = ["order", db, "--seed", "42", "--epoch", str(epoch), "--rank", str(rank), "--world", str(world),
                        "--shuffle", shuffle, "--start", str(start), "--json"] + (["--drop-last"] if drop_last else [])
                expected = json.loads(subprocess.run([LOADER, *args], check=True, capture_output=True,
                                                     text=True).stdout)["indices"]
                order = granary_db.epoch_order(n, 42, epoch, shuffle)
                self.assertEqual(granary_db.rank_indices(order, rank, world, drop_last, start), expected)


if __name__ == "__main__":
    unittest.main()
