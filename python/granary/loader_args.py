"""What granary.Loader makes of the arguments a torch DataLoader takes, so
that a script's `DataLoader(dataset, batch_size=64, shuffle=True,
num_workers=4, pin_memory=True)` becomes `granary.Loader(db, ...)` with the
same words: those that mean the same are taken, the rest refused naming what
the Loader does instead (granary/data.py uses them)."""
import difflib
import inspect
import warnings

from . import errors

# DataLoader's arguments that a Loader has no use for, and why.
_INSTEAD = {
    "collate_fn": "it batches the db's input and target itself; for batches of your own making, read the db with "
                  "granary.Dataset in a DataLoader",
    "sampler": "it deals each rank its part of the epoch's shuffled order itself (rank=, world=, shuffle=, "
               "set_epoch(e))",
    "batch_sampler": "it deals each rank its batches itself (batch_size=, rank=, world=, shuffle=)",
    "worker_init_fn": "its workers are C++ threads that run no Python",
    "multiprocessing_context": "its workers are C++ threads, not processes",
    "generator": "its order comes from seed= and set_epoch(e)",
    "prefetch_factor": "prefetch= is the number of batches it keeps ready",
    "timeout": "a batch that cannot be read fails at once, naming the record",
}
_TAKEN = ("num_workers", "pin_memory", "persistent_workers")


def shuffle_mode(shuffle):
    """"full", "block" or "none"; DataLoader's True and False are "full" and "none"."""
    if shuffle is True or shuffle is False:
        return "full" if shuffle else "none"
    if shuffle not in ("full", "block", "none"):  # the C++ loader's words for it name its tools' --shuffle
        raise errors.InvalidArgumentError(f"shuffle must be 'full', 'block', 'none' (or True, False), not {shuffle!r}")
    return shuffle


def threads_of(dataloader_args, threads):
    """`threads` with DataLoader's arguments applied: num_workers=N is
    threads=N (0, DataLoader's loading in the main process, counts as one
    thread beside it); pin_memory=True, for copies to a GPU, is ignored with a
    warning; persistent_workers is what the Loader's threads are anyway.
    TypeError for any other argument, naming what the Loader does instead."""
    for name, value in dataloader_args.items():
        if name == "num_workers":
            if threads is not None:
                raise TypeError("granary.Loader: give threads= or num_workers= (DataLoader's name for it), not both")
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise errors.InvalidArgumentError(f"num_workers must be an integer >= 0, got {value!r}")
            threads = max(1, value)
        elif name == "pin_memory":
            if value:
                warnings.warn("granary.Loader: pin_memory=True is for copies to a GPU; granary trains on CPUs: "
                              "ignored", stacklevel=3)
        elif name == "persistent_workers":
            pass  # the Loader's threads live as long as it does
        elif name in _INSTEAD:
            raise TypeError(f"granary.Loader takes no {name}= (a DataLoader's): {_INSTEAD[name]}")
        else:
            from .data import Loader  # (data imports this module)
            close = difflib.get_close_matches(name, [*inspect.signature(Loader).parameters, *_TAKEN], n=1)
            raise TypeError(f"granary.Loader got an unexpected keyword argument '{name}'"
                            + (f": did you mean {close[0]}=?" if close else ""))
    return threads
