"""What a db's manifest says of it to a granary.Dataset and a Loader: its
class and element names, an image field's layout, its text fields and the
fields whose length varies."""
import os

from . import errors


def manifest(path):
    """The manifest of the db at `path`, its names decoded (granary.reader)."""
    from . import reader
    return reader.decode_names(reader.read_manifest(os.path.join(path, "manifest.json")))


def names(path, manifest):
    """(classes, class_to_idx, element_names) of the db at `path` from its
    `manifest`: its class names in label order and their indices, as
    torchvision's ImageFolder gives them, and its fields' element names (a
    CSV table's features: its columns)."""
    where = os.path.join(path, "manifest.json")
    classes, elements = manifest.get("class_names", []), manifest.get("element_names", {})
    if not (isinstance(classes, list) and all(isinstance(c, str) for c in classes)):
        raise errors.CorruptionError(f"{where}: class_names: not an array of strings")
    if not (isinstance(elements, dict) and all(isinstance(v, list) and all(isinstance(n, str) for n in v)
                                               for v in elements.values())):
        raise errors.CorruptionError(f"{where}: element_names: not an object of arrays of strings")
    return list(classes), {name: i for i, name in enumerate(classes)}, dict(elements)


def image_layout(manifest, field):
    """"HWC" or "CHW" where `field` of the db's `manifest` is a uint8 image of
    1, 3 or 4 channels (what a PIL image holds); "" otherwise."""
    for f in manifest.get("schema", {}).get("fields", []):
        if f.get("name") != field or f.get("dtype") != "uint8" or len(f.get("shape") or []) != 3:
            continue
        layout, shape = f.get("layout", ""), f["shape"]
        channels = shape[2] if layout == "HWC" else shape[0] if layout == "CHW" else 0
        return layout if channels in (1, 3, 4) else ""
    return ""


def text_fields(manifest):
    """Names of the db's text fields (layout "utf-8": a str written by
    granary.write), which a Dataset gives back as str."""
    return {f.get("name") for f in manifest.get("schema", {}).get("fields", []) if f.get("layout") == "utf-8"}


def varying_fields(manifest):
    """The db's fields that vary in length (not text, which is a str): each
    one's dims of -1 in its schema."""
    fields = manifest.get("schema", {}).get("fields", [])
    return {f["name"]: [d for d, n in enumerate(f.get("shape") or []) if n == -1] for f in fields
            if -1 in (f.get("shape") or []) and f.get("layout") != "utf-8"}
