#!/usr/bin/python3
"""A granary db reader in Python, written from docs/FORMAT.md alone.

It is the executable specification of the format (a test keeps it equal to
the C++ reader) and granary.Dataset's fallback where the C++ module is not
built. It needs numpy, lmdb, zstandard and xxhash, not torch:

    from granary import reader      # or, from a checkout: tools/granary_db.py
    db = reader.Db("build/fashion-mnist.db")
    sample = db["train"][12]        # {"image": uint8 array (1, 28, 28), "label": int64 array ()}
    db.verify()                     # every record's checks and every content hash

As a program it prints a db's splits, checks it (--verify), or prints one sample
as JSON in the shape of `prep cat --json` (--split S --index I).
Needs python3-lmdb, python3-zstandard, python3-xxhash and python3-numpy (Debian).
"""
import argparse
import bisect
import json
import os
import struct
import sys

import lmdb
import numpy as np
import xxhash
import zstandard

FORMAT_VERSION = 1
RECORD_VERSION = 1
MAX_SAMPLES = 65536
MAX_PAYLOAD = 1 << 30
ZSTD_MAX_EXPANSION = (128 << 10) // 4  # a zstd block: at least 4 bytes, at most 128 KiB out
MAX_MANIFEST_BYTES = 64 << 20  # FORMAT.md: a larger manifest is refused before it is read
MAX_JSON_DEPTH = 64  # FORMAT.md: and one nested deeper
# What a repository cloned without git-lfs holds in place of each large file.
GIT_LFS_POINTER = "version https://git-lfs.github.com/spec/"
GIT_LFS_ADVICE = ("a Git LFS pointer, not the file itself (the repository was cloned without git-lfs): fetch the "
                  "files with git lfs pull in the repository")
HEADER = struct.Struct("<BBHII")  # version, codec, N fields, P payload bytes, M samples
DTYPES = {"uint8": "<u1", "int8": "<i1", "int16": "<i2", "int32": "<i4", "int64": "<i8", "float32": "<f4",
          "float64": "<f8"}


try:
    from .described import check_described
    from .errors import CorruptionError, FormatError, NotFoundError
    from .paths import os_str
except ImportError:  # run as a script: python/granary/reader.py DB
    from described import check_described
    from errors import CorruptionError, FormatError, NotFoundError
    from paths import os_str


NAME_ESCAPE = 0x10FF00  # FORMAT.md, "Names": U+10FF80..U+10FFFF stand for the bytes 0x80..0xFF


def decode_name(text):
    """The bytes a manifest string stands for (FORMAT.md, "Names")."""
    out = bytearray()
    for ch in text:
        if NAME_ESCAPE + 0x80 <= ord(ch) <= NAME_ESCAPE + 0xFF:
            out.append(ord(ch) - NAME_ESCAPE)
        else:
            out += ch.encode("utf-8")
    return bytes(out)


def json_depth(text, limit):
    """The deepest nesting of arrays and objects in `text`, strings skipped,
    counted until it passes `limit`."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                break
        elif ch in "]}":
            depth -= 1
    return deepest


def read_manifest(path):
    """The parsed manifest at `path`, its size and nesting bounded first."""
    if not os.path.isfile(path):
        raise CorruptionError(f"{path}: is not a regular file")
    size = os.path.getsize(path)
    if size > MAX_MANIFEST_BYTES:
        raise CorruptionError(f"{path}: is {size} bytes, more than the {MAX_MANIFEST_BYTES} it may have")
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read()
    if text.startswith(GIT_LFS_POINTER):
        raise CorruptionError(f"{path}: is {GIT_LFS_ADVICE}")
    if json_depth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise CorruptionError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except ValueError as e:
        raise CorruptionError(f"{path}: not valid JSON ({e})") from None


def decode_names(value):
    """Every string in a parsed manifest as os.fsdecode of its bytes: str for
    UTF-8 names, with surrogate escapes (PEP 383) for the bytes that are not."""
    if isinstance(value, str):
        return os.fsdecode(decode_name(value))
    if isinstance(value, list):
        return [decode_names(v) for v in value]
    if isinstance(value, dict):
        return {decode_names(k): decode_names(v) for k, v in value.items()}
    return value


def hash_string(value):
    """The manifest's spelling of a 64-bit hash."""
    return f"xxh64:{value:016x}"


def _inside_db_note(path):
    """For a folder inside a db (its split folder): "; it lies inside the db
    DB: name the db itself", as the C++ reader says it; "" otherwise."""
    up = os.path.normpath(path)
    for _ in range(2):
        up = os.path.dirname(up)
        if not up:
            return ""
        if os.path.isfile(os.path.join(up, "manifest.json")):
            return f"; it lies inside the db {up}: name the db itself"
    return ""


class Db:
    """A db directory: its manifest, dictionary and splits."""

    def __init__(self, path):
        self.path = os_str(path)  # str, bytes or PathLike; surrogate escapes for names that are not UTF-8
        path = self.path
        manifest_path = os.path.join(path, "manifest.json")
        if not os.path.isdir(path):
            raise NotFoundError(f"{path}: no such db directory")
        if not os.path.exists(manifest_path):
            raise NotFoundError(f"{path}: is not a granary db: manifest.json not found{_inside_db_note(path)}")
        self.manifest = decode_names(read_manifest(manifest_path))
        if self.manifest.get("format") != "granary-db":
            raise CorruptionError(f"{manifest_path}: format is not granary-db")
        if self.manifest["format_version"] > FORMAT_VERSION:
            raise FormatError(f"{manifest_path}: format version {self.manifest['format_version']} is newer "
                              f"than this reader's {FORMAT_VERSION}")
        self.fields = [(f["name"], np.dtype(DTYPES[f["dtype"]]), list(f["shape"]))
                       for f in self.manifest["schema"]["fields"]]
        for f in self.manifest["schema"]["fields"]:
            layout = f.get("layout", "")
            if not (layout == "" or layout in ("CHW", "HWC") and len(f["shape"]) == 3
                    or layout == "utf-8" and f["dtype"] == "uint8" and f["shape"] == [-1]):
                raise CorruptionError(f"{manifest_path}: field '{f['name']}': layout {layout!r} does not fit "
                                      f"{f['dtype']} {f['shape']}")
        self._plain = zstandard.ZstdDecompressor()
        self._with_dictionary = None
        dictionary = self.manifest["compression"].get("dictionary")
        if dictionary:
            dict_path = os.path.join(path, dictionary["path"])
            with open(dict_path, "rb") as f:
                data = f.read()
            if len(data) != dictionary["bytes"] or hash_string(xxhash.xxh64_intdigest(data)) != dictionary["hash"]:
                if data.startswith(GIT_LFS_POINTER.encode()):
                    raise CorruptionError(f"{dict_path}: is {GIT_LFS_ADVICE}")
                raise CorruptionError(f"{dict_path}: size or hash does not match the manifest")
            self._with_dictionary = zstandard.ZstdDecompressor(
                dict_data=zstandard.ZstdCompressionDict(data), format=zstandard.FORMAT_ZSTD1_MAGICLESS)
        check_described(self.manifest, manifest_path)
        self.splits = {s["name"]: Split(self, s) for s in self.manifest["splits"]}

    def __getitem__(self, split):
        return self.splits[split]

    def verify(self):
        """Decodes every record and checks every split's and the db's content hash."""
        db_hash = xxhash.xxh64()
        for name, split in self.splits.items():
            split_hash = split.verify()
            db_hash.update(name.encode() + b"\0" + struct.pack("<Q", split_hash))
        if hash_string(db_hash.intdigest()) != self.manifest["content_hash"]:
            raise CorruptionError(f"{self.path}: content hash does not match the manifest")

    def decode(self, value, where):
        """The samples of one record value: a list of {field: array}. `where`
        names the record in errors ("train/shard-00000.mdb, key 12")."""
        def corrupt(what):
            return CorruptionError(f"{where}: {what}")

        if len(value) < HEADER.size:
            raise corrupt("shorter than a record header")
        version, codec, n_fields, payload_bytes, m = HEADER.unpack_from(value)
        if version != RECORD_VERSION:
            raise corrupt(f"record version {version}")
        if not 1 <= m <= MAX_SAMPLES or payload_bytes > MAX_PAYLOAD:
            raise corrupt(f"{m} samples of {payload_bytes} bytes exceed the limits")
        variable = [(i, len(shape)) for i, (_, _, shape) in enumerate(self.fields) if -1 in shape]
        h = HEADER.size + m * sum(4 * rank for _, rank in variable)
        if len(value) < h + 8:
            raise corrupt("shorter than its header")
        (checksum,) = struct.unpack_from("<Q", value, h)
        if xxhash.xxh64_intdigest(value[:h] + value[h + 8:]) != checksum:
            raise corrupt("checksum mismatch")
        if n_fields != len(self.fields):
            raise corrupt(f"{n_fields} fields, the schema has {len(self.fields)}")
        body = value[h + 8:]
        if codec == 0:
            payload = body
        elif codec in (1, 2):
            if codec == 2 and self._with_dictionary is None:
                raise corrupt("codec 2 in a db without a dictionary")
            if payload_bytes // ZSTD_MAX_EXPANSION > len(body):
                raise corrupt(f"a zstd frame of {len(body)} bytes cannot hold the {payload_bytes} bytes the header says")
            decompressor = self._plain if codec == 1 else self._with_dictionary
            try:
                # decompressobj, not decompress: the latter reads the content
                # size from a frame header it expects with a magic number.
                payload = decompressor.decompressobj().decompress(body)
            except zstandard.ZstdError as e:
                raise corrupt(f"zstd: {e}") from None
        else:
            raise corrupt(f"unknown codec {codec}")
        if len(payload) != payload_bytes:
            raise corrupt(f"{len(payload)} payload bytes, the header says {payload_bytes}")
        dims = struct.unpack_from(f"<{(h - HEADER.size) // 4}I", value, HEADER.size)
        samples, at, d = [], 0, 0
        for _ in range(m):
            sample = {}
            for name, dtype, shape in self.fields:
                if -1 in shape:
                    stated = list(dims[d:d + len(shape)])
                    d += len(shape)
                    if any(s != -1 and s != t for s, t in zip(shape, stated)):
                        raise corrupt(f"field '{name}' has shape {stated}, the schema says {shape}")
                    shape = stated
                count = int(np.prod(shape, dtype=np.int64))
                end = at + count * dtype.itemsize
                if end > payload_bytes:
                    raise corrupt("the field sizes exceed the payload")
                sample[name] = np.frombuffer(payload, dtype, count, at).reshape(shape)
                at = end
            samples.append(sample)
        if at != payload_bytes:
            raise corrupt("the field sizes do not sum to the payload")
        return samples


class Split:
    """The samples of one split, by index."""

    def __init__(self, db, info):
        self.db, self.name, self.info = db, info["name"], info
        self.shards = info["shards"]
        self._firsts = [s["first"] for s in self.shards]
        self._envs = {}
        # The shards tile 0 .. count - 1 (a tampered count or range is refused here).
        at = 0
        for shard in self.shards:
            if shard["first"] != at or shard["count"] < 0:
                raise CorruptionError(f"split '{self.name}': shard {shard['path']} holds samples from "
                                      f"{shard['first']}, expected {at}")
            at += shard["count"]
        if at != info["count"]:
            raise CorruptionError(f"split '{self.name}': shards hold {at} samples, the manifest says {info['count']}")

    def __len__(self):
        return self.info["count"]

    def _env(self, k):
        if k not in self._envs:
            shard = self.shards[k]
            path = os.path.join(self.db.path, shard["path"])
            self._check_size(path, shard)
            env = lmdb.open(os.fsencode(path), subdir=False, readonly=True, lock=False, readahead=False)
            self._check_range(env, shard)
            self._envs[k] = env
        return self._envs[k]

    @staticmethod
    def _check_size(path, shard):
        """The shard file is as large as the manifest says (as the C++ reader checks)."""
        size = os.path.getsize(path)
        if size != shard["bytes"]:
            with open(path, "rb") as f:
                if f.read(64).startswith(GIT_LFS_POINTER.encode()):
                    raise CorruptionError(f"{path}: is {GIT_LFS_ADVICE}")
            raise CorruptionError(f"{path}: {size} bytes, manifest says {shard['bytes']}")

    @staticmethod
    def _check_range(env, shard):
        """The shard's records hold exactly the samples the manifest says (as the C++ reader checks)."""
        end = shard["first"] + shard["count"]
        with env.begin() as txn:
            cursor = txn.cursor()
            if not cursor.first():
                if shard["count"] == 0:
                    return
                raise CorruptionError(f"{shard['path']}: no records, the manifest says {shard['count']} samples")
            first = struct.unpack(">Q", cursor.key())[0]
            cursor.last()
            last = struct.unpack(">Q", cursor.key())[0]
            value = bytes(cursor.value())
            last_samples = HEADER.unpack_from(value)[4] if len(value) >= HEADER.size else 0
        if first != shard["first"] or last >= end or end - last != last_samples:
            raise CorruptionError(f"{shard['path']}: records hold samples {first}..{last + last_samples - 1}, "
                                  f"the manifest says {shard['first']}..{end - 1}")

    def __getitem__(self, i):
        """Sample i as {field: numpy array}."""
        if not 0 <= i < len(self):
            raise IndexError(f"split '{self.name}': index {i} out of range ({len(self)} samples)")
        k = bisect.bisect_right(self._firsts, i) - 1
        while self.shards[k]["count"] == 0:  # an empty shard shares its first with the next
            k += 1
        with self._env(k).begin() as txn:
            cursor = txn.cursor()
            found = cursor.set_range(struct.pack(">Q", i))
            if not found or struct.unpack(">Q", cursor.key())[0] > i:
                found = cursor.prev() if found else cursor.last()
            where = f"{self.shards[k]['path']}, sample {i}"
            if not found:
                raise CorruptionError(f"{where}: no record holds it")
            key = struct.unpack(">Q", cursor.key())[0]
            samples = self.db.decode(bytes(cursor.value()), f"{self.shards[k]['path']}, key {key}")
        if i - key >= len(samples):
            raise CorruptionError(f"{where}: no record holds it")
        return samples[i - key]

    def records(self):
        """Every record in index order: (key, [samples])."""
        for k, shard in enumerate(self.shards):
            with self._env(k).begin() as txn:
                for key_bytes, value in txn.cursor():
                    key = struct.unpack(">Q", key_bytes)[0]
                    yield key, self.db.decode(bytes(value), f"{shard['path']}, key {key}")

    def verify(self):
        """Checks that the records hold samples 0 .. count-1 exactly, and the
        split's content hash; returns the hash as an integer."""
        split_hash, expected = xxhash.xxh64(), 0
        for key, samples in self.records():
            if key != expected:
                raise CorruptionError(f"split '{self.name}': record key {key}, expected {expected}")
            for sample in samples:
                content = b"".join(sample[name].tobytes() for name, _, _ in self.db.fields)
                split_hash.update(struct.pack("<Q", xxhash.xxh64_intdigest(content)))
            expected += len(samples)
        if expected != len(self):
            raise CorruptionError(f"split '{self.name}': {expected} samples, the manifest says {len(self)}")
        if hash_string(split_hash.intdigest()) != self.info["content_hash"]:
            raise CorruptionError(f"split '{self.name}': content hash does not match the manifest")
        return split_hash.intdigest()


# The epoch order (FORMAT.md, "Epoch order").
U64 = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & U64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & U64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64
        return z ^ (z >> 31)

    def below(self, bound):
        """Uniform in [0, bound), by rejection."""
        limit = U64 - U64 % bound
        while True:
            x = self.next()
            if x < limit:
                return x % bound


def _shuffle(items, rng, lo=0, hi=None):
    """Fisher-Yates over items[lo:hi] in place, as FORMAT.md's step 3."""
    hi = len(items) if hi is None else hi
    for i in range(hi - lo, 1, -1):
        j = rng.below(i)
        items[lo + i - 1], items[lo + j] = items[lo + j], items[lo + i - 1]


def epoch_order(n, seed, epoch, shuffle="full", block_samples=256, block_window=16):
    """The global order of epoch `epoch` of a split of n samples."""
    if shuffle == "none":
        return list(range(n))
    rng = SplitMix64(seed ^ SplitMix64(epoch).next())
    if shuffle == "full":
        order = list(range(n))
        _shuffle(order, rng)
        return order
    chunks = list(range((n + block_samples - 1) // block_samples))
    _shuffle(chunks, rng)
    order = []
    for g in range(0, len(chunks), block_window):
        lo = len(order)
        for c in chunks[g:g + block_window]:
            order.extend(range(c * block_samples, min(n, (c + 1) * block_samples)))
        _shuffle(order, rng, lo)
    return order


def rank_indices(order, rank, world, drop_last=False, start=0):
    """What rank `rank` of `world` reads of `order`, from global position `start`."""
    m = len(order) - start
    count = m // world if drop_last else (m + world - 1) // world
    return [order[start + (rank + k * world) % m] for k in range(count)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--verify", action="store_true", help="decode every record and check the content hashes")
    ap.add_argument("--split", default="train")
    ap.add_argument("--index", type=int, help="print this sample of --split as JSON")
    args = ap.parse_args()
    try:
        db = Db(args.db)
        if args.index is not None:
            sample = db[args.split][args.index]
            print(json.dumps({"fields": {name: {"dtype": str(a.dtype), "shape": list(a.shape),
                                                "values": a.reshape(-1).tolist()} for name, a in sample.items()}}))
            return 0
        if args.verify:
            db.verify()
        for name, split in db.splits.items():
            print(f"{name}: {len(split)} samples in {len(split.shards)} shard(s)")
        if args.verify:
            print(f"{args.db}: every record and content hash checks out")
    except (CorruptionError, FormatError, NotFoundError, KeyError) as e:
        print(f"granary_db: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
