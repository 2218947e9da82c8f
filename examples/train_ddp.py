#!/usr/bin/python3
"""PyTorch DistributedDataParallel on CPU (gloo), fed by granary.Loader.

Your own PyTorch training loop keeps everything but its data: where an
ImageFolder and a DataLoader (with a DistributedSampler) were, granary.Loader
reads the db that `prep build` made, on its own threads. The lines marked
"granary" are all that differ from the usual recipe.

    tools/build
    build/preprocess/prep build /usr/share/datasets/fashion-mnist fashion.db
    PYTHONPATH=build/python /usr/bin/python3 examples/train_ddp.py fashion.db --world 2 --epochs 3

or started by granary's launcher (or torchrun), which starts the ranks and
gives each its CPUs and threads; the script then runs as one rank:

    PYTHONPATH=build/python build/trainer/launch --ranks 2 /usr/bin/python3 examples/train_ddp.py fashion.db

Prints one JSON line per epoch (rank 0): mean loss, samples, samples/s, test
accuracy when the db has a test or val split, and a checksum of each rank's
parameters (DDP keeps them equal).
"""
import argparse
import gc
import json
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record

import granary  # granary


def make_model(input_shape, classes):
    if len(input_shape) == 1:  # a feature vector (a CSV db)
        return nn.Sequential(nn.Linear(input_shape[0], 64), nn.ReLU(), nn.Linear(64, classes))
    channels = input_shape[0]
    return nn.Sequential(nn.Conv2d(channels, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(32, classes))


def eval_split(about):
    splits = {s["name"] for s in about["splits"]}
    return next((s for s in ("test", "val") if s in splits), None)


def worker(rank, args, port):
    if port is not None:  # started here by mp.spawn; under launch or torchrun, their variables say it all
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(args.world))
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.threads is not None:  # else torch's default, or what the launcher set (OMP_NUM_THREADS)
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)  # DDP also broadcasts rank 0's parameters

    # granary: this rank's share of each shuffled epoch, prefetched by C++ threads
    # (rank and world from RANK and WORLD_SIZE; threads: the launcher's share, if not given).
    train = granary.Loader(args.db, batch_size=args.batch_size, seed=0, threads=args.loader_threads,
                           augment=args.augment, normalize=True)
    about = granary.describe(args.db)  # splits, fields, classes, the input's shape
    held_out = eval_split(about)
    test = granary.Loader(args.db, split=held_out, batch_size=256, shuffle="none", threads=args.loader_threads,
                          normalize=True) if held_out else None

    model = nn.parallel.DistributedDataParallel(make_model(about["input_shape"], about["num_classes"]))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        train.set_epoch(epoch)  # granary: as DistributedSampler.set_epoch
        model.train()
        start = time.perf_counter()
        totals = torch.zeros(2, dtype=torch.float64)  # loss sum, samples
        for images, labels in train:
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            totals += torch.tensor([loss.item() * len(labels), len(labels)], dtype=torch.float64)
        seconds = time.perf_counter() - start
        dist.all_reduce(totals)
        report = {"epoch": epoch, "loss": round(totals[0].item() / totals[1].item(), 4),
                  "samples": int(totals[1].item()), "samples_per_s": round(totals[1].item() / seconds, 1)}
        if test is not None:
            model.eval()
            correct = torch.zeros(2, dtype=torch.float64)
            with torch.no_grad():
                for images, labels in test:
                    correct += torch.tensor([(model(images).argmax(1) == labels).sum().item(), len(labels)],
                                            dtype=torch.float64)
            dist.all_reduce(correct)  # padding may count a sample twice across ranks
            report["test_accuracy"] = round(correct[0].item() / correct[1].item(), 4)
        checksum = sum(p.detach().double().sum().item() for p in model.parameters())
        checksums = [None] * world
        dist.all_gather_object(checksums, f"{checksum:.6e}")
        report["parameter_checksums"] = checksums
        if rank == 0:
            print(json.dumps(report), flush=True)
    # Teardown order matters in PyTorch 1.13: DDP's Reducer holds the process
    # group and is destroyed with the GIL held. Had it the group's last
    # reference, the group's destructor would wait, GIL held, for a Gloo thread
    # that may need the GIL to free a tensor: a hang at exit. So the model goes
    # first, and destroy_process_group (which releases the GIL) ends the group.
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


@record  # under launch (or torchrun) a rank's exception is named in the launcher's line on its failure
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--world", type=int, default=2, help="processes (ranks) started here (not under launch)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads per rank (default: 1, or the launcher's choice under launch)")
    ap.add_argument("--loader-threads", type=int, default=None,
                    help="granary loader threads per rank (default: 1, or the launcher's choice under launch)")
    ap.add_argument("--augment", default="", help="e.g. flip,crop")
    args = ap.parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # one rank of launch's (or torchrun's) job
        worker(None, args, None)
        return
    args.threads = 1 if args.threads is None else args.threads
    args.loader_threads = 1 if args.loader_threads is None else args.loader_threads
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args, port), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
