"""Kills: prep build and a training rank killed at random moments."""
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time

from drill_cases.common import FASHION, PREP, ROOT, TRAIN, run


def kill_drill(d, w, kills=20):
    """prep build of a real-photo folder killed with SIGKILL at random moments:
    never a directory at the db path unless it verifies; --resume ends with
    the content hash of an uninterrupted build."""
    raw = w("photos")
    made = subprocess.run([os.path.join(ROOT, "tools/make_image_folder"), raw, "--images", "1500"],
                          capture_output=True, text=True)
    if made.returncode != 0:
        d.measured("SIGKILL during prep build, then --resume", lambda: ([made.stderr.strip()], "no photos"))
        return
    code, out, _, _, _ = run([PREP, "build", raw, w("photos-ref.db"), "--json", "--no-progress"])
    reference = json.loads(out)
    rng = random.Random(14)

    def drill():
        problems, resumed, finished = [], 0, 0
        for k in range(kills):
            db = w(f"killed{k}.db")
            at = rng.uniform(0.01, reference["seconds"])
            p = subprocess.Popen([PREP, "build", raw, db, "--no-progress"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(at)
            p.kill()
            p.wait()
            if os.path.exists(db):  # it finished before the kill: then it must be whole
                finished += 1
                if run([PREP, "verify", db])[0] != 0:
                    problems.append(f"kill {k} at {at:.2f}s: a db at the path that does not verify")
                continue
            code, out, err, _, _ = run([PREP, "build", raw, db, "--resume", "--json", "--no-progress"])
            if code != 0:
                problems.append(f"kill {k} at {at:.2f}s: --resume failed: {err.decode().strip()[:80]}")
            elif json.loads(out)["content_hash"] != reference["content_hash"]:
                problems.append(f"kill {k} at {at:.2f}s: resumed db has another content hash")
            else:
                resumed += 1
            shutil.rmtree(db, ignore_errors=True)
        return problems, (f"{kills} kills in a {reference['seconds']:.2f}s build of 1,500 photos: {resumed} "
                          f"resumed to the reference hash, {finished} had finished and verify")
    d.measured("SIGKILL during prep build, then --resume", drill)


def rank_kill_drill(d, w):
    """A training rank killed mid-epoch: the launcher stops the run within 60 s
    naming it; --resume from the last checkpoint ends with the weights of a run
    that was never interrupted."""
    db = w("rank-kill.db")
    run([PREP, "build", FASHION, db, "--limit", "3000", "--no-progress"])
    recipe = [TRAIN, "--db", db, "--epochs", "3", "--optimizer", "sgd", "--lr", "0.02", "--momentum", "0.9",
              "--checkpoint-every", "10", "--json", "--ranks", "2"]

    def drill():
        code, out, err, _, _ = run(recipe + ["--checkpoint-dir", w("whole")])
        if code != 0:
            return [f"the uninterrupted run failed: {err.decode().strip()[:80]}"], "no reference"
        reference = json.loads(out)["epochs"][-1]["weights_hash"]
        ck = w("killed")
        with tempfile.TemporaryFile() as err_file:
            p = subprocess.Popen(recipe + ["--checkpoint-dir", ck], stdout=subprocess.DEVNULL, stderr=err_file)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and p.poll() is None:  # a checkpoint past step 50: mid-epoch 2
                names = os.listdir(ck) if os.path.isdir(ck) else []
                if any(n.startswith("step-") and n.endswith(".ckpt") and int(n[5:15]) >= 50 for n in names):
                    break
                time.sleep(0.01)
            pids = subprocess.run(["pgrep", "-f", f"{ck} .*--rank 1 "], capture_output=True, text=True).stdout.split()
            if len(pids) != 1:
                p.kill()
                return [f"found {len(pids)} processes of rank 1"], "no rank to kill"
            os.kill(int(pids[0]), signal.SIGKILL)
            killed_at = time.monotonic()
            try:
                p.wait(timeout=90)
            except subprocess.TimeoutExpired:
                p.kill()
                return ["the launcher still ran 90 s after its rank was killed"], "hung"
            stopped_in = time.monotonic() - killed_at
            err_file.seek(0)
            message = err_file.read().decode("utf-8", "replace")
        problems = []
        if p.returncode == 0 or "rank 1 was killed by signal 9" not in message:
            problems.append(f"launcher exit {p.returncode} without naming rank 1")
        if stopped_in > 60:
            problems.append(f"stopped {stopped_in:.0f} s after the kill")
        code, out, err, _, _ = run(recipe + ["--checkpoint-dir", ck, "--resume"])
        if code != 0:
            problems.append(f"--resume failed: {err.decode().strip()[:80]}")
        elif json.loads(out)["epochs"][-1]["weights_hash"] != reference:
            problems.append("--resume ended with other weights than the uninterrupted run")
        return problems, (f"rank 1 killed after a step-50 checkpoint: the run stopped in {stopped_in:.1f} s naming "
                          f"it; --resume ended with the uninterrupted run's weights")
    d.measured("a training rank killed mid-epoch, then --resume", drill)
