"""granary from Python: the dbs `prep build` writes, for a PyTorch training loop.

    import granary
    train = granary.Loader("photos.db", batch_size=64, threads=2, augment="crop,flip", normalize=True)
    for epoch in range(10):
        train.set_epoch(epoch)
        for images, labels in train:      # float32 N x C x H x W and int64 N torch tensors
            ...

granary.Loader is granary's C++ prefetching loader (decompression, augmentation
and batching on its own threads, the GIL released); granary.Dataset is a
map-style torch Dataset for DataLoader and DistributedSampler. Both come from
the C++ module granary._native when it is built (build/python/granary/), and
Dataset falls back to the pure-Python reader (granary.reader) when it is not.
Errors are granary.Error subclasses (granary.errors).
"""
import importlib

from .errors import (CorruptionError, Error, FailedPreconditionError, FormatError, InvalidArgumentError, NotFoundError,
                     ReadError, WorkerError, WriteError)
from .write_dataset import write
from .writer import Writer

__all__ = ["Dataset", "Loader", "Writer", "write", "describe", "model_info", "load_image", "load_table",
           "pad_collate", "Error", "CorruptionError", "FailedPreconditionError", "FormatError", "InvalidArgumentError",
           "NotFoundError", "ReadError", "WorkerError", "WriteError", "native_available"]


def describe(db):
    """What a db holds, as a dict: "splits" (name, samples, shards), "fields"
    (name, dtype, shape, layout), "label_field", "num_classes", "classes"
    (names in label order), "input_field" and "target_field" (what `train`
    and granary.Loader read by default; None if the db needs them named),
    "input_shape" (one sample as granary.Loader batches it: C x H x W for an
    image), "codec", "zstd_level", "source", "build_options", "rejected" (items the
    build rejected), "content_hash", "builder", "created_utc", "statistics"
    (split -> feature field -> per-element "samples", "missing", "mean",
    "std", "min", "max" over the values present, as the build recorded them:
    what to standardise a feature vector with; {} for image dbs),
    "class_counts" (split -> the samples of each class, as the build counted
    them; {} for a db without classes or built before 2026-12-07). Read by the C++
    module, with the same checks and errors as `prep info`."""
    from .paths import os_bytes
    try:
        from . import _native
    except ImportError:
        raise Error("granary.describe needs granary's C++ module (build granary; see README)") from None
    return _native.describe(os_bytes(db))


def model_info(path):
    """What a model saved by `train --save FILE.pt` (or its FILE.int8.pt)
    expects of its input, from the file's extra file granary.json, as a dict:
    "input_field", "input_shape" (one sample, as granary.Loader batches it),
    "input_scale" (1/255 for uint8 images), "mean" and "std" (input = (value
    * input_scale - mean) / std), "classes" (or, for a model of a number to
    predict, "regression_target": its one output is that value, in its
    units), "db_content_hash", "input_names" (where the db named its input's
    elements: a table's columns and one-hot categories, "colour=red"), and
    "normalize": (mean, std), what granary.Loader's normalize= takes to feed
    it as `train` did. None for a TorchScript file without one (saved from
    Python). torch.jit.load(path, _extra_files={"granary.json": ""}) reads
    the same JSON."""
    import json
    import zipfile
    from .paths import os_str
    name = os_str(path, "model")
    try:
        with zipfile.ZipFile(name) as archive:
            cards = [n for n in archive.namelist() if n.endswith("/extra/granary.json")]
            if not cards:
                return None
            info = json.loads(archive.read(cards[0]))
    except (OSError, zipfile.BadZipFile, ValueError) as e:
        raise FormatError(f"{name}: not a TorchScript file with a readable granary.json ({e})") from None
    info["normalize"] = (info["mean"], info["std"])
    return info


def class_counts(db, split="train"):
    """The samples of each class in `split`, a list in class order (index =
    label), from one pass over its labels (every record read and checked)."""
    from .paths import os_bytes
    from . import _native
    return _native.class_counts(os_bytes(db), split)


def class_weights(db, split="train"):
    """Per-class weights for an imbalanced db, as `train --class-weights
    balanced` weighs its loss (scikit-learn's "balanced": samples / (classes
    with samples x the class's samples); 0 for a class without samples): a
    float32 tensor for torch.nn.CrossEntropyLoss(weight=...)."""
    import torch
    from .paths import os_bytes
    from . import _native
    return torch.tensor(_native.class_weights(os_bytes(db), split), dtype=torch.float32)


def native_available():
    """True if the C++ module is importable (Loader needs it; Dataset prefers it)."""
    try:
        from . import _native  # noqa: F401
    except ImportError:
        return False
    return True


def __getattr__(name):
    # Dataset and Loader import torch; `granary.reader` alone does not need it.
    if name in ("Dataset", "Loader"):
        return getattr(importlib.import_module(".data", __name__), name)
    if name == "pad_collate":
        return importlib.import_module(".collate", __name__).pad_collate
    if name == "load_image":
        return importlib.import_module(".images", __name__).load_image
    if name == "load_table":
        return importlib.import_module(".tables", __name__).load_table
    if name == "reader":
        return importlib.import_module(".reader", __name__)
    raise AttributeError(f"module 'granary' has no attribute '{name}'")
