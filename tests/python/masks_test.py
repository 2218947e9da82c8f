#!/usr/bin/python3
"""Segmentation and detection datasets as they are downloaded: prep refuses
them by name (instead of reading images/ and masks/ as two classes) and
points to the README's "Masks and boxes", whose two examples write them with
granary.write and read them back with granary.Dataset; the masks' classes
and the boxes come back as the files hold them, and granary.pad_collate
gives the boxes' counts in every batch.

    GRANARY_BUILD=build /usr/bin/python3 tests/python/masks_test.py
"""
import os
import re
import subprocess
import sys
import unittest

import numpy as np
import torch
from PIL import Image

from testenv import BUILD, PREP, ROOT, FolderTest, run  # noqa: F401 (puts the build's granary on sys.path)
import granary  # noqa: E402

SECTION = "### Masks and boxes: segmentation and detection datasets"


def readme_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        section = f.read().split(SECTION)[1].split("\n### ")[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


class MasksTest(FolderTest):
    def make_folders(self):
        """seg/<split>/{images,masks}: photographs of noise (JPEG) and masks of classes 0-2 (gray PNG, or a palette
        PNG as VOC's); det/<split>/{images,labels}: YOLO boxes, one or two an image, none for one image."""
        rng = np.random.default_rng(0)
        for split in ("train", "val"):
            for k in range(6):
                name = f"{split}_{k:03d}"
                folder = os.path.join(self.tmp, "seg", split)
                os.makedirs(os.path.join(folder, "images"), exist_ok=True)
                os.makedirs(os.path.join(folder, "masks"), exist_ok=True)
                Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(
                    os.path.join(folder, "images", name + ".jpg"))
                classes = np.zeros((48, 64), np.uint8)
                classes[10:30, 20:50] = 1 + k % 2
                mask = Image.fromarray(classes)
                if k % 2:  # VOC's masks are palette PNGs, whose pixels are the palette's indices
                    mask = mask.convert("P")
                    mask.putpalette([0, 0, 0, 128, 0, 0, 0, 128, 0] + [0] * 759)
                    mask.putdata(classes.flatten().tolist())
                mask.save(os.path.join(folder, "masks", name + ".png"))
        for split in ("train", "valid"):
            folder = os.path.join(self.tmp, "det", split)
            os.makedirs(os.path.join(folder, "images"))
            os.makedirs(os.path.join(folder, "labels"))
            for k in range(5):
                Image.fromarray(rng.integers(0, 256, (40, 40, 3), dtype=np.uint8)).save(
                    os.path.join(folder, "images", f"{k}.jpg"))
                lines = ["" if k == 4 else f"{k % 3} 0.5 0.5 0.25 0.125"] + (["1 0.1 0.2 0.05 0.05"] if k == 3 else [])
                with open(os.path.join(folder, "labels", f"{k}.txt"), "w") as f:
                    f.write("\n".join(lines) + "\n")

    def test_prep_names_them_and_the_readmes_examples_write_and_read_them(self):
        self.make_folders()
        for raw, said in (("seg", "a segmentation dataset: train/masks/ holds masks of the images in train/images/"),
                          ("det", "a detection dataset: train/labels/ holds YOLO boxes")):
            refused = subprocess.run([PREP, "build", self.path(raw), self.path(raw + ".db"), "--no-progress"],
                                     capture_output=True, text=True)
            self.assertEqual(refused.returncode, 1, refused.stderr)
            self.assertIn(said, refused.stderr)
            self.assertIn('granary.write (README, "Masks and boxes")', refused.stderr)
            self.assertFalse(os.path.exists(self.path(raw + ".db")))
        blocks = readme_blocks()
        self.assertEqual(len(blocks), 2)
        env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
        done = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=self.tmp, capture_output=True,
                              text=True, env=env)
        self.assertEqual(done.returncode, 0, done.stderr)

        seg = granary.Dataset(self.path("seg.db"), split="val")
        self.assertEqual(len(seg), 6)
        for k in range(6):  # each mask's classes, resized as the example resizes them: the indices of a palette PNG
            mask = Image.open(self.path(f"seg/val/masks/val_{k:03d}.png")).resize((128, 128), Image.NEAREST)
            self.assertEqual(seg[k]["mask"].shape, (1, 128, 128))
            self.assertTrue(np.array_equal(seg[k]["mask"][0].numpy(), np.asarray(mask)), k)
            self.assertEqual(sorted(np.unique(seg[k]["mask"].numpy()).tolist()), [0, 1 + k % 2])

        det = granary.Dataset(self.path("det.db"))
        expected = [[[0, 0.5, 0.5, 0.25, 0.125]], [[1, 0.5, 0.5, 0.25, 0.125]], [[2, 0.5, 0.5, 0.25, 0.125]],
                    [[0, 0.5, 0.5, 0.25, 0.125], [1, 0.1, 0.2, 0.05, 0.05]], []]
        for k, boxes in enumerate(expected):
            self.assertEqual(det[k]["boxes"].reshape(-1, 5).tolist(), torch.tensor(boxes).reshape(-1, 5).tolist(), k)
        collate = granary.pad_collate
        batches = [collate([det[k] for k in ks]) for ks in ([0, 1], [0, 3, 4])]
        self.assertEqual(batches[0]["boxes_length"].tolist(), [1, 1])  # the same count in each: said all the same
        self.assertEqual(batches[1]["boxes_length"].tolist(), [1, 2, 0])
        self.assertEqual(tuple(batches[1]["boxes"].shape), (3, 2, 5))

        for kwargs in ({}, {"input_field": "image", "target_field": "mask"}):
            with self.assertRaisesRegex(granary.InvalidArgumentError, r"granary\.Dataset in a DataLoader"):
                granary.Loader(self.path("seg.db"), batch_size=4, **kwargs)
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"as_tuple=True: the db has no label field to pair "
                                    r"an input with \(its fields: 'image', 'mask'\): name the two"):
            granary.Dataset(self.path("seg.db"), as_tuple=True)
        x, y = granary.Dataset(self.path("seg.db"), as_tuple=True, input_field="image", target_field="mask")[0]
        self.assertEqual((tuple(x.shape), tuple(y.shape)), ((128, 128, 3), (1, 128, 128)))

    def test_a_palette_mask_is_written_as_its_classes_not_its_colours(self):
        """torchvision's VOCSegmentation gives (image, mask), the mask a palette PNG opened as it is: its pixels are
        each one's class (the palette's index, 255 the border), which np.array(mask) gives a loss. Written as the
        colours it shows (as a palette image's pixels are written), class 5 was (128, 128, 0)."""
        classes = np.zeros((16, 20), np.uint8)
        classes[4:12, 5:15] = 5
        classes[4, 5:15] = 255
        palette = [0, 0, 0] * 5 + [128, 128, 0] + [0, 0, 0] * 249 + [224, 224, 192]

        def palette_image(pixels):
            image = Image.fromarray(pixels).convert("P")
            image.putpalette(palette)
            image.putdata(pixels.flatten().tolist())
            return image
        photo = Image.fromarray(np.full((16, 20, 3), 90, np.uint8))
        granary.write(self.path("voc.db"), [(photo, palette_image(classes))] * 4, progress=False)
        target = granary.Dataset(self.path("voc.db"))[0]["target"]
        self.assertEqual(tuple(target.shape), (1, 16, 20))
        np.testing.assert_array_equal(target[0].numpy(), classes)
        named = [{"image": palette_image(classes), "seg_mask": palette_image(classes)}] * 4
        granary.write(self.path("named.db"), named, progress=False)
        sample = granary.Dataset(self.path("named.db"))[0]
        np.testing.assert_array_equal(sample["seg_mask"][0].numpy(), classes)
        self.assertEqual(tuple(sample["image"].shape), (16, 20, 3))  # an image: the colours it shows, as before
        np.testing.assert_array_equal(sample["image"][5, 6].numpy(), [128, 128, 0])
        wider = palette_image(np.zeros((16, 24), np.uint8))
        with self.assertRaisesRegex(granary.InvalidArgumentError, r"field 'target' has shape \[1, 16, 24\], but the "
                                    r"db's is \[1, 16, 20\].*a field's masks share one size: resize each image and "
                                    r"its mask together .* nearest neighbours"):
            granary.write(self.path("sizes.db"), [(photo, palette_image(classes)), (photo, wider)], progress=False)

    def test_torchvisions_voc_segmentation_is_written_with_its_classes(self):
        """VOCSegmentation over a VOCdevkit/VOC2012 folder (images of several sizes, palette masks with 255 on the
        borders), resized by its transforms=: each mask's classes come back, in 2 worker processes too."""
        import torchvision
        root = self.path("VOCdevkit/VOC2012")
        for folder in ("JPEGImages", "SegmentationClass", "ImageSets/Segmentation"):
            os.makedirs(os.path.join(root, folder))
        rng, names, masks = np.random.default_rng(1), [], []
        for k in range(6):
            name, height, width = f"2008_{k:06d}", 30 + k, 40 + 2 * k
            names.append(name)
            Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(
                os.path.join(root, "JPEGImages", name + ".jpg"))
            classes = np.zeros((height, width), np.uint8)
            classes[5:15, 5:20] = 1 + k % 3
            classes[5, 5:20] = 255
            mask = Image.fromarray(classes).convert("P")
            mask.putpalette([v for i in range(256) for v in (i, 128, 0)])
            mask.putdata(classes.flatten().tolist())
            mask.save(os.path.join(root, "SegmentationClass", name + ".png"))
            masks.append(np.asarray(mask.resize((64, 64), Image.NEAREST)))
        with open(os.path.join(root, "ImageSets/Segmentation/train.txt"), "w") as f:
            f.write("\n".join(names) + "\n")

        def both(image, mask):
            return image.resize((64, 64)), mask.resize((64, 64), Image.NEAREST)
        voc = torchvision.datasets.VOCSegmentation(self.tmp, year="2012", image_set="train", transforms=both)
        hashes = [granary.write(self.path(f"voc{workers}.db"), voc, workers=workers, progress=False)["content_hash"]
                  for workers in (1, 2)]
        self.assertEqual(hashes[0], hashes[1])
        written = granary.Dataset(self.path("voc2.db"))
        for k in range(6):
            np.testing.assert_array_equal(written[k]["target"][0].numpy(), masks[k], err_msg=names[k])

    def test_torchvisions_detection_targets_are_told_how_to_be_boxes(self):
        """CocoDetection gives a list of dicts an image, VOCDetection its XML as a dict: neither is a field. The
        refusal says how to make them one float32 N x 5 array, and the README's section."""
        photo = Image.fromarray(np.zeros((16, 20, 3), np.uint8))
        coco = [{"bbox": [1.0, 2.0, 3.0, 4.0], "category_id": 3, "id": 7}]
        voc = {"annotation": {"object": [{"name": "cat", "bndbox": {"xmin": "1", "ymin": "2", "xmax": "5",
                                                                     "ymax": "9"}}]}}
        for target, source in ((coco, "CocoDetection's annotations"), (voc, "VOCDetection's XML")):
            with self.assertRaisesRegex(granary.InvalidArgumentError, rf"field 'target': is .*A detection dataset "
                                        rf"\({source}\): write each sample's boxes as one float32 array, np\.array\("
                                        r".*README, \"Masks and boxes\""):
                granary.write(self.path("det.db"), [(photo, target)] * 2, progress=False)
        boxes = np.array([a["bbox"] + [a["category_id"]] for a in coco], np.float32).reshape(-1, 5)  # as it says
        granary.write(self.path("det.db"), [(photo, boxes)] * 2, progress=False,
                      schema={"input": ("uint8", [16, 20, 3]), "target": ("float32", [-1, 5])})
        self.assertEqual(granary.Dataset(self.path("det.db"))[1]["target"].tolist(), [[1, 2, 3, 4, 3]])

    def test_the_layout_the_refusal_names_reads_them_as_classes_all_the_same(self):
        self.make_folders()
        refused = subprocess.run([PREP, "build", self.path("seg"), self.path("seg.db")], capture_output=True, text=True)
        self.assertIn("or give --layout splits to read its folders as classes all the same", refused.stderr)
        run(PREP, "build", self.path("seg"), self.path("seg.db"), "--layout", "splits", "--no-progress")
        self.assertEqual(granary.describe(self.path("seg.db"))["classes"], ["images", "masks"])


if __name__ == "__main__":
    unittest.main()
