"""Round 12 of the hostile drill (twentieth session): shared machines and
folders as file systems keep them: a db another user built (root only, to
run as user nobody, else left out and said so), the folders a file system,
an archiver or an OS makes beside the images, a one-rank run stopped."""
import json
import os
import shutil
import sys

from drill_cases.common import FASHION, PREP, TRAIN, image_folder, run, sh, wait_for_step_sh

NOBODY = ["runuser", "-u", "nobody", "--"]


def round12(d, w):
    """Round 12's cases."""
    db = w("r12.db")
    run([PREP, "build", FASHION, db, "--limit", "256", "--no-progress"])
    another_users_db(d, w, db)
    system_folders(d, w)
    one_rank_stopped(d, w, db)


def as_nobody_possible(w):
    """Whether commands can run as user nobody and reach the drill's work folder (made readable to them)."""
    if os.geteuid() != 0 or run(NOBODY + [PREP, "--help"])[0] != 0:
        return False
    os.chmod(w(""), 0o755)
    return True


def another_users_db(d, w, db):
    """A db root built (in a container image, on a shared machine), used by another user: up to date, read."""
    if not as_nobody_possible(w):
        print("drill: round 12's other-user cases left out: they need root, and user nobody", file=sys.stderr)
        return
    build = [PREP, "build", FASHION, db, "--limit", "256", "--no-progress"]
    d.case("prep build run again by another user onto root's db: up to date, nothing written",
           NOBODY + build, 0, needle="is up to date (4 input files unchanged)")
    d.case("the same with --force: refused, naming the folder it may not write in",
           NOBODY + build + ["--force"], 1, needle="cannot create files in")
    d.case("train --db of root's db by another user", NOBODY + [TRAIN, "--db", db, "--epochs", "1"], 0)


def system_folders(d, w):
    """Photos on a disk of their own (lost+found, root's alone), a zip made on a Mac extracted (__MACOSX), a
    Synology share (@eaDir thumbnails in every folder): no classes, no samples, noted."""
    raw = image_folder(w("r12raw"))
    image_folder(w("r12raw", "__MACOSX"), classes=("a",), per_class=1)
    image_folder(w("r12raw", "a", "@eaDir", "0.jpg"), classes=("SYNOPHOTO_THUMB_XL",), per_class=1)
    os.makedirs(w("r12raw", "lost+found"), mode=0o700)
    user = NOBODY if as_nobody_possible(w) else []
    out = w("r12out")
    os.makedirs(out)
    if user:
        shutil.chown(out, "nobody")

    def two_classes():
        info = run([PREP, "info", os.path.join(out, "db"), "--json"])[1]
        names = json.loads(info or b"{}").get("class_names")
        return "" if names == ["a", "b"] else f"classes {names}, expected ['a', 'b']"

    d.case("prep build of a folder with lost+found/, __MACOSX/ and @eaDir/" + (" by another user" if user else ""),
           user + [PREP, "build", raw, os.path.join(out, "db"), "--no-progress"], 0, check=two_classes,
           needle="hidden or system folder(s) __MACOSX/, lost+found/")
    if user:
        os.makedirs(w("r12raw", "b", "private"), mode=0o700)
        d.case("the same by another user with a folder below a class that they may not list: named, with what to do",
               user + [PREP, "build", raw, os.path.join(out, "db2"), "--no-progress"], 1,
               needle="r12raw/b/private: this user may not list it (Permission denied): make it readable")


def one_rank_stopped(d, w, db):
    """A one-rank run without --checkpoint-dir stopped: said, 128 + the signal, as two ranks are."""
    metrics = w("r12s.jsonl")
    d.case("train --ranks 1 without --checkpoint-dir sent SIGTERM once it trains: nothing kept, said",
           sh(f"{TRAIN} --db {db} --epochs 50 --ranks 1 --metrics {metrics} --log-every 1 & pid=$!; "
              f"{wait_for_step_sh(metrics)}kill -TERM $pid; wait $pid"), 143,
           needle="train: stopped by SIGTERM; nothing of the run was kept", lines=None)
