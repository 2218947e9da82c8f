"""What the benchmark tools share: where the build's programs are, a free
port, a train run read back as JSON, and the Python peer's pieces (the
Fashion-MNIST IDX reader and the seed's convnet, as source for the peer
scripts the tools write and run with /usr/bin/python3).

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import benchlib
"""
import json
import os
import shlex
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
FASHION = "/usr/share/datasets/fashion-mnist"


def program(name, build=BUILD):
    """The path of `name` ("prep", "train", "launch", "loader") in a build folder."""
    folder = {"prep": "preprocess", "train": "trainer", "launch": "trainer", "loader": "loader"}[name]
    return os.path.join(build, folder, name)


PREP = program("prep")
TRAIN = program("train")


def free_port():
    """A TCP port on the loopback device that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_json(cmd, tool, echo=False):
    """`cmd` run to the end, its stdout read as JSON. A failed run ends the
    calling tool (`tool`: its name) with the command and its stderr: a
    benchmark never reports a figure of a run that failed."""
    if echo:
        print("  $ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr, flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{tool}: {' '.join(shlex.quote(c) for c in cmd)} failed (exit {done.returncode}):\n"
                 f"{done.stderr.strip()}")
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as e:
        sys.exit(f"{tool}: {' '.join(cmd)}: its output is not JSON ({e})")


def train_json(db, args, tool, train=TRAIN, echo=False):
    """train --db DB ARGS --json, its report (`args`: a list or a string)."""
    args = shlex.split(args) if isinstance(args, str) else list(args)
    return run_json([train, "--db", db] + args + ["--json"], tool, echo)


# The peer's Fashion-MNIST reader and the seed's convnet (conv5x5-32, pool,
# conv5x5-64, pool, fc-1024, dropout 0.4, fc-10), as Python source for a
# peer script (it imports gzip, numpy as np, torch.nn as nn and
# torch.nn.functional as F itself).
PEER_CONVNET = r'''
def idx(path):
    with gzip.open(path) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)

class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 1024)
        self.drop = nn.Dropout(0.4)
        self.fc2 = nn.Linear(1024, 10)
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(self.drop(F.relu(self.fc1(x.flatten(1)))))
'''
