"""The first round of hostile input: misuse, odd names, signals, flags, lying inputs, a full disk."""
import json
import os
import shutil

from drill_cases.common import (FASHION, LOADER, PREP, TRAIN, db_hash, fashion_copy, image_folder, lying_jpeg, run, sh,
                                 wait_for_step_sh, wait_until_none_sh)

SMALL = ["--limit", "300", "--no-progress"]


def hostile_input(d, w):
    """The first round's cases, in four groups."""
    misuse(d, w)
    fm = launcher_and_flags(d, w)
    lying_inputs(d, w, fm)
    limits(d, w)


def misuse(d, w):
    """--force onto what is not a db, two builds of one path, link cycles, names that are not UTF-8."""
    # 1. --force deletes nothing that is not a db.
    raw = fashion_copy(w("parent", "raw"))
    kept = lambda: "" if os.path.exists(os.path.join(raw, "train-images-idx3-ubyte.gz")) else "raw input deleted"
    d.case("--force onto the raw input", [PREP, "build", raw, raw, "--force"] + SMALL, 1, kept, "is or contains the input")
    d.case("--force onto the input's parent", [PREP, "build", raw, w("parent"), "--force"] + SMALL, 1, kept,
           "is or contains the input")
    with open(w("notes"), "w") as f:
        f.write("keep me")
    d.case("--force onto a user's file", [PREP, "build", raw, w("notes"), "--force"] + SMALL, 1,
           lambda: "" if open(w("notes")).read() == "keep me" else "file deleted", "is not a granary db")

    # 2. Two builds of one path: one stops naming the other; the db verifies.
    out_db = w("out.db")
    build = f"{PREP} build {FASHION} {out_db} --threads 1 --no-progress"
    d.case("two builds of one path", sh(f"({build} 2>/dev/null) & sleep 0.3; {build}; rc=$?; wait; exit $rc"), 1,
           lambda: "" if run([PREP, "verify", out_db])[0] == 0 else "published db does not verify",
           "being built by process")

    # 3. Symlink cycles: each image once, the links named, no runaway walk.
    imgs = image_folder(w("cycles"))
    os.symlink(".", os.path.join(imgs, "a", "x"))
    os.symlink(".", os.path.join(imgs, "b", "y"))
    os.symlink("..", os.path.join(imgs, "a", "up"))
    os.symlink("../b", os.path.join(imgs, "a", "cross"))

    def eight_samples():
        code, out, _, _, _ = run([PREP, "info", w("cycles.db"), "--json"])
        n = json.loads(out)["splits"][0]["count"] if code == 0 else -1
        return "" if n == 8 else f"{n} samples, expected 8"
    d.case("symlink cycles and cross links", [PREP, "build", imgs, w("cycles.db"), "--no-progress"], 0, eight_samples)

    # 4. Names that are not UTF-8: RAW, class folder, db path with --json.
    odd = image_folder(w("raw\udcff"), classes=("caf\udce9", "ok"))
    d.case("non-UTF-8 RAW, class and db path, --json",
           [PREP, "build", odd, w("db\udcfe"), "--json", "--no-progress"], 0,
           lambda: "" if run([PREP, "verify", w("db\udcfe")])[0] == 0 else "db does not verify")
    for c in ("a", "b"):  # two classes: one would add a note before the error
        os.makedirs(w("nl", c))
        shutil.copy(os.path.join(w("cycles", "a"), "0.jpg"), w("nl", c, "fine.jpg"))
    with open(w("nl", "a", "bad\nname.jpg"), "w") as f:
        f.write("not a jpeg")
    d.case("a rejected file named with a newline", [PREP, "build", w("nl"), w("nl.db"), "--no-progress",
                                                    "--on-error", "fail"], 1, None, "bad\\nname.jpg")


def launcher_and_flags(d, w):
    """No rank outlives its launcher; flags are bounded before any work. Returns the small db it built."""
    # 5. The launcher leaves no rank behind.
    fm = w("fm.db")
    run([PREP, "build", FASHION, fm] + SMALL)
    # A regex matching the ranks' command lines, not this script's own shell.
    ranks = f"'{w('fm[.]db')} --ranks 2 --epochs 100000 --layout'"
    for sig in ("TERM", "INT", "KILL"):
        # setsid: a background job of a non-interactive shell ignores SIGINT.
        metrics = w(f"sig-{sig}.jsonl")
        script = (f"setsid {TRAIN} --log-every 1 --metrics {metrics} --db {fm} --ranks 2 --epochs 100000 "
                  ">/dev/null 2>&1 & L=$!; " + wait_for_step_sh(metrics) +
                  f"kill -{sig} $L; wait $L; rc=$?; " + wait_until_none_sh(ranks) +
                  "echo \"launcher exit $rc, ranks left $n\" >&2; test $n -eq 0")
        d.case(f"SIG{sig} to the launcher", sh(script), 0)

    # 6. Flags bounded before any work.
    # CLI11's own range checks exit 2; checks past parsing exit 1.
    for name, args, expect in [
            ("train --ranks 1000", [TRAIN, "--db", fm, "--ranks", "1000"], 1),
            ("train --batch-size -1", [TRAIN, "--db", fm, "--batch-size", "-1"], 1),
            ("train --prefetch 1000000000", [TRAIN, "--db", fm, "--prefetch", "1000000000"], 1),
            ("train --threads 100000", [TRAIN, "--db", fm, "--threads", "100000"], 1),
            ("loader bench --threads 100000", [LOADER, "bench", fm, "--threads", "100000"], 2),
            ("loader bench --epochs 0", [LOADER, "bench", fm, "--epochs", "0"], 2),
            ("loader bench --batch -1", [LOADER, "bench", fm, "--batch", "-1"], 2),
            ("loader bench --prefetch 256 --batch 1048576",
             [LOADER, "bench", fm, "--prefetch", "256", "--batch", "1048576"], 1),
            ("loader bench --prefetch 1000", [LOADER, "bench", fm, "--prefetch", "1000"], 2),
            ("prep build --threads 100000", [PREP, "build", FASHION, w("x"), "--threads", "100000"], 2),
            ("prep build --limit -1", [PREP, "build", FASHION, w("x"), "--limit", "-1"], 2),
            ("loader order --epoch -1", [LOADER, "order", fm, "--epoch", "-1"], 2)]:
        d.case(name, args, expect)
    return fm


def lying_inputs(d, w, fm):
    """An IDX file of 0 images, a manifest that lies (on `fm`, restored after), JPEGs that lie about their size."""
    # 7. An IDX file declaring 0 images.
    os.makedirs(w("zero"))
    with open(w("zero", "train-images-idx3-ubyte"), "wb") as f:
        f.write(b"\0\0\x08\x03" + (0).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2)
    with open(w("zero", "train-labels-idx1-ubyte"), "wb") as f:
        f.write(b"\0\0\x08\x01" + (0).to_bytes(4, "big"))
    d.case("IDX declaring 0 images", [PREP, "build", w("zero"), w("zero.db")], 1, None, "no images to read")

    # 8. A manifest that lies.
    honest = open(os.path.join(fm, "manifest.json")).read()
    for lie in ("1099511627776", "9223372036854775807", "-5"):
        with open(os.path.join(fm, "manifest.json"), "w") as f:
            f.write(honest.replace('"count": 300', f'"count": {lie}'))
        for tool, args in [("verify", [PREP, "verify", fm]), ("loader bench", [LOADER, "bench", fm]),
                           ("train", [TRAIN, "--db", fm, "--ranks", "1"])]:
            d.case(f"count {lie}: {tool}", args, 1, report=tool == "verify")
    for name, old, new in [("shape", '"shape": [\n          1,', '"shape": [\n          100000000,'),
                           ("num_classes", '"num_classes": 10', '"num_classes": 1000000000000')]:
        with open(os.path.join(fm, "manifest.json"), "w") as f:
            f.write(honest.replace(old, new))
        d.case(f"huge {name}: train", [TRAIN, "--db", fm, "--ranks", "1"], 1)
    with open(os.path.join(fm, "manifest.json"), "w") as f:
        f.write(honest)

    # 9. Decoder amplification: eight 600-byte JPEGs declaring 16384 x 16384.
    os.makedirs(w("bombs", "a"))
    image_folder(w("bombs"), classes=("a",), per_class=2)
    for i in range(8):
        with open(w("bombs", "a", f"bomb{i}.jpg"), "wb") as f:
            f.write(lying_jpeg(16384, 16384))
    d.case("8 JPEGs declaring 16384x16384", [PREP, "build", w("bombs"), w("bombs.db"), "--no-progress",
                                             "--max-rejects", "0.9"], 0)


def limits(d, w):
    """4,096 shards, CSV edge cases, a full disk, a shard that fills its map, an address-space limit."""
    # 10. The whole --shards range, and verify of it.
    d.case("--shards 4096 build", sh(f"ulimit -S -n 1024; {PREP} build {FASHION} {w('many.db')} --limit 4096 "
                                     f"--shards 4096 --no-progress"), 0)
    d.case("--shards 4096 verify", [PREP, "verify", w("many.db")], 0)

    # 11. CSV edge cases.
    for name, text, expect, needle in [
            ("CSV with a byte order mark", b"\xef\xbb\xbflabel,x\n1,2\n0,3\n", 0, None),
            ("CSV with a header only", b"x,label\n", 1, "no data rows"),
            ("CSV with 1e39", b"x,label\n1e39,1\n" + b"1,0\n" * 200, 0, None),
            ("CSV with the label column twice", b"label,x,label\n1,2,3\n", 1, "twice")]:
        path = w(name.replace(" ", "_") + ".csv")
        with open(path, "wb") as f:
            f.write(text)
        d.case(name, [PREP, "build", path, path + ".db", "--label", "label", "--no-progress"], expect, None, needle)

    # 12. A full disk (a 2 MiB tmpfs in a private mount namespace).
    if run(["unshare", "-rm", "true"])[0] == 0:
        disk = w("disk")
        os.makedirs(disk)
        b = f"{PREP} build {FASHION} {disk}/db --no-progress"
        d.case("full disk, then --resume after freeing space",
               sh(f"unshare -rm sh -c 'mount -t tmpfs -o size=2m tmpfs {disk} && ({b} 2>&1 | grep -q \"No space left\")"
                  f" && ! test -e {disk}/db && mount -o remount,size=128m {disk} && {b} --resume "
                  f"&& {PREP} verify {disk}/db >/dev/null'"), 0)

    # 13. A shard that fills its map (--max-shard-mb), then --resume with room:
    # one clear line, no db, and the content hash of an uninterrupted build.
    code, out, _, _, _ = run([PREP, "build", FASHION, w("map-reference"), "--no-progress", "--json"])
    reference = json.loads(out)["content_hash"] if code == 0 else "none"
    mapped = w("mapped")
    d.case("a shard fills its map (--max-shard-mb 8)",
           [PREP, "build", FASHION, mapped, "--no-progress", "--max-shard-mb", "8"], 1,
           lambda: "a db at the path" if os.path.exists(mapped) else "", "would outgrow --max-shard-mb 8")
    d.case("... --resume --max-shard-mb 64", [PREP, "build", FASHION, mapped, "--no-progress", "--json", "--resume",
                                              "--max-shard-mb", "64"], 0,
           lambda: "" if db_hash(mapped) == reference else f"content hash {db_hash(mapped)}, not {reference}")
    # 14. An address-space limit (ulimit -v) far below the old fixed 64 GiB map.
    limited = w("limited")
    d.case("build under ulimit -v 3 GB", sh(f"ulimit -v 3000000 && {PREP} build {FASHION} {limited} --no-progress "
                                            f"--threads 2 2>&1 && {PREP} verify {limited} >/dev/null"), 0,
           lambda: "" if db_hash(limited) == reference else f"content hash {db_hash(limited)}, not {reference}")
