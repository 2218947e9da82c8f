"""What a granary manifest says of its records beside them (docs/FORMAT.md:
element_names, statistics, class_counts), checked as the format says a
reader checks them: part of granary.reader, the reader written from the
spec alone."""
import math

import numpy as np

try:
    from .errors import CorruptionError
except ImportError:  # run as a script: python/granary/reader.py DB
    from errors import CorruptionError

MAX_STATISTICS_ELEMENTS = 4096  # FORMAT.md: statistics of a float field of at most this many elements


def _fixed_elements(field):
    """A field's elements per sample, or None for a field of variable shape."""
    return None if -1 in field["shape"] else int(np.prod(field["shape"], dtype=np.int64))


def _check_field_statistics(stats, where, count, elements):
    """One field's statistics as FORMAT.md describes them: `samples` the
    split's count, one value per element, a value exactly where one is
    present, finite, and a std that is not negative."""
    def counts(name):
        values = stats.get(name) if isinstance(stats, dict) else None
        if not isinstance(values, list) or len(values) != elements:
            raise CorruptionError(f"{where}: {name}: not an array of {elements} values")
        return values
    if not isinstance(stats, dict) or not isinstance(stats.get("samples"), int) or isinstance(stats["samples"], bool):
        raise CorruptionError(f"{where}: not an object with an integer 'samples'")
    if stats["samples"] != count:
        raise CorruptionError(f"{where}: samples {stats['samples']}, the split has {count}")
    missing = counts("missing")
    if not all(isinstance(m, int) and not isinstance(m, bool) and 0 <= m <= count for m in missing):
        raise CorruptionError(f"{where}: missing: not counts of at most the split's {count} samples")
    for name in ("mean", "std", "min", "max"):
        for i, v in enumerate(counts(name)):
            number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            if not ((number and (name != "std" or v >= 0)) if missing[i] < count else v is None):
                raise CorruptionError(f"{where}: {name}[{i}] is not what {count - missing[i]} present values can have")


def check_described(manifest, where):
    """The manifest's optional members that describe the records, refused
    where they lie as FORMAT.md says a reader refuses them: element_names
    (one name per element of a field of fixed shape), statistics (of a
    float field of fixed shape with at most 4,096 elements, per split) and
    class_counts (one count per class, summing to the split's count)."""
    fields = {f["name"]: f for f in manifest["schema"]["fields"]}
    counts = {s["name"]: s["count"] for s in manifest["splits"]}
    for name, names in _member(manifest, "element_names", where).items():
        elements = None if name not in fields else _fixed_elements(fields[name])
        if elements is None:
            raise CorruptionError(f"{where}: element_names.{name}: not a field of fixed shape")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CorruptionError(f"{where}: element_names.{name}: not an array of strings")
        if len(names) != elements:
            raise CorruptionError(f"{where}: element_names.{name}: {len(names)} names for {elements} elements")
    for split, of_split in _member(manifest, "statistics", where).items():
        if split not in counts or not isinstance(of_split, dict):
            raise CorruptionError(f"{where}: statistics.{split}: no such split, or not an object")
        for name, stats in of_split.items():
            field = fields.get(name)
            elements = None if field is None else _fixed_elements(field)
            if elements is None or field["dtype"] not in ("float32", "float64") or elements > MAX_STATISTICS_ELEMENTS:
                raise CorruptionError(f"{where}: statistics.{split}.{name}: not a field that has statistics")
            _check_field_statistics(stats, f"{where}: statistics.{split}.{name}", counts[split], elements)
    classes = manifest["num_classes"]
    for split, of_split in _member(manifest, "class_counts", where).items():
        if split not in counts:
            raise CorruptionError(f"{where}: class_counts.{split}: no such split")
        if (not isinstance(of_split, list) or len(of_split) != classes or
                not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in of_split) or
                sum(of_split) != counts[split]):
            raise CorruptionError(f"{where}: class_counts.{split}: not one count for each of the db's {classes} "
                                  f"classes summing to the split's {counts[split]} samples")


def _member(manifest, name, where):
    """An optional object member of the manifest ({} where absent)."""
    value = manifest.get(name, {})
    if not isinstance(value, dict):
        raise CorruptionError(f"{where}: {name}: not an object")
    return value
