#!/usr/bin/python3
"""prep build on a db that exists: up to date when RAW and the options did
not change, refused naming what changed otherwise, and with --update only
the changed files read (and, for a labels table edited, the samples whose
class it changed), giving the content hash of a fresh build.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/incremental_test.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

import xxhash

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("GRANARY_BUILD", os.path.join(ROOT, "build")))
PREP = os.path.join(BUILD, "preprocess/prep")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import granary_db  # noqa: E402


def png(width, height, seed):
    """A gray PNG whose pixels depend on `seed` (zlib and a CRC: no imaging library needed)."""
    def chunk(kind, data):
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")
    rows = b"".join(b"\0" + bytes((seed * 7 + x * 3 + y * 5) % 256 for x in range(width)) for y in range(height))
    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def prep(*args, check=True):
    done = subprocess.run([PREP, *map(str, args)], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"prep {' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr}")
    return done


def build_json(*args, check=True):
    done = prep("build", *args, "--json", "--no-progress", check=check)
    return done, json.loads(done.stdout.strip().splitlines()[-1])


class IncrementalTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="granary-incremental-")
        self.raw = os.path.join(self.tmp, "raw")
        for c in range(3):
            os.makedirs(os.path.join(self.raw, f"class{c}"))
            for k in range(20):
                self.put(f"class{c}/{k:02d}.png", c * 100 + k)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def put(self, name, seed):
        with open(os.path.join(self.raw, name), "wb") as f:
            f.write(png(12, 12, seed))

    def class_counts(self, db):
        """The manifest's samples of each class by split, and each class's in all."""
        counts = json.loads(prep("info", db, "--json").stdout)["class_counts"]
        return counts, [sum(c) for c in zip(*counts.values())]

    def fresh_hash(self, *flags, raw=None):
        db = os.path.join(self.tmp, "fresh.db")
        shutil.rmtree(db, ignore_errors=True)
        return build_json(raw or self.raw, db, *flags)[1]["content_hash"]

    def test_up_to_date_then_changed_then_updated_as_a_fresh_build(self):
        db = os.path.join(self.tmp, "photos.db")
        flags = ("--size", "8", "--val-fraction", "0.25")
        _, first = build_json(self.raw, db, *flags)
        done, again = build_json(self.raw, db, *flags)
        self.assertEqual(again, {"db": db, "ok": True, "up_to_date": True, "inputs": 60})
        self.assertIn("is up to date (60 input files unchanged)", prep("build", self.raw, db, *flags).stderr)

        self.put("class0/03.png", 999)                        # changed
        self.put("class1/99.png", 998)                        # added
        self.put("class2/98.png", 997)                        # added
        os.remove(os.path.join(self.raw, "class2/05.png"))    # removed
        done, refused = build_json(self.raw, db, *flags, check=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("RAW changed since it was built (input files: 2 added, 1 removed, 1 changed): pass --update",
                      refused["error"])
        self.assertEqual(json.loads(prep("info", db, "--json").stdout)["content_hash"], first["content_hash"])

        _, updated = build_json(self.raw, db, *flags, "--update")
        self.assertEqual(updated["reused"], 58)  # 60 - 1 changed - 1 removed
        self.assertEqual(updated["content_hash"], self.fresh_hash(*flags))
        # Counted over the samples copied from the old db and those read anew, as a fresh build counts them.
        self.assertEqual(self.class_counts(db), self.class_counts(os.path.join(self.tmp, "fresh.db")))
        self.assertEqual(self.class_counts(db)[1], [20, 21, 20])
        self.assertIn("content hash matches", prep("verify", db).stdout)
        self.assertFalse(os.path.exists(db + ".partial"))
        self.assertEqual(build_json(self.raw, db, *flags)[1]["up_to_date"], True)

    def test_large_samples_updated_from_their_stored_records_verify_as_a_fresh_build(self):
        raw = os.path.join(self.tmp, "noise")  # 64 x 64 noise: one sample a record, no dictionary
        for c in range(2):
            os.makedirs(os.path.join(raw, f"c{c}"))
            for k in range(15):
                self.noise(os.path.join(raw, f"c{c}", f"{k}.png"))
        db = os.path.join(self.tmp, "noise.db")
        flags = ("--size", "64", "--channels", "1", "--val-fraction", "0.2")
        build_json(raw, db, *flags)
        for name in ("c0/3.png", "c1/7.png"):
            self.noise(os.path.join(raw, name))
        _, updated = build_json(raw, db, *flags, "--update")
        self.assertEqual(updated["reused"], 28)
        self.assertEqual(updated["dictionary_bytes"], 0)
        fresh = os.path.join(self.tmp, "noise-fresh.db")
        self.assertEqual(updated["content_hash"], build_json(raw, fresh, *flags)[1]["content_hash"])
        self.assertIn("content hash matches", prep("verify", db).stdout)

        # Without the hashes (a build continued with --resume has none), the
        # copied records are decompressed for them: the same content hash.
        inputs = self.inputs_of(db)
        del inputs["payload_hashes"]
        self.rewrite_inputs(db, inputs)
        self.noise(os.path.join(raw, "c0/9.png"))
        _, updated = build_json(raw, db, *flags, "--update")
        self.assertEqual(updated["reused"], 29)
        self.assertEqual(updated["content_hash"], build_json(raw, fresh, *flags, "--force")[1]["content_hash"])

        # inputs.json holds each sample's payload hash (docs/FORMAT.md), and
        # the update copies a record with the hash it finds there, without
        # decompressing it: a forged hash (the manifest made to vouch for it)
        # shows in the updated db's content hash, and verify names it.
        inputs = self.inputs_of(db)
        reader = granary_db.Db(db)
        for split in ("train", "val"):
            hex_hashes = inputs["payload_hashes"][split]
            self.assertEqual(len(hex_hashes), 16 * len(inputs["items"][split]))
            for i in range(len(reader[split])):
                content = b"".join(reader[split][i][name].tobytes() for name, _, _ in reader.fields)
                self.assertEqual(hex_hashes[16 * i:16 * i + 16], f"{xxhash.xxh64_intdigest(content):016x}")
        inputs["payload_hashes"]["train"] = "0" * 16 + inputs["payload_hashes"]["train"][16:]
        self.rewrite_inputs(db, inputs)
        self.noise(os.path.join(raw, "c1/8.png"))  # another change, so that the update runs
        _, forged = build_json(raw, db, *flags, "--update")
        self.assertNotEqual(forged["content_hash"], build_json(raw, fresh, *flags, "--force")[1]["content_hash"])
        verified = prep("verify", db, check=False)
        self.assertNotEqual(verified.returncode, 0)
        self.assertIn("content hash", verified.stdout + verified.stderr)
        self.assertNotIn("content hash matches", verified.stdout)

    @staticmethod
    def inputs_of(db):
        with open(os.path.join(db, "inputs.json")) as f:
            return json.load(f)

    @staticmethod
    def rewrite_inputs(db, inputs):
        """Replaces db's inputs.json, with its manifest made to vouch for the new one."""
        text = json.dumps(inputs)
        with open(os.path.join(db, "inputs.json"), "w") as f:
            f.write(text)
        with open(os.path.join(db, "manifest.json")) as f:
            manifest = json.load(f)
        manifest["build_options"]["inputs_hash"] = f"xxh64:{xxhash.xxh64_intdigest(text.encode()):016x}"
        with open(os.path.join(db, "manifest.json"), "w") as f:
            json.dump(manifest, f)

    def noise(self, path):
        def chunk(kind, data):
            return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")
        rows = b"".join(b"\0" + os.urandom(64) for _ in range(64))
        header = (64).to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) +
                    chunk(b"IEND", b""))

    def test_other_options_are_named_and_need_force(self):
        db = os.path.join(self.tmp, "photos.db")
        build_json(self.raw, db, "--size", "8")
        for extra in ((), ("--update",)):
            done, refused = build_json(self.raw, db, "--size", "6", *extra, check=False)
            self.assertNotEqual(done.returncode, 0)
            self.assertIn("was built with other options (size: 8 -> 6): pass --force", refused["error"])
        _, rebuilt = build_json(self.raw, db, "--size", "6", "--force")
        self.assertEqual(rebuilt["content_hash"], self.fresh_hash("--size", "6"))
        # One size, two spellings: recorded as one, so the other is up to date (and a db of a granary
        # that recorded --size as typed is too).
        for spelling in ("6x6", "6X6"):
            _, same = build_json(self.raw, db, "--size", spelling)
            self.assertTrue(same.get("up_to_date"), same)
        inputs = self.inputs_of(db)
        self.assertEqual(inputs["options"]["size"], "6")
        inputs["options"]["size"] = "6x6"
        self.rewrite_inputs(db, inputs)
        _, same = build_json(self.raw, db, "--size", "6")
        self.assertTrue(same.get("up_to_date"), same)
        done, refused = build_json(self.raw, db, "--size", "6x5", check=False)
        self.assertIn("was built with other options (size: 6 -> 6x5)", refused["error"])

    def test_an_edited_labels_table_is_updated_sample_by_sample(self):
        images = os.path.join(self.tmp, "loose")  # images and a table of their labels, as Kaggle ships them
        os.makedirs(images)
        for k in range(30):
            with open(os.path.join(images, f"{k:02d}.png"), "wb") as f:
                f.write(png(12, 12, k))
        table = os.path.join(self.tmp, "labels.csv")

        def labels(relabelled=()):
            with open(table, "w") as f:
                f.write("id,label\n" + "".join(f"{k:02d}.png,{(k % 3 + (k in relabelled)) % 3}\n" for k in range(30)))

        labels()
        db = os.path.join(self.tmp, "kaggle.db")
        flags = ("--labels", table, "--size", "8", "--val-fraction", "0.2")
        build_json(images, db, *flags)
        self.assertEqual(build_json(images, db, *flags)[1]["up_to_date"], True)
        labels(relabelled=(4, 17))  # two labels corrected; the images as they were
        done, refused = build_json(images, db, *flags, check=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn(f"RAW changed since it was built (labels table {table} changed): pass --update",
                      refused["error"])
        _, updated = build_json(images, db, *flags, "--update")
        self.assertEqual(updated["reused"], 28)
        self.assertEqual(updated["content_hash"], self.fresh_hash(*flags, raw=images))
        self.assertEqual(self.class_counts(db), self.class_counts(os.path.join(self.tmp, "fresh.db")))
        self.assertEqual(self.class_counts(db)[1], [11, 9, 10])  # 4: class 1 -> 2, 17: 2 -> 0
        self.assertEqual(build_json(images, db, *flags)[1]["up_to_date"], True)
        # A db whose record predates the labels (no "labels" in inputs.json) is read anew once its table changes.
        inputs = self.inputs_of(db)
        del inputs["labels"]
        self.rewrite_inputs(db, inputs)
        labels(relabelled=(4,))
        _, updated = build_json(images, db, *flags, "--update")
        self.assertEqual(updated["reused"], 0)
        self.assertEqual(updated["content_hash"], self.fresh_hash(*flags, raw=images))

    def test_a_new_class_rebuilds_every_item(self):
        db = os.path.join(self.tmp, "photos.db")
        build_json(self.raw, db, "--size", "8")
        os.makedirs(os.path.join(self.raw, "class0a"))
        self.put("class0a/00.png", 555)  # sorts between class0 and class1: their labels move
        _, updated = build_json(self.raw, db, "--size", "8", "--update")
        self.assertEqual(updated["reused"], 0)
        self.assertEqual(updated["content_hash"], self.fresh_hash("--size", "8"))

    def test_an_idx_folder_is_up_to_date_until_a_file_changes(self):
        raw = os.path.join(self.tmp, "idx")
        os.makedirs(raw)
        images = bytes([0, 0, 8, 3]) + (50).to_bytes(4, "big") + (4).to_bytes(4, "big") * 2 + bytes(range(50)) * 16
        labels = bytes([0, 0, 8, 1]) + (50).to_bytes(4, "big") + bytes(k % 5 for k in range(50))
        for name, data in (("train-images-idx3-ubyte", images), ("train-labels-idx1-ubyte", labels)):
            with open(os.path.join(raw, name), "wb") as f:
                f.write(data)
        db = os.path.join(self.tmp, "idx.db")
        build_json(raw, db)
        self.assertTrue(build_json(raw, db)[1]["up_to_date"])
        with open(os.path.join(raw, "train-labels-idx1-ubyte"), "wb") as f:
            f.write(labels[:8] + bytes(k % 4 for k in range(50)))
        _, updated = build_json(raw, db, "--update")
        self.assertEqual(updated["reused"], 0)  # IDX items are not files: rebuilt whole
        fresh = os.path.join(self.tmp, "idx-fresh.db")
        self.assertEqual(updated["content_hash"], build_json(raw, fresh)[1]["content_hash"])

    def test_a_db_without_a_record_of_its_inputs_needs_force(self):
        db = os.path.join(self.tmp, "photos.db")
        build_json(self.raw, db, "--size", "8")
        with open(os.path.join(db, "inputs.json"), "a") as f:  # edited: its item-to-sample map is not trusted
            f.write(" ")
        done, refused = build_json(self.raw, db, "--size", "8", "--update", check=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("inputs.json: not the file the build wrote (its hash is not the manifest's inputs_hash); "
                      "pass --force to rebuild", refused["error"])
        os.remove(os.path.join(db, "inputs.json"))
        done, refused = build_json(self.raw, db, "--size", "8", check=False)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("already exists (pass --force to replace it)", refused["error"])


if __name__ == "__main__":
    unittest.main()
