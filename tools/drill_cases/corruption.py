"""Corruption: flipped bits in records and in LMDB page headers."""
import json
import os
import random

from drill_cases.common import FASHION, LOADER, PREP, run


def record_spans(db):
    """(shard file, offset of the value in the file, value bytes, key) of every record of split train."""
    import lmdb
    spans = []
    for name in sorted(os.listdir(os.path.join(db, "train"))):
        shard = os.path.join(db, "train", name)
        data = open(shard, "rb").read()
        with lmdb.open(shard, subdir=False, readonly=True, lock=False) as env, env.begin() as txn:
            for key, value in txn.cursor():
                at = data.find(value)
                assert at > 0 and data.find(value, at + 1) == -1, "a record's bytes are not unique in its shard"
                spans.append((shard, at, len(value), int.from_bytes(key, "big")))
    return spans


def flip(path, offset, mask):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ mask]))


def corruption_drill(d, w, flips=200, header_flips=100):
    """Bit flips inside record values (found through the format, so each lands
    in bytes that matter) must all be caught by prep verify and by the loader,
    as an error naming the key or a counted skip with --skip-corrupt; flips in
    LMDB page headers must be reported without crashing anything."""
    db = w("flips.db")
    run([PREP, "build", FASHION, db, "--limit", "3000", "--shards", "2", "--no-progress"])
    spans = record_spans(db)
    rng = random.Random(7)

    def values():
        problems, by_verify, by_loader, skipped = [], 0, 0, 0
        for i in range(flips):
            shard, at, size, key = rng.choice(spans)
            offset, mask = at + rng.randrange(size), 1 << rng.randrange(8)
            flip(shard, offset, mask)
            where = f"{os.path.basename(shard)}, key {key}"
            code, out, _, _, _ = run([PREP, "verify", db])
            by_verify += code == 1 and where in out.decode()
            code, _, err, _, _ = run([LOADER, "bench", db, "--epochs", "1", "--shuffle", "none"])
            by_loader += code == 1 and where in err.decode()
            code, out, _, _, _ = run([LOADER, "bench", db, "--epochs", "1", "--skip-corrupt", "--json"])
            skipped += code == 0 and json.loads(out).get("skipped_corrupt", 0) > 0
            flip(shard, offset, mask)
        for name, n in (("prep verify", by_verify), ("loader", by_loader), ("loader --skip-corrupt", skipped)):
            if n != flips:
                problems.append(f"{name} caught {n} of {flips}")
        return problems, (f"{flips} flips in {len(spans)} records: verify {by_verify}, loader error {by_loader}, "
                          f"--skip-corrupt counted {skipped}")
    d.measured(f"{flips} bit flips inside record values", values)

    def headers():
        problems, reported, crashes = [], 0, 0
        page = os.sysconf("SC_PAGE_SIZE")
        shards = [os.path.join(db, "train", n) for n in sorted(os.listdir(os.path.join(db, "train")))]
        for i in range(header_flips):
            shard = rng.choice(shards)
            pages = os.path.getsize(shard) // page
            offset, mask = rng.randrange(2, pages) * page + rng.randrange(16), 1 << rng.randrange(8)
            flip(shard, offset, mask)
            verify = run([PREP, "verify", db])
            loader = run([LOADER, "bench", db, "--epochs", "1"])
            reported += verify[0] == 1
            if verify[0] == 0 and loader[0] != 0:  # verify passing means every record and hash checked out
                problems.append(f"the loader failed where verify passed, flip at {os.path.basename(shard)}:{offset}")
            for tool, result in (("verify", verify), ("loader", loader)):
                if result[0] >= 128 or result[0] not in (0, 1):
                    crashes += 1
                    problems.append(f"{tool} exit {result[0]} after a flip at {os.path.basename(shard)}:{offset}")
            flip(shard, offset, mask)
        return problems, (f"{header_flips} flips in page headers: verify reported {reported}, the rest left every "
                          f"record and hash intact; crashes {crashes}")
    d.measured(f"{header_flips} bit flips in LMDB page headers", headers)
