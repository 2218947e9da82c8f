"""Round 21 of the hostile drill (twenty-ninth session): segmentation and
detection datasets as they are downloaded (Kvasir-SEG's images/ beside
masks/, Carvana's train_masks/, Ultralytics' and Roboflow's YOLO layouts,
COCO's annotation file, Pascal VOC), each once built as classes "images" and
"masks" without a word; classification folders that only look like them
(faces in mask/ and no_mask/, captions beside images); and the README's way
for them: granary.write, granary.Dataset and granary.pad_collate."""
import glob
import json
import os
import shutil

from drill_cases.common import PREP, PYTHON, TRAIN, granary_script, run

PHOTOS = "/usr/share/backgrounds/mate/nature/*.jpg"


def tiles(count):
    """`count` 96 x 64 crops of Debian's wallpaper photographs, as PIL images."""
    from PIL import Image
    out = []
    for path in sorted(glob.glob(PHOTOS)):
        with Image.open(path) as photo:
            small = photo.convert("RGB").resize((480, 320))
        for k in range(25):
            out.append(small.crop((96 * (k % 5), 64 * (k // 5), 96 * (k % 5 + 1), 64 * (k // 5 + 1))))
            if len(out) == count:
                return out
    return out


def mask_of(photo):
    """A mask of two classes: the pixels brighter than the photograph's middle."""
    gray = photo.convert("L")
    middle = sorted(gray.getdata())[gray.width * gray.height // 2]
    return gray.point(lambda v: 1 if v > middle else 0)


def folder(root, files):
    """Makes `root` with `files`: {relative path: a PIL image or text}."""
    shutil.rmtree(root, ignore_errors=True)
    for name, content in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(content, str):
            with open(path, "w") as f:
                f.write(content)
        else:
            content.save(path)
    return root


def classes_of(db):
    _, out, _, _, _ = run([PREP, "info", db, "--json"])
    return json.loads(out)["class_names"]


def round21(d, w):
    """Round 21's cases."""
    photos = tiles(12)
    kvasir = folder(w("r21kvasir"), {**{f"images/cju{k:03d}.jpg": p for k, p in enumerate(photos)},
                                     **{f"masks/cju{k:03d}.png": mask_of(p) for k, p in enumerate(photos)}})
    d.case("prep build of Kvasir-SEG (images/ beside masks/ of the same names): a segmentation dataset, named (was: "
           "two classes, images and masks)", [PREP, "build", kvasir, w("r21kvasir.db"), "--no-progress"], 1,
           needle="a segmentation dataset: masks/ holds masks of the images in images/ (12 of its 12 by name",
           check=lambda: "" if not os.path.exists(w("r21kvasir.db")) else "a db was made")
    d.case("... --layout classes, as the refusal says: read as two classes all the same",
           [PREP, "build", kvasir, w("r21kvasir.db"), "--layout", "classes", "--no-progress"], 0,
           check=lambda: "" if classes_of(w("r21kvasir.db")) == ["images", "masks"] else "not images, masks")
    carvana = folder(w("r21carvana"), {**{f"train/car{k}_01.jpg": p for k, p in enumerate(photos[:6])},
                                       **{f"train_masks/car{k}_01_mask.gif": mask_of(p).convert("P")
                                          for k, p in enumerate(photos[:6])},
                                       **{f"test/car{k + 6}_01.jpg": p for k, p in enumerate(photos[6:])}})
    d.case("prep build of Carvana (train/ beside train_masks/x_01_mask.gif, a test/ without masks): named (was: "
           "classes test, train, train_masks)", [PREP, "build", carvana, w("r21carvana.db"), "--no-progress"], 1,
           needle="train_masks/ holds masks of the images in train/")
    yolo = {}
    for split, part in (("train", photos[:8]), ("val", photos[8:])):
        for k, p in enumerate(part):
            yolo[f"images/{split}/{k}.jpg"] = p
            yolo[f"labels/{split}/{k}.txt"] = "" if k == 0 else f"{k % 3} 0.5 0.5 0.25 0.3\n"
    d.case("prep build of a YOLO dataset as Ultralytics lays it out (images/train, labels/train): named",
           [PREP, "build", folder(w("r21yolo"), yolo), w("r21yolo.db"), "--no-progress"], 1,
           needle="a detection dataset: labels/ holds YOLO boxes (a .txt file an image)")
    coco = {f"{s}/{k}.jpg": p for s in ("train", "valid") for k, p in enumerate(photos[:4])}
    for s in ("train", "valid"):
        coco[f"{s}/_annotations.coco.json"] = json.dumps({"info": {}, "categories": [{"id": 0, "name": "rock"}],
                                                          "images": [{"id": k, "file_name": f"{k}.jpg"}
                                                                     for k in range(4)], "annotations": []})
    d.case("prep build of Roboflow's COCO export (train/_annotations.coco.json beside the images): named (was: one "
           "class, train)", [PREP, "build", folder(w("r21coco"), coco), w("r21coco.db"), "--no-progress"], 1,
           needle="train/_annotations.coco.json is a COCO annotation file")
    voc = {f"VOC2012/JPEGImages/2008_{k:06d}.jpg": p for k, p in enumerate(photos[:4])}
    voc.update({f"VOC2012/SegmentationClass/2008_{k:06d}.png": mask_of(p).convert("P")
                for k, p in enumerate(photos[:4])})
    d.case("prep build of Pascal VOC: named (was: told to build VOC2012/, JPEGImages/ and SegmentationClass/ its "
           "classes)", [PREP, "build", folder(w("r21voc"), voc), w("r21voc.db"), "--no-progress"], 1,
           needle="VOC2012/SegmentationClass/ holds masks of the images in VOC2012/JPEGImages/")
    faces = folder(w("r21faces"), {f"{c}/{k}.jpg": p for c in ("mask", "no_mask") for k, p in enumerate(photos[:5])})
    d.case("prep build of a face-mask classifier's folder (mask/ and no_mask/, each 0.jpg ...): two classes, as before",
           [PREP, "build", faces, w("r21faces.db"), "--no-progress"], 0,
           check=lambda: "" if classes_of(w("r21faces.db")) == ["mask", "no_mask"] else "not mask, no_mask")
    captioned = {f"{c}/{k}.jpg": p for c in ("forest", "lake") for k, p in enumerate(photos[:4])}
    captioned.update({f"{c}/{k}.txt": f"a photograph of a {c}\n" for c in ("forest", "lake") for k in range(4)})
    d.case("prep build of class folders with a caption .txt beside each image: two classes, as before",
           [PREP, "build", folder(w("r21captions"), captioned), w("r21captions.db"), "--no-progress"], 0,
           check=lambda: "" if classes_of(w("r21captions.db")) == ["forest", "lake"] else "not forest, lake")
    write = granary_script(w, "r21write.py", """
        from pathlib import Path
        from PIL import Image
        root = Path(sys.argv[1])
        def pairs():
            for p in sorted(root.glob("images/*.jpg")):
                mask = Image.open(root / "masks" / (p.stem + ".png"))
                yield {"image": np.asarray(Image.open(p).convert("RGB").resize((64, 64))),
                       "mask": np.asarray(mask.resize((64, 64), Image.NEAREST))}
        granary.write(sys.argv[2], pairs(), progress=False)
        print("classes in the masks:", sorted(np.unique(granary.Dataset(sys.argv[2])[0]["mask"].numpy()).tolist()))
    """)
    d.case("granary.write of Kvasir's images and masks, as the README's \"Masks and boxes\" writes them",
           [PYTHON, write, kvasir, w("r21seg.db")], 0)
    d.case("... train --db of it: refused, naming granary.Dataset for masks",
           [TRAIN, "--db", w("r21seg.db"), "--ranks", "1"], 1,
           needle="images with masks or boxes are read with granary.Dataset in a DataLoader")
    boxes = granary_script(w, "r21boxes.py", """
        import torch
        from pathlib import Path
        from PIL import Image
        root = Path(sys.argv[1])
        def samples(split):
            for p in sorted(root.glob(f"images/{split}/*.jpg")):
                lines = (root / "labels" / split / (p.stem + ".txt")).read_text().split("\\n")
                b = np.array([line.split() for line in lines if line.strip()], np.float32).reshape(-1, 5)
                yield {"image": np.asarray(Image.open(p).convert("RGB").resize((64, 64))), "boxes": b}
        granary.write(sys.argv[2], {"train": samples("train"), "val": samples("val")}, progress=False,
                      schema={"image": ("uint8", [64, 64, 3]), "boxes": ("float32", [-1, 5])})
        loader = torch.utils.data.DataLoader(granary.Dataset(sys.argv[2]), batch_size=2, num_workers=2,
                                             collate_fn=granary.pad_collate)
        counts = [b["boxes_length"].tolist() for b in loader]  # [0, 1], then batches of one box each
        sys.exit(0 if counts == [[0, 1], [1, 1], [1, 1], [1, 1]] else f"boxes_length {counts}")
    """)
    d.case("granary.write of the YOLO dataset's boxes (schema -1), read through pad_collate: each image's count in "
           "every batch (was: only where a batch's counts differ)", [PYTHON, boxes, w("r21yolo"), w("r21det.db")], 0)
    kaggle = {f"train_images/{k:04d}.jpg": p for k, p in enumerate(photos[:6])}
    kaggle["train.csv"] = "ImageId,ClassId,EncodedPixels\n" + "".join(
        f"{k:04d}.jpg,{1 + k % 4},{29102 + 7 * k} 12 31125 38\n" for k in range(6))
    folder(w("r21severstal"), kaggle)
    d.case("prep build --labels of Kaggle's train.csv of run-length encoded masks (ImageId,ClassId,EncodedPixels): "
           "a segmentation dataset, named (was: a class a mask)",
           [PREP, "build", w("r21severstal", "train_images"), w("r21rle.db"), "--labels",
            w("r21severstal", "train.csv"), "--label", "EncodedPixels", "--no-progress"], 1,
           needle="column 'EncodedPixels' holds run-length encoded masks")
    d.case("prep build of that train.csv as a table: its column of image names named, with the --labels build",
           [PREP, "build", w("r21severstal", "train.csv"), w("r21rle.db"), "--label", "ClassId", "--no-progress"], 1,
           needle="column 'ImageId' names the images in " + w("r21severstal", "train_images") + "/")
    boxes_csv = "filename,width,height,class,xmin,ymin,xmax,ymax\n" + "".join(
        f"{k:04d}.jpg,96,64,{'rock' if k % 2 else 'tree'},{4 * j},{2 * j},{40 + j},{30 + j}\n"
        for k in range(6) for j in range(1 + k % 2))
    folder(w("r21tfcsv"), {**{f"train/{k:04d}.jpg": p for k, p in enumerate(photos[:6])},
                           "train/_annotations.csv": boxes_csv})
    d.case("prep build of Roboflow's TensorFlow CSV export (train/_annotations.csv of boxes beside the images): named",
           [PREP, "build", w("r21tfcsv"), w("r21tfcsv.db"), "--no-progress"], 1,
           needle="train/_annotations.csv is a table of boxes (its columns 'xmin', 'ymin', 'xmax', 'ymax')")
    d.case("prep build --labels of that table: a detection table (an image a row a box; was: read once, silently)",
           [PREP, "build", w("r21tfcsv", "train"), w("r21tfcsv.db"), "--labels",
            w("r21tfcsv", "train", "_annotations.csv"), "--no-progress"], 1, needle="a detection table")
