"""Round 13 of the hostile drill (twenty-first session): scripts and runs one
pace off the path: Ctrl-C of train's own MPI job, a torchrun script written
for a workstation or for starting by hand, a loop written for DataLoader fed
by granary.Loader, and a db's parts named where a db or raw data goes."""
import os
import textwrap

from drill_cases.common import FASHION, LAUNCH, PREP, TRAIN, run, sh, wait_for_step_sh


def round13(d, w):
    """Round 13's cases."""
    db = w("r13.db")
    run([PREP, "build", FASHION, db, "--limit", "1000", "--no-progress"])
    mpi_group_stop(d, w, db)
    scripts_of_their_own(d, w, db)
    db_parts(d, w, db)


def mpi_group_stop(d, w, db):
    """Ctrl-C at the terminal of train's own MPI job: mpirun, interrupted too, stops passing on the ranks' output;
    the launcher says where the step was saved."""
    ck, metrics = w("r13m.ck"), w("r13m.jsonl")
    d.case("Ctrl-C to train --backend mpi's process group: the step saved and said so",
           sh(f"setsid {TRAIN} --db {db} --epochs 20 --backend mpi --checkpoint-dir {ck} --metrics {metrics} "
              f"--log-every 1 & pid=$!; {wait_for_step_sh(metrics)}kill -INT -$pid; wait $pid"), 130,
           needle="train: stopped by SIGINT; the step it reached is saved in", lines=None)


def script(w, name, text):
    path = w(name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


def scripts_of_their_own(d, w, db):
    """torchrun scripts as people write them, under launch."""
    greedy = script(w, "r13greedy.py", """
        import os, torch
        torch.set_num_threads(4 * os.cpu_count())  # written for a workstation
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad(); model(torch.randn(4, 8)).sum().backward(); opt.step()
    """)
    d.case("launch of a script that sets torch's threads above its rank's CPUs: said on rank 0",
           [LAUNCH, "--ranks", "2", "--", "/usr/bin/python3", greedy], 0, needle="they take turns on them")
    by_hand = script(w, "r13hand.py", """
        import argparse, torch, torch.distributed as dist
        p = argparse.ArgumentParser()
        p.add_argument("--rank", type=int, default=0)
        p.add_argument("--world-size", type=int, default=2)
        a = p.parse_args()
        dist.init_process_group("gloo", rank=a.rank, world_size=a.world_size)  # for starting each rank by hand
    """)
    d.case("launch of a script that passes its own rank= (argparse's default 0): the two rank 0s named",
           [LAUNCH, "--ranks", "2", "--", "/usr/bin/python3", by_hand], 1,
           needle="rank= of its own to init_process_group", lines=None)
    loop = script(w, "r13loop.py", f"""
        import torch, torch.distributed as dist, granary
        dist.init_process_group("gloo")
        train = granary.Loader({db!r}, batch_size=64)
        test = granary.Loader({db!r}, split="test", batch_size=100, shuffle=False)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(784, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            train.sampler.set_epoch(epoch)  # a DDP script's words for DistributedSampler
            for i, (x, y) in enumerate(train):
                opt.zero_grad(); torch.nn.functional.cross_entropy(model(x.flatten(1)), y).backward(); opt.step()
        assert i + 1 == len(train) and train.batch_size == 64
        assert len(train.sampler) == 500 and len(train.dataset) == len(test.dataset) == 1000  # --limit 1000 a split
    """)
    d.case("launch of a loop written for DataLoader (len(loader.dataset), loader.sampler.set_epoch) on a Loader",
           [LAUNCH, "--ranks", "2", "--", "/usr/bin/python3", loop], 0)


def db_parts(d, w, db):
    """A db's split folder where a db goes; a db where raw data goes."""
    d.case("train --db DB/train (a split folder of the db): the db named",
           [TRAIN, "--db", os.path.join(db, "train")], 1, needle=f"it lies inside the db {db}: name the db itself")
    d.case("prep build DB COPY (a db given as raw data): refused naming its source, nothing written",
           [PREP, "build", db, w("r13copy.db"), "--no-progress"], 1,
           needle=f"is a granary db (what prep build makes, this one from {FASHION})",
           check=lambda: "" if not os.path.exists(w("r13copy.db")) else "r13copy.db was written")
