#!/usr/bin/python3
"""Every command the README shows in its sh blocks that can run on one machine runs, on small data, and exits 0.

The commands are read from README.md itself, so a documented command cannot break unnoticed. They are
changed only as far as a test on one small machine needs: the real Fashion-MNIST files with --limit 600,
one epoch, a small image folder (photos/) and CSV tables (data.csv, new.csv, houses.csv) made here,
`[optional]` parts left out and placeholders filled (DB), a two-node run as two processes on 127.0.0.1,
mpirun's cluster command as its one-machine equivalent (-H localhost:2). Left out: tools/setup (CI runs
it), srun and sbatch (no Slurm here), tools/netsim (its own tests, in network namespaces) and the --tune
table's comment lines.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/readme_test.py
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("GRANARY_BUILD", os.path.join(ROOT, "build")))
SKIPPED = ("tools/setup", "srun ", "sbatch ", "tools/netsim")


def readme_commands():
    """The README's sh commands in order, continuation lines joined, comments dropped."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def small(command):
    """The command as this test runs it: small data, one epoch, placeholders filled."""
    c = command.replace("build/", BUILD + "/")
    c = re.sub(r"\[[^\]]*\]", "", c)  # [--json], [--seed 0]: optional
    c = c.replace(" examples/", " " + ROOT + "/examples/")
    fashion = "/usr/share/datasets/fashion-mnist fmnist.db"
    c = c.replace(fashion, fashion + " --limit 600")
    launch_tune = "trainer/launch --tune" in c
    if not launch_tune:  # launch --tune measures the script's steps: it keeps its epochs
        c = re.sub(r"--epochs \d+", "--epochs 1", c)
    c = re.sub(r"\bDB\b", "fmnist.db", c)
    c = re.sub(r"--size \d+", "--size 16", c)
    if launch_tune:  # launch's own flag, before COMMAND
        c = c.replace("trainer/launch --tune", "trainer/launch --tune --tune-seconds 1")
    elif "--tune" in c:
        c += " --tune-seconds 0.5"
    if c.startswith("mpirun "):
        root = "--allow-run-as-root " if os.geteuid() == 0 else ""
        c = re.sub(r"^mpirun -np \d+ -H \S+", "mpirun " + root + "-np 2 -H localhost:2", c)
    return " ".join(c.split())


class ReadmeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="granary-readme-")
        prep = os.path.join(BUILD, "preprocess/prep")
        # photos/: two classes of small PNGs (Fashion-MNIST images, written by prep cat --png).
        subprocess.run([prep, "build", "/usr/share/datasets/fashion-mnist", os.path.join(cls.tmp, "src.db"),
                        "--limit", "40", "--no-progress"], check=True, capture_output=True)
        for i in range(40):
            folder = os.path.join(cls.tmp, "photos", ("shirts", "shoes")[i % 2])
            os.makedirs(folder, exist_ok=True)
            subprocess.run([prep, "cat", os.path.join(cls.tmp, "src.db"), "--index", str(i), "--png",
                            os.path.join(folder, f"{i}.png")], check=True, capture_output=True)
        with open(os.path.join(cls.tmp, "data.csv"), "w") as f:
            f.write("a,b,target\n" + "".join(f"{i % 17},{i % 5},{(i % 17 + i % 5) % 2}\n" for i in range(300)))
        with open(os.path.join(cls.tmp, "new.csv"), "w") as f:  # data.csv's columns in another order, more rows
            f.write("b,target,a\n" + "".join(f"{i % 5},{(i % 17 + i % 5) % 2},{i % 17}\n" for i in range(300, 400)))
        with open(os.path.join(cls.tmp, "houses.csv"), "w") as f:
            f.write("rooms,age,price\n" + "".join(f"{i % 6},{i % 40},{i % 6 * 1000.5 - i % 40 * 7.25}\n"
                                                    for i in range(300)))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_command(self, command):
        r = subprocess.run(command, shell=True, cwd=self.tmp, capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, f"{command}\n{r.stderr[-2000:]}")

    def test_every_readme_command_runs_on_small_data(self):
        commands = [c for c in readme_commands() if not c.startswith(SKIPPED)]
        self.assertGreater(len(commands), 15, commands)
        ran = 0
        pending_node = None
        for command in commands:
            with self.subTest(command=command):
                c = small(command)
                if "--nnodes 2 --node-rank 0" in c:  # started with node 1, below
                    pending_node = c
                    continue
                if "--nnodes 2 --node-rank 1" in c:
                    port = str(free_port())
                    both = [n.replace("10.0.0.1", "127.0.0.1").replace("29500", port) + " --threads 1 --pin off"
                            for n in (pending_node, c)]
                    node1 = subprocess.Popen(both[1], shell=True, cwd=self.tmp, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True)
                    self.run_command(both[0])
                    _, node1_err = node1.communicate(timeout=600)
                    self.assertEqual(node1.returncode, 0, node1_err[-2000:])
                    ran += 2
                    continue
                self.run_command(c)
                ran += 1
        self.assertIsNotNone(pending_node, "the README's two-node example was not found")
        print(f"readme: {ran} commands ran", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
