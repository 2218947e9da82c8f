"""Round 14 of the hostile drill (twenty-second session): disks that fill. A
db, a Python write or a run's checkpoints on a disk without room for them
(a tmpfs in a private mount namespace: `unshare -rm`, as the e2e tests');
and a script's name mistyped after the interpreter's (`launch python3 x.py`)."""
import os
import textwrap

from drill_cases.common import FASHION, LAUNCH, PREP, TRAIN, run, sh


def round14(d, w):
    """Round 14's cases."""
    db = w("r14.db")
    run([PREP, "build", FASHION, db, "--limit", "2000", "--no-progress"])
    disks_that_fill(d, w, db)
    d.case("launch -- python3 -u trian.py (a script's name mistyped): said once, before any rank starts",
           [LAUNCH, "--ranks", "2", "--", "/usr/bin/python3", "-u", w("trian.py")], 1, needle="trian.py: no such file")


def on_small_disk(w, name, size, command):
    """`command` (shell) with the folder w(name) a tmpfs of `size` (its own mount namespace)."""
    disk = w(name)
    os.makedirs(disk, exist_ok=True)
    return sh(f"unshare -rm sh -c 'mount -t tmpfs -o size={size} tmpfs {disk} && {command}'"), disk


def disks_that_fill(d, w, db):
    """The db, the Python write and the checkpoints that their disk cannot hold: said before the disk fills."""
    args, disk = on_small_disk(w, "r14prep", "8m", f"{PREP} build {FASHION} {w('r14prep')}/f.db --no-progress")
    d.case("prep build of Fashion-MNIST (34 MB) onto an 8 MiB disk: the shortfall said at its first 1,000 samples",
           args, 1, needle="the db will need about 34 MB more", lines=2)
    script = w("r14write.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(f"""
            import sys, numpy as np, granary
            rng = np.random.default_rng(0)
            data = [(rng.integers(0, 256, (64, 64), np.uint8), k % 3) for k in range(5000)]
            granary.write(sys.argv[1], data, dictionary="off")
        """))
    args, disk = on_small_disk(w, "r14write", "8m", f"/usr/bin/python3 {script} {w('r14write')}/p.db")
    d.case("granary.write of 41 MB onto an 8 MiB disk: a UserWarning on the user's line before the disk fills",
           args, 1, needle="r14write.py:5: UserWarning: granary.write:", lines=None)
    args, disk = on_small_disk(w, "r14ck", "3m", f"{TRAIN} --db {db} --model resnet --epochs 1 "
                                                 f"--checkpoint-dir {w('r14ck')}/ck")
    d.case("train --checkpoint-dir on a disk without room for one checkpoint: refused before any rank starts",
           args, 1, needle="less than a checkpoint of this run takes, about 3.7 MB")
