"""What every drill case shares: the built tools, running one as a user would, scratch inputs, and the
table of cases."""
import io
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import time

import benchlib

# The cases take these from here.
FASHION, PREP, ROOT, TRAIN, free_port = benchlib.FASHION, benchlib.PREP, benchlib.ROOT, benchlib.TRAIN, benchlib.free_port
LOADER = benchlib.program("loader")
LAUNCH = benchlib.program("launch")


def own_peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


PYTHON = "/usr/bin/python3"  # Debian's, which has torch


def granary_script(w, name, body):
    """A Python script in the drill's folder that imports numpy and granary first."""
    path = w(name)
    with open(path, "w") as f:
        f.write("import sys, numpy as np, granary\n" + textwrap.dedent(body))
    return path


def run(args, stdin=subprocess.DEVNULL, timeout=600):
    """(exit status, stdout, stderr, peak RSS MiB of the process tree, seconds)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(args, stdout=out, stderr=err, stdin=stdin)
        try:
            _, status, usage = os.wait4(p.pid, 0)
        except KeyboardInterrupt:
            p.kill()
            raise
        p.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        code = p.returncode if p.returncode >= 0 else 128 - p.returncode
        return code, out.read(), err.read(), usage.ru_maxrss / 1024, seconds


def sh(script):
    return ["/bin/sh", "-c", script]


def wait_for_step_sh(metrics, seconds=60):
    """Shell that waits, at most `seconds`, until a run's --metrics file
    holds its first step (as the e2e tests' WaitForFirstStep): the run is
    then training, its ranks started, whatever the machine's speed."""
    return f"for i in $(seq {seconds * 10}); do grep -q step {metrics} 2>/dev/null && break; sleep 0.1; done; "


def wait_until_none_sh(pattern, seconds=10):
    """Shell that waits, at most `seconds`, until no process's command line
    matches `pattern` (pgrep -f), then leaves their count in $n."""
    return (f"for i in $(seq {seconds * 10}); do n=$(pgrep -c -f {pattern}); test $n -eq 0 && break; sleep 0.1; "
            f"done; ")


def fashion_copy(path, files=("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")):
    os.makedirs(path, exist_ok=True)
    for f in files:
        shutil.copy(os.path.join(FASHION, f), path)
    return path


def db_hash(path):
    """The content hash in a db's manifest, or "none"."""
    try:
        with open(os.path.join(path, "manifest.json"), "rb") as f:
            return json.load(f)["content_hash"]
    except (OSError, ValueError, KeyError):
        return "none"


def db_count(db, split=None):
    """The samples a db's manifest holds (of one split where given)."""
    with open(os.path.join(db, "manifest.json")) as f:
        return sum(s["count"] for s in json.load(f)["splits"] if split in (None, s["name"]))


def image_folder(path, classes=("a", "b"), per_class=4):
    from PIL import Image
    for c in classes:
        os.makedirs(os.path.join(path, c), exist_ok=True)
        for i in range(per_class):
            Image.new("RGB", (40, 30), (i * 40, 90, 20)).save(os.path.join(path, c, f"{i}.jpg"))
    return path


def lying_jpeg(width, height):
    """A ~600-byte progressive JPEG whose header declares width x height."""
    from PIL import Image
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (10, 200, 30)).save(buf, "JPEG", progressive=True)
    data = bytearray(buf.getvalue())
    sof = data.index(b"\xff\xc2")
    data[sof + 5:sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(data)


def files_of(path):
    """{relative path: bytes} of every file under `path`."""
    out = {}
    for top, _, names in os.walk(path):
        for n in names:
            with open(os.path.join(top, n), "rb") as f:
                out[os.path.relpath(os.path.join(top, n), path)] = f.read()
    return out


class Drill:
    def __init__(self, work):
        self.work = work
        self.rows = []
        self.failed = 0

    def case(self, name, args, expect_exit, check=None, needle=None, report=False, lines=1):
        """Runs one case; `check()` returns "" if the aftermath is right, else what is wrong.
        A failure must say why in `lines` lines on stderr (a tuple: one of those counts; None: mpirun's own text
        follows, any count), or
        (`report`: prep verify) in its report on stdout."""
        floor = own_peak_rss_mib()  # a child's peak RSS counts ours at fork (before exec)
        code, out, err, rss, seconds = run(args)
        text = (out if report else err).decode("utf-8", "replace").strip()
        first = (text or out.decode("utf-8", "replace").strip() or " ").splitlines()[0]
        problems = []
        if code != expect_exit:
            problems.append(f"exit {code}, expected {expect_exit}")
        counts = lines if isinstance(lines, tuple) else (lines,)
        if expect_exit != 0 and not report and lines is not None and len(text.splitlines()) not in counts:
            problems.append(f"{len(text.splitlines())} lines on stderr")
        if needle and needle not in text:
            problems.append(f"message lacks '{needle}'")
        if check:
            aftermath = check()
            if aftermath:
                problems.append(aftermath)
        self.failed += bool(problems)
        rss_text = f"<= {floor:.0f}" if rss <= floor + 0.5 else f"{rss:.1f}"
        self.rows.append({"case": name, "exit": code, "expected": expect_exit, "peak_rss_mib": rss_text,
                          "seconds": round(seconds, 2), "message": first[:110],
                          "ok": not problems, "problems": problems})

    def measured(self, name, drill):
        """A case that counts its own outcomes: drill() returns (problems, one-line summary)."""
        start = time.monotonic()
        problems, summary = drill()
        self.failed += bool(problems)
        self.rows.append({"case": name, "exit": 1 if problems else 0, "expected": 0, "peak_rss_mib": "-",
                          "seconds": round(time.monotonic() - start, 2), "message": summary[:110],
                          "ok": not problems, "problems": problems[:3]})

    def table(self):
        print("| case | exit (expected) | peak RSS MiB | s | ok | message |")
        print("|---|---|---|---|---|---|")
        for r in self.rows:
            ok = "yes" if r["ok"] else "NO: " + "; ".join(r["problems"])
            msg = r["message"].replace("|", "\\|")
            print(f"| {r['case']} | {r['exit']} ({r['expected']}) | {r['peak_rss_mib']} | {r['seconds']} | {ok} | {msg} |")
