"""What granary.write says of samples that are likely not what their user
meant, at the first sample (or, for the classes, at the end), before hours
of writing make a db train cannot use or that is larger than it need be:
random augmentations written once, ToTensor() floats and float64 where
pixels and float32 do, a label as a vector, image files' bytes, arrays
shaped like images that train would not read as images, classes no sample
has or far from balanced, and tables that iterate as something else
(refused)."""
import warnings

import numpy as np

from .errors import InvalidArgumentError
from .samples import _IMAGE_CHANNELS, _LABEL_NAMES, TEXT_LAYOUT, _as_array, _named_values

_RANDOM_TRANSFORMS = ("ColorJitter", "AutoAugment", "RandAugment", "TrivialAugmentWide", "AugMix", "ElasticTransform")


def _classes_without_samples(labels, num_classes):
    """What a db's labels leave out of its classes 0..num_classes-1 (which
    the model train makes has as outputs), as a note; "" where every class
    has a sample, or the labels seen are not known."""
    if labels is None or len(labels) == num_classes:
        return ""
    if labels == set(range(1, num_classes)):
        run = f"labels run 1..{num_classes - 1}" if num_classes > 2 else "every label is 1"
        return (f"{run}, so class 0 has no sample (labels counted from 1? write label - 1, or name the classes "
                f"with classes=)")
    missing = sorted(set(range(num_classes)) - labels)
    shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
    return (f"{len(labels)} distinct labels among 0..{num_classes - 1}: {len(missing)} of the {num_classes} classes "
            f"have no sample ({shown}); write the labels as 0..{len(labels) - 1} (np.unique(labels, "
            f"return_inverse=True) gives them), or name the classes with classes=")


_IMBALANCED = 10  # the largest class this many times the smallest: accuracy alone flatters a model


def _imbalance_note(counts, classes):
    """Where a db's classes are far from balanced (its largest class at least
    _IMBALANCED times its smallest), that accuracy alone will flatter a model
    that answers the largest, and what train and a loop of one's own do about
    it; "" otherwise, or where the counts are not known (None, or a count of
    0: a class a resumed write's older journal named without its samples)."""
    if counts is None or 0 in counts.values():
        return ""
    present = counts
    if len(present) < 2 or max(present.values()) < _IMBALANCED * min(present.values()):
        return ""
    total = sum(present.values())
    ranked = sorted(present.items(), key=lambda item: -item[1])
    shown = ranked if len(ranked) <= 6 else ranked[:3] + ranked[-3:]
    named = ", ".join(f"'{classes[c] if c < len(classes) else c}' {100 * n / total:.1f}%" for c, n in shown)
    largest = classes[ranked[0][0]] if ranked[0][0] < len(classes) else ranked[0][0]
    return (f"the classes are imbalanced ({named}{', ...' if len(ranked) > 6 else ''} of the samples): a model "
            f"that always answers '{largest}' scores {100 * ranked[0][1] / total:.1f}% accuracy. train reports "
            f"the balanced accuracy beside it, and --class-weights balanced weighs the loss by the classes' rarity "
            f"(in a loop of your own: nn.CrossEntropyLoss(weight=granary.class_weights(db)))")


def _random_transforms(dataset):
    """The random augmentations in a dataset's transforms (torchvision's
    Random* classes and the other transforms that draw, inside Compose,
    RandomApply or nn.Sequential; a Subset's dataset's too), in order."""
    found = []

    def walk(transform, depth):
        if transform is None or depth > 16:
            return
        name = type(transform).__name__
        if (name.startswith("Random") or name in _RANDOM_TRANSFORMS) and name not in found:
            found.append(name)
        children = getattr(transform, "transforms", None)
        if children is None and hasattr(transform, "children") and callable(transform.children):
            children = list(transform.children())  # nn.Sequential, or a module of transforms
        if isinstance(children, (list, tuple)):
            for child in children:
                walk(child, depth + 1)

    for _ in range(16):  # Subset(Subset(ImageFolder)) ...
        for attribute in ("transform", "target_transform"):
            walk(getattr(dataset, attribute, None), 0)
        dataset = getattr(dataset, "dataset", None)
        if dataset is None:
            break
    return found


def _warn_of_random_transforms(dataset, split):
    """A transform that draws at random is drawn once when a db is written,
    and every epoch then reads that one draw: worth a warning, as it is
    rarely what a training script that augmented each epoch meant."""
    found = _random_transforms(dataset)
    if found:
        warnings.warn(f"granary.write: split '{split}': the dataset's transform draws at random ({', '.join(found)}); "
                      f"the db stores one draw per sample, which every epoch then reads. Write the samples without "
                      f"their augmentation (e.g. transforms.Resize((H, W))) and augment as they are read "
                      f"(granary.Loader(augment='crop,flip'), or granary.Dataset(transform=...))", stacklevel=3)


def _warn_of_float_pixels(sample, fields, split):
    """Float C x H x W images whose values are all k/255 in [0, 1] are
    ToTensor() of uint8 pixels: stored as float32 they take 4x the bytes of
    the pixels, which granary.Loader would scale to [0, 1] itself."""
    for field, (_, value) in zip(fields, _named_values(sample, 0, split)):
        if field.layout != "CHW" or field.dtype.kind != "f":
            continue
        array = _as_array(value)[0].astype(np.float64)
        if array.size and array.min() >= 0 and array.max() <= 1 and np.allclose(array * 255, np.round(array * 255),
                                                                                   atol=1e-3):
            warnings.warn(f"granary.write: split '{split}': field '{field.name}' holds {field.dtype.name} images "
                          f"of values k/255 (ToTensor() of 8-bit pixels): stored as they are, 4x the bytes of the "
                          f"pixels. Write the uint8 pixels instead (no ToTensor(): a PIL image or a uint8 array); "
                          f"granary.Loader and train scale them to [0, 1] as they read", stacklevel=4)


def _unread_image_fix(field):
    """How to write a field shaped like an image that train and
    granary.Loader would not read as one, or None: floats channels last
    (albumentations without ToTensorV2, img / 255.0), which they read
    channels first, or an image with a batch dim of one left on it."""
    shape, kind = field.shape, field.dtype.kind
    if field.layout or field.variable or not shape or kind not in "iuf":
        return None
    if len(shape) == 3 and kind == "f" and shape[2] in _IMAGE_CHANNELS and min(shape[:2]) >= 4:
        return (f"{field.dtype.name} images channels last (H x W x C), while train and granary.Loader read a float "
                f"image channels first (C x H x W); write x.transpose(2, 0, 1) (a tensor: x.permute(2, 0, 1); "
                f"albumentations: ToTensorV2()), or the uint8 pixels, which may be H x W x C")
    image = len(shape) == 4 and (shape[1] in _IMAGE_CHANNELS or shape[3] in _IMAGE_CHANNELS)
    if image and shape[0] == 1 and sum(d >= 4 for d in shape[1:]) >= 2:
        return f"{list(shape)}, an image with a batch dim of one (unsqueeze(0) left on?); write x[0]"
    return None


def _warn_of_unread_images(fields, split, stacklevel):
    """Said at the first sample of a field _unread_image_fix finds, before
    a db is written that train would refuse at its first run."""
    for field in fields:
        fix = _unread_image_fix(field)
        if fix:
            warnings.warn(f"granary.write: split '{split}': field '{field.name}' holds {fix}. As written, train "
                          f"and granary.Loader do not read it as an image", stacklevel=stacklevel)


def _warn_of_float64(fields, split):
    """float64 fields (NumPy's and scikit-learn's default) are stored as they
    are, 8 bytes a value, where train and granary.Loader compute in float32."""
    wide = [f.name for f in fields if f.dtype == np.float64 and f.origin != "schema="]  # schema= said so
    if wide:
        names = ", ".join(f"'{name}'" for name in wide)
        warnings.warn(f"granary.write: split '{split}': field(s) {names} hold float64 values (NumPy's default): "
                      f"stored as they are, twice float32's bytes, while train and granary.Loader compute in "
                      f"float32; .astype(np.float32) halves them (or schema= with 'float32')", stacklevel=4)


def _warn_of_vector_label(fields, sample, split, label_name, stacklevel):
    """A label given as a vector where train and granary.Loader read a
    scalar (a class's index, or a value): a one-hot vector (Keras's habit),
    several classes at once, a box. The db keeps it (granary.Dataset reads
    every field), but has no label for them: said at the first sample, not
    at the first training run."""
    if label_name is not None:
        return
    for field, (_, value) in zip(fields, _named_values(sample, 0, split)):
        if field.name not in _LABEL_NAMES or field.variable or not field.shape or field.dtype.kind not in "iuf":
            continue
        array = _as_array(value)[0]
        one_hot = array.ndim == 1 and array.size > 1 and np.count_nonzero(array) == 1 and array.max() == 1
        what = f"a one-hot vector (of class {int(array.argmax())})" if one_hot else "not a scalar"
        fix = ("write its class as an int (int(y.argmax())) to train on it" if one_hot else
               "train and granary.Loader train on one class or one value a sample")
        warnings.warn(f"granary.write: split '{split}': field '{field.name}' is {field.describe()}, {what}: the db "
                      f"will have no label for train and granary.Loader (granary.Dataset reads every field); "
                      f"{fix}", stacklevel=stacklevel)
        return


def _integer_values_note(field, values):
    """A float label whose every value is one of a few integers (0.0 and 1.0
    for a BCE loss, a class id as a float): written as a number to predict,
    which train fits by its squared error, where classes may have been meant."""
    shown = ", ".join(f"{v:g}" for v in sorted(values)[:8]) + (", ..." if len(values) > 8 else "")
    return (f"label '{field.name}' is {field.dtype.name}, so it was written as a number to predict (regression: "
            f"train fits it by its squared error), but its values are {len(values)} integers ({shown}); if they "
            f"are classes, write them as ints (int(y), y.long()) and train classifies them")


_IMAGE_FILES = ((b"\xff\xd8\xff", "JPEG"), (b"\x89PNG\r\n\x1a\n", "PNG"), (b"RIFF", "WebP"))


def _warn_of_encoded_images(fields, sample, split, stacklevel):
    """Image files' bytes (a web dataset's .jpg, a Parquet column of PNGs)
    are stored as they are: bytes of any length, which train and
    granary.Loader, reading pixels of one shape, cannot batch. Said at the
    first sample, with how to write pixels instead."""
    for field, (_, value) in zip(fields, _named_values(sample, 0, split)):
        if field.shape is not None or field.layout == TEXT_LAYOUT:
            continue
        head = bytes(_as_array(value)[0][:12])
        kind = next((name for magic, name in _IMAGE_FILES if head.startswith(magic)), None)
        if kind == "WebP" and head[8:12] != b"WEBP":
            kind = None
        if kind:
            warnings.warn(f"granary.write: split '{split}': field '{field.name}' holds {kind} files' bytes: stored "
                          f"as they are, which train and granary.Loader (they read pixels of one shape) cannot "
                          f"batch. Decode and resize them in the dataset (PIL.Image.open(io.BytesIO(b))"
                          f".convert('RGB').resize((S, S))), or save them into class folders for `prep build "
                          f"--size S`, which decodes and resizes", stacklevel=stacklevel)


def _are_columns(values):
    """Whether `values` are arrays (numpy or torch) with as many rows each
    but not one shape: the columns of a table, not samples alike."""
    arrays = all(isinstance(v, np.ndarray) or type(v).__name__ == "Tensor" for v in values)
    if not arrays or any(v.ndim == 0 for v in values):
        return False
    return len({len(v) for v in values}) == 1 and len({tuple(v.shape) for v in values}) > 1


def _refuse_tables(samples, splits):
    """Two shapes of tabular data that iterate as something else: a pandas
    DataFrame gives its column names, and a dict of equally long arrays
    ({"features": X, "label": y}) would be read as splits named by its keys.
    A tuple of such arrays ((X, y), as TensorDataset takes them) would be
    read as that many samples. All refused, saying how their rows are
    written."""
    rows = "[{'features': x, 'label': y} for x, y in zip(X, y)]"
    for name, dataset in splits.items():
        if isinstance(dataset, (tuple, list)) and 2 <= len(dataset) <= 8 and _are_columns(dataset):
            shapes = ", ".join(str(list(c.shape)) for c in dataset)
            raise InvalidArgumentError(
                f"split '{name}' is a {type(dataset).__name__} of {len(dataset)} arrays of {len(dataset[0])} rows "
                f"(shapes {shapes}): columns, which would be read as {len(dataset)} samples; write their rows: "
                f"zip(X, y) (list(zip(X, y)) for val_fraction or workers), or torch's TensorDataset(X, y)")
        if type(dataset).__module__.split(".")[0] == "pandas" and hasattr(dataset, "columns"):
            raise InvalidArgumentError(
                f"split '{name}' is a pandas DataFrame, which iterates over its column names, not its rows: write "
                f"it as a CSV table for prep (df.to_csv('t.csv', index=False), then prep build t.csv db: text "
                f"columns one-hot encoded, statistics recorded), or give its rows as samples: "
                f"X = df[feature_columns].to_numpy(np.float32), y = df['label'].to_numpy(), then {rows}")
    if not isinstance(samples, dict) or len(samples) < 2:
        return
    splits_named = {"train", "val", "validation", "test"}
    lengths = {len(v) if isinstance(v, np.ndarray) or type(v).__name__ == "Tensor" else None for v in samples.values()}
    if None not in lengths and len(lengths) == 1 and not set(samples) <= splits_named:
        raise InvalidArgumentError(
            f"samples is a dict of {len(samples)} arrays of {lengths.pop()} rows ({', '.join(map(repr, samples))}): "
            f"a dict's keys name splits ({{'train': samples, 'test': ...}}); columns are written as samples: {rows}")

