"""granary.load_image: an image file as a model `train --save`d takes it,
for predictions on new images (python/granary/__init__.py exports it)."""
import numpy as np
import torch

from .errors import FormatError, InvalidArgumentError
from .paths import os_str


def load_image(image, model):
    """The image file `image` (a path, or a binary file object) as the input
    of `model` (a file `train --save` wrote, or granary.model_info's dict of
    one): decoded (JPEG, PNG or WebP; EXIF orientation applied), its short
    side resized and centre-cropped to the model's input size as `prep build`
    stores an image folder's images (the same resampling, so predictions see
    what training saw), then scaled and normalised as `train` fed it: a
    float32 C x H x W tensor; model(x[None]) gives its logits.
    InvalidArgumentError for a file that is no image prep decodes, or a model
    that takes features or images written from Python (whose transform only
    the user knows); FormatError for a file without granary's model card."""
    from . import _native, model_info
    info = model if isinstance(model, dict) else model_info(model)
    if info is None:
        raise FormatError(f"{os_str(model, 'model')}: no granary.json in it (saved from Python, not by train "
                          f"--save): load_image does not know its input")
    shape = info.get("input_shape") or []
    if len(shape) != 3 or shape[0] not in (1, 3):
        raise InvalidArgumentError(f"load_image: the model takes {list(shape)} ({info.get('input_field')}), not a "
                                   f"gray or RGB image (C x H x W)")
    if abs(info.get("input_scale", 0) - 1 / 255) > 1e-9:
        raise InvalidArgumentError(f"load_image: the model was trained on float images ({info.get('input_field')}, "
                                   f"written from Python): apply the transform they were written with")
    channels, height, width = shape
    if hasattr(image, "read"):
        data = image.read()
    else:
        with open(os_str(image, "image"), "rb") as f:
            data = f.read()
    try:
        pixels = _native.decode_image(bytes(data), width, height, channels)
    except InvalidArgumentError as e:
        name = getattr(image, "name", None) if hasattr(image, "read") else os_str(image, "image")
        raise InvalidArgumentError(f"{name}: {e}") from None
    x = torch.from_numpy(np.ascontiguousarray(pixels)).permute(2, 0, 1).float() * info["input_scale"]
    mean = torch.tensor(info["mean"], dtype=torch.float32).reshape(-1, 1, 1)
    std = torch.tensor(info["std"], dtype=torch.float32).reshape(-1, 1, 1)
    return (x - mean) / std
