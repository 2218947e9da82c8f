"""granary.write: a whole dataset (a torch Dataset, a generator, a dict of
them by split) into a db through a granary.Writer (python/granary/writer.py):
its splits planned (split_of, val_fraction), a map-style dataset read in
worker processes (python/granary/write_workers.py), an interrupted write
resumed without reading again what it stored."""
import difflib
import inspect
import sys

import numpy as np

from .errors import InvalidArgumentError
from .sample_advice import _refuse_tables, _warn_of_random_transforms
from .samples import _convert
from .write_workers import _item, _write_with_workers
from .writer import Writer

__all__ = ["write"]


def _is_map_style(dataset):
    """Whether `dataset` is read by index (len and []): not a torch
    IterableDataset, whose [] torch's Dataset makes raise even where it has a
    len."""
    torch_data = sys.modules.get("torch.utils.data")
    if torch_data is not None and isinstance(dataset, torch_data.IterableDataset):
        return False
    return hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__") and not isinstance(dataset, (dict, str))


def _iterated(dataset, split):
    """The samples iterating `dataset` gives; an exception it raises gets a
    note naming the sample it was asked for."""
    iterator, count = iter(dataset), 0
    while True:
        try:
            sample = next(iterator)
        except StopIteration:
            return
        except Exception as error:
            error.add_note(f"granary.write: raised by the iterable of split '{split}' when asked for its sample "
                           f"{count}")
            raise
        yield sample
        count += 1


def _split_indices(count, split_of, val_fraction):
    """{split: [item indices]} for a map-style dataset: split_of(index) names
    each item's split, or val_fraction of the items (chosen by a hash of
    their index, the same every run) become "val"."""
    if split_of is not None:
        splits = {}
        for index in range(count):
            splits.setdefault(str(split_of(index)), []).append(index)
        return splits
    chosen = np.arange(count, dtype=np.uint64)
    with np.errstate(over="ignore"):  # splitmix64 of the index
        z = chosen + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    val = (z >> np.uint64(11)).astype(np.float64) / float(1 << 53) < val_fraction
    return {"train": np.flatnonzero(~val).tolist(), "val": np.flatnonzero(val).tolist()}


# What a user's other words for granary.write's arguments mean here.
_WRITE_INSTEAD = {"num_workers": "workers=N reads the dataset in N processes, as DataLoader's num_workers",
                  "force": "overwrite=True replaces an existing db", "compression": "zstd_level= (0 stores raw)",
                  "level": "zstd_level=",
                  "shuffle": "a db keeps its samples' order; granary.Loader shuffles as it reads",
                  "batch_size": "the write batches by itself; granary.Loader(batch_size=) batches the reads"}


def _refuse_unknown(arguments):
    """TypeError for granary.write's unknown keyword arguments, naming the one meant."""
    for name in arguments:
        if name in _WRITE_INSTEAD:
            raise TypeError(f"granary.write takes no {name}= ({_WRITE_INSTEAD[name]})")
        close = difflib.get_close_matches(name, inspect.signature(write).parameters, n=1)
        raise TypeError(f"granary.write got an unexpected keyword argument '{name}'"
                        + (f": did you mean {close[0]}=?" if close else ""))


def write(db, samples, *, split_of=None, val_fraction=0.0, classes=None, workers=1, label=None, schema=None,
          overwrite=False, zstd_level=3, dictionary="auto", threads=0, progress=None, resume=False, **others):
    """Writes `samples` into a new db at `db` and returns its summary (see
    Writer.close). `samples` is any iterable of samples (a torch Dataset, a
    generator, a torchvision dataset, a list), or a dict of them by split
    name ({"train": ..., "test": ...}); a single one is split "train".

    For a map-style dataset (len and []), `split_of(index)` names each
    item's split, or `val_fraction` of its items become split "val";
    `workers`=N reads its items in N processes (as DataLoader does), so a
    dataset that decodes in __getitem__ is read on every core while the C++
    side compresses. `classes` defaults to the dataset's own `.classes`
    (torchvision's). resume=True continues an interrupted write of the same
    samples: a map-style dataset's stored items are not read again, an
    iterable's are read and skipped. Other arguments as granary.Writer's.
    """
    _refuse_unknown(others)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 1024:
        raise InvalidArgumentError(f"workers={workers!r}: must be an int in 1..1024")
    if not 0 <= val_fraction < 1:
        raise InvalidArgumentError(f"val_fraction={val_fraction!r}: must be in [0, 1)")
    if (split_of is not None or val_fraction) and isinstance(samples, dict):
        raise InvalidArgumentError("split_of and val_fraction split one dataset; samples is already a dict of splits")
    if split_of is not None and val_fraction:
        raise InvalidArgumentError("give split_of or val_fraction, not both")
    splits = samples if isinstance(samples, dict) else {"train": samples}
    _refuse_tables(samples, splits)
    if classes is None:
        classes = next((getattr(s, "classes") for s in splits.values() if hasattr(s, "classes")), None)
    # (split, dataset, indices or None for all in order)
    plan = []
    for name, dataset in splits.items():
        if split_of is not None or val_fraction:
            if not _is_map_style(dataset):
                raise InvalidArgumentError("split_of and val_fraction need a map-style dataset (len and [])")
            for part, indices in _split_indices(len(dataset), split_of, val_fraction).items():
                plan.append((part, dataset, indices))
        else:
            plan.append((name, dataset, None))
        _warn_of_random_transforms(dataset, name)
    if workers > 1:
        for name, dataset, _ in plan:
            if not _is_map_style(dataset):
                raise InvalidArgumentError(f"workers={workers}: split '{name}' is not a map-style dataset (len and "
                                           f"[]); an iterable is read in this process (workers=1)")
    writer = Writer(db, schema, label=label, classes=classes, overwrite=overwrite, zstd_level=zstd_level,
                    dictionary=dictionary, threads=threads, source=type(next(iter(splits.values()))).__name__,
                    progress=progress, options={"workers": workers}, resume=resume)
    # A map-style split's items in order (indices into the dataset); None for an iterable.
    orders = [indices if indices is not None else range(len(dataset)) if _is_map_style(dataset) else None
              for _, dataset, indices in plan]
    writer._plan = [[name, len(order) if order is not None else None] for (name, _, _), order in zip(plan, orders)]
    try:
        for (name, dataset, _), order in zip(plan, orders):
            expected = len(order) if order is not None else len(dataset) if hasattr(dataset, "__len__") else 0
            if writer._native is None and order is not None and len(order):
                writer._open(_item(dataset, order[0], name), name)
            if name in writer._finished:
                continue
            start = writer.resumed.get(name, 0)  # stored by the write this one resumes
            if workers > 1:
                _write_with_workers(writer, name, dataset, order[start:], start, expected, workers)
            else:
                items = (_item(dataset, i, name) for i in order[start:]) if order is not None else \
                    _iterated(dataset, name)
                for sample in items:
                    if writer._native is None:
                        writer._open(sample, name)
                    if order is None and writer.resumed and writer._stored_already(name):
                        continue
                    writer._stream(name, expected)
                    writer._add(_convert(sample, writer._fields, writer._index, name))
            if writer._native is not None and name not in writer._finished:
                writer._stream(name, expected)  # a split with no samples is still a split
        return writer.close()
    except BaseException as error:
        writer.abort()
        writer._note_resumable(error)
        raise
