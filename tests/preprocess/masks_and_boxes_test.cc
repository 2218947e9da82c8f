// Segmentation and detection datasets as they are downloaded (images/ beside
// masks/, Carvana, Cityscapes, VOC, YOLO, COCO): read as class folders they
// would be a classifier of photographs against their masks. Refused, saying
// what they are; --layout builds them as classes all the same. Classification
// folders that look alike (classes named mask/ and no_mask/, numbered files
// in each class, captions beside images) still build.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "preprocess/png.h"
#include "preprocess/source.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// A 4x4 gray PNG at `path` (its folders made).
void WriteImage(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const std::vector<uint8_t> pixels(16, 90);
  ASSERT_TRUE(WritePng(path, pixels.data(), 4, 4, 1).ok()) << path;
}

void WriteText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  testing::WriteFile(path, text);
}

StatusOr<Source> Open(const std::string& raw, const std::string& layout = "auto") {
  RawOptions options;
  options.raw = raw;
  options.size = "4";
  options.layout = layout;
  return OpenSource(options);
}

// The refusal of `raw` says `said`, that prep builds classification dbs, and
// the way out; --layout `layout` builds it as classes.
void ExpectRefused(const std::string& raw, const std::string& said, const std::string& layout = "classes") {
  auto refused = Open(raw);
  ASSERT_FALSE(refused.ok()) << raw;
  const std::string message = refused.status().message();
  EXPECT_EQ(message.find(raw + ": " + said), 0u) << message;
  EXPECT_NE(message.find("prep builds image classification dbs"), std::string::npos) << message;
  EXPECT_NE(message.find("granary.write (README, \"Masks and boxes\"), or give --layout " + layout), std::string::npos)
      << message;
  auto built = Open(raw, layout);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
}

TEST(MasksAndBoxes, ImagesBesideMasksOfTheirNamesAreASegmentationDataset) {
  TempDir dir;
  for (int i = 0; i < 3; ++i) {
    WriteImage(dir.Sub("kvasir/images/") + std::to_string(i) + ".png");
    WriteImage(dir.Sub("kvasir/masks/") + std::to_string(i) + ".png");
  }
  ExpectRefused(dir.Sub("kvasir"), "a segmentation dataset: masks/ holds masks of the images in images/ (3 of its 3 "
                                   "by name: masks/0.png of images/0.png)");
}

// Carvana: train/x_01.jpg beside train_masks/x_01_mask.gif, which prep does not decode; a test/ without masks.
TEST(MasksAndBoxes, CarvanasMasksAreNamedByTheirImagesAndASuffix) {
  TempDir dir;
  for (const char* car : {"0cdf5b5d0ce1_01", "0cdf5b5d0ce1_02"}) {
    WriteImage(dir.Sub("carvana/train/") + car + ".png");
    WriteText(dir.Sub("carvana/train_masks/") + car + "_mask.gif", "GIF89a");
    WriteImage(dir.Sub("carvana/test/") + car + "9.png");
  }
  ExpectRefused(dir.Sub("carvana"), "a segmentation dataset: train_masks/ holds masks of the images in train/ (2 of "
                                    "its 2 by name: train_masks/0cdf5b5d0ce1_01_mask.gif of "
                                    "train/0cdf5b5d0ce1_01.png)");
}

// Cityscapes: leftImg8bit/<split>/<city>/X_leftImg8bit.png and gtFine/<split>/<city>/X_gtFine_labelIds.png.
TEST(MasksAndBoxes, CityscapesMasksMirrorTheImagesFolders) {
  TempDir dir;
  for (const char* city : {"aachen", "bonn"}) {
    const std::string name = std::string(city) + "_000000_000019";
    WriteImage(dir.Sub("city/leftImg8bit/train/") + city + "/" + name + "_leftImg8bit.png");
    WriteImage(dir.Sub("city/gtFine/train/") + city + "/" + name + "_gtFine_labelIds.png");
  }
  ExpectRefused(dir.Sub("city"), "a segmentation dataset: gtFine/ holds masks of the images in "
                                 "leftImg8bit/train/aachen/ (2 of its 2 by name: gtFine/train/aachen/aachen_000000_"
                                 "000019_gtFine_labelIds.png of leftImg8bit/train/aachen/aachen_000000_000019_"
                                 "leftImg8bit.png)");
}

// Ultralytics' layout (images/train, labels/train) and Roboflow's (train/images, train/labels), whose split
// folders make the splits layout; and darknet's, each .txt beside its image.
TEST(MasksAndBoxes, YoloBoxesOfEachImageAreADetectionDataset) {
  TempDir dir;
  for (const char* split : {"train", "val"}) {
    for (int i = 0; i < 2; ++i) {
      const std::string name = std::to_string(i);
      WriteImage(dir.Sub("ultra/images/") + split + "/" + name + ".png");
      WriteText(dir.Sub("ultra/labels/") + split + "/" + name + ".txt", "0 0.5 0.5 0.2 0.25\n1 0.1 0.1 0.05 0.05\n");
      WriteImage(dir.Sub("roboflow/") + split + "/images/" + name + ".png");
      WriteText(dir.Sub("roboflow/") + split + "/labels/" + name + ".txt", i == 0 ? "" : "3 0.5 0.5 0.2 0.25\n");
    }
  }
  for (int i = 0; i < 2; ++i) {
    WriteImage(dir.Sub("darknet/obj/") + std::to_string(i) + ".png");
    WriteText(dir.Sub("darknet/obj/") + std::to_string(i) + ".txt", "2 0.4 0.4 0.1 0.1\n");
  }
  ExpectRefused(dir.Sub("ultra"), "a detection dataset: labels/ holds YOLO boxes (a .txt file an image) of the "
                                  "images in images/train/ (4 of its 4 by name: labels/train/0.txt of "
                                  "images/train/0.png)");
  ExpectRefused(dir.Sub("roboflow"), "a detection dataset: train/labels/ holds YOLO boxes (a .txt file an image) of "
                                     "the images in train/images/ (2 of its 2 by name: train/labels/1.txt of "
                                     "train/images/1.png)", "splits");
  ExpectRefused(dir.Sub("darknet"), "a detection dataset: obj/ holds YOLO boxes (a .txt file an image) of the "
                                    "images beside them (2 of its 2 by name: obj/0.txt of obj/0.png)");
}

// Pascal VOC: JPEGImages/ beside Annotations/ (boxes in XML) and SegmentationClass/; COCO's annotation file; a
// table of boxes beside the images.
TEST(MasksAndBoxes, VocCocoAndTablesOfBoxesAreNamed) {
  TempDir dir;
  WriteImage(dir.Sub("voc/VOC2012/JPEGImages/2008_000001.png"));
  WriteText(dir.Sub("voc/VOC2012/Annotations/2008_000001.xml"),
            "<annotation><object><name>cat</name><bndbox><xmin>1</xmin></bndbox></object></annotation>");
  ExpectRefused(dir.Sub("voc"), "a detection dataset: VOC2012/Annotations/ holds Pascal VOC boxes (a .xml file an "
                                "image) of the images in VOC2012/JPEGImages/ (1 of its 1 by name: VOC2012/"
                                "Annotations/2008_000001.xml of VOC2012/JPEGImages/2008_000001.png)");
  WriteImage(dir.Sub("coco/train2017/000000391895.png"));
  WriteImage(dir.Sub("coco/val2017/000000000139.png"));
  WriteText(dir.Sub("coco/annotations/instances_val2017.json"),
            "{\"info\": {}, \"images\": [{\"file_name\": \"000000000139.jpg\", \"id\": 139}], \"annotations\": []}");
  ExpectRefused(dir.Sub("coco"), "a detection or segmentation dataset: annotations/instances_val2017.json is a COCO "
                                 "annotation file");
  for (const char* split : {"train", "valid"}) {  // Roboflow's TensorFlow CSV export: a table of boxes beside images
    WriteImage(dir.Sub("tfcsv/") + split + "/a.png");
    WriteText(dir.Sub("tfcsv/") + split + "/_annotations.csv",
              "filename,width,height,class,xmin,ymin,xmax,ymax\na.png,4,4,cat,0,0,2,2\na.png,4,4,dog,1,1,3,3\n");
  }
  ExpectRefused(dir.Sub("tfcsv"), "a detection dataset: train/_annotations.csv is a table of boxes (its columns "
                                  "'xmin', 'ymin', 'xmax', 'ymax')");
}

// Kaggle's segmentation competitions label each image by a run-length encoded mask (train.csv: ImageId,
// EncodedPixels): each mask was a class of its own. Refused, for --labels and for a table's label column alike;
// a column of tag numbers ("3 17") is no mask.
TEST(MasksAndBoxes, RunLengthEncodedMasksInALabelColumnAreNamed) {
  TempDir dir;
  std::string rle = "ImageId,ClassId,EncodedPixels\n", tags = "ImageId,tags\n";  // Severstal's train.csv
  for (int i = 0; i < 6; ++i) {
    WriteImage(dir.Sub("kaggle/train_images/") + std::to_string(i) + ".png");
    rle += std::to_string(i) + ".png," + std::to_string(1 + i % 4) + "," +
           (i == 2 ? "" : std::to_string(1000 * i + 264661) + " 17 300000 33") + "\n";
    tags += std::to_string(i) + ".png," + std::to_string(i % 3) + " " + std::to_string(10 + i % 2) + "\n";
  }
  testing::WriteFile(dir.Sub("kaggle/train.csv"), rle);
  testing::WriteFile(dir.Sub("kaggle/tags.csv"), tags);
  const std::string said = ": column 'EncodedPixels' holds run-length encoded masks ('264661 17 300000 33', ...: "
                           "pairs of a pixel and a run's length, as Kaggle's segmentation competitions write them), "
                           "not classes: a segmentation dataset. prep builds classification dbs; decode each image's "
                           "mask and write the two with granary.write (README, \"Masks and boxes\")";
  RawOptions images;
  images.raw = dir.Sub("kaggle/train_images");
  images.size = "4";
  images.labels = dir.Sub("kaggle/train.csv");
  images.label = "EncodedPixels";
  auto refused = OpenSource(images);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), images.labels + said);
  RawOptions table;  // the table as a table: its column of image names says what it is first
  table.raw = dir.Sub("kaggle/train.csv");
  table.label = "EncodedPixels";
  table.missing = "nan";
  refused = OpenSource(table);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            table.raw + ": column 'ImageId' names the images in " + images.raw + "/ (0.png, 1.png, 2.png): a table "
                        "that labels images, not one of features: prep build " + images.raw + " DB --labels " +
                        table.raw + " builds the images with their labels; --drop ImageId reads the rest as features");
  table.drop = {"ImageId"};
  refused = OpenSource(table);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), table.raw + said);
  images.labels = dir.Sub("kaggle/tags.csv");
  images.label = "";
  auto tagged = OpenSource(images);
  ASSERT_TRUE(tagged.ok()) << tagged.status().ToString();
  EXPECT_EQ(tagged->info.class_names.size(), 6u);
}

// Kaggle's image competitions ship train/ (or train_images/) beside train.csv, whose id column names each image
// (with its extension, or without: 'd01' for train/d01.jpg). Built as a table, the ids were one-hot features; now
// the refusal names the folder and the --labels build, where --label is missing and where it is given.
TEST(MasksAndBoxes, ATableNamingTheImagesBesideItSaysToBuildThemWithIt) {
  TempDir dir;
  std::string cactus = "id,has_cactus\n", dogs = "id,breed\n";
  for (int i = 0; i < 4; ++i) {
    WriteImage(dir.Sub("cactus/train/a") + std::to_string(i) + ".png");
    cactus += "a" + std::to_string(i) + ".png," + std::to_string(i % 2) + "\n";
    WriteImage(dir.Sub("dogs/train/d") + std::to_string(i) + ".jpg");
    dogs += "d" + std::to_string(i) + "," + (i % 2 ? "beagle" : "pug") + "\n";
  }
  testing::WriteFile(dir.Sub("cactus/train.csv"), cactus);
  testing::WriteFile(dir.Sub("dogs/labels.csv"), dogs);
  RawOptions raw;
  raw.raw = dir.Sub("cactus");
  auto refused = OpenSource(raw);
  ASSERT_FALSE(refused.ok());
  const std::string table = dir.Sub("cactus/train.csv"), folder = dir.Sub("cactus/train");
  EXPECT_NE(refused.status().message().find("give --label COLUMN: no column is named label, target, class or y (the "
                                            "header's columns: 'id', 'has_cactus'); its column 'id' names the images "
                                            "in " + folder + "/: a table of their labels? prep build " + folder +
                                            " DB --labels " + table + " --label COLUMN reads them so"),
            std::string::npos)
      << refused.status().message();
  raw.raw = dir.Sub("dogs/labels.csv");
  raw.label = "breed";
  refused = OpenSource(raw);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            raw.raw + ": column 'id' names the images in " + dir.Sub("dogs/train") + "/ (d0, d1, d2): a table that "
                      "labels images, not one of features: prep build " + dir.Sub("dogs/train") + " DB --labels " +
                      raw.raw + " builds the images with their labels; --drop id reads the rest as features");
  raw.raw = dir.Sub("dogs/train");
  raw.labels = dir.Sub("dogs/labels.csv");
  auto built = OpenSource(raw);  // as the refusal says
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(built->info.class_names, (std::vector<std::string>{"beagle", "pug"}));
}

// A labels table of boxes (TensorFlow's object detection CSV, as Roboflow exports it: filename, class, xmin, ...),
// a row a box: an image named again with the same class was read once, silently. Refused as a detection table;
// one box an image is a classification table whose box columns are left out, noted; an image named twice with one
// label and no boxes is read once, noted.
TEST(MasksAndBoxes, ALabelsTableOfBoxesIsADetectionTable) {
  TempDir dir;
  for (int i = 0; i < 4; ++i) WriteImage(dir.Sub("photos/") + std::to_string(i) + ".png");
  const std::string header = "filename,width,height,class,xmin,ymin,xmax,ymax\n";
  const std::string rows =
      "0.png,4,4,cat,0,0,2,2\n1.png,4,4,dog,0,0,2,2\n2.png,4,4,cat,1,1,3,3\n3.png,4,4,dog,0,0,1,1\n";
  testing::WriteFile(dir.Sub("mixed.csv"), header + rows + "3.png,4,4,cat,2,2,3,3\n");
  testing::WriteFile(dir.Sub("same.csv"), header + rows + "3.png,4,4,dog,2,2,3,3\n");
  testing::WriteFile(dir.Sub("one.csv"), header + rows);
  testing::WriteFile(dir.Sub("twice.csv"), "filename,class\n0.png,cat\n1.png,dog\n2.png,cat\n3.png,dog\n0.png,cat\n");
  RawOptions raw;
  raw.raw = dir.Sub("photos");
  raw.size = "4";
  const std::string detection = "a detection table (its columns 'xmin', 'ymin', 'xmax', 'ymax' are a box a row, and "
                                "an image has a row a box: a class a box, not an image). prep builds classification "
                                "dbs; write the images with their boxes with granary.write (README, \"Masks and "
                                "boxes\")";
  raw.labels = dir.Sub("mixed.csv");
  auto refused = OpenSource(raw);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            raw.labels + ":6: '3.png' is labelled again, 'cat' where line 5 says 'dog': " + detection);
  raw.labels = dir.Sub("same.csv");
  refused = OpenSource(raw);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            raw.labels + ": rows name an image again (1 in all, the first '3.png' on lines 5 and 6): " + detection);
  for (const char* table : {"one.csv", "twice.csv"}) {
    raw.labels = dir.Sub(table);
    auto built = OpenSource(raw);
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    std::string notes;
    for (const std::string& note : built->info.notes) notes += note + "\n";
    EXPECT_NE(notes.find(std::string(table) == "one.csv"
                             ? "columns 'xmin', 'ymin', 'xmax', 'ymax' of " + raw.labels +
                                   " (a box an image) are left out: an image's label is its column 'class'"
                             : "1 row(s) of " + raw.labels + " name an image a row above names, with the same "
                                                             "label ('0.png' on lines 2 and 6): read once"),
              std::string::npos)
        << notes;
  }
}

// Folders of classes that share words or names with those datasets are still read as classes: face masks
// (mask/ beside no_mask/, each with 0.png ...), captions beside their images, images/ beside labels/ whose
// numbered files (cat_1, cat_2) are no image's mask.
TEST(MasksAndBoxes, ClassFoldersThatLookAlikeStillBuild) {
  TempDir dir;
  for (int i = 0; i < 3; ++i) {
    const std::string name = std::to_string(i);
    for (const char* c : {"mask", "no_mask", "with_mask", "without_mask"}) {
      WriteImage(dir.Sub("faces/") + c + "/" + name + ".png");
    }
    for (const char* c : {"cat", "dog"}) {
      WriteImage(dir.Sub("captioned/") + c + "/" + name + ".png");
      WriteText(dir.Sub("captioned/") + c + "/" + name + ".txt", "a photo of a " + std::string(c) + "\n");
    }
    WriteImage(dir.Sub("numbered/images/cat_") + name + ".png");
    WriteImage(dir.Sub("numbered/labels/cat_") + std::to_string(i + 3) + ".png");
  }
  for (const char* raw : {"faces", "captioned", "numbered"}) {
    auto built = Open(dir.Sub(raw));
    ASSERT_TRUE(built.ok()) << raw << ": " << built.status().ToString();
    EXPECT_EQ(built->splits[0]->size(), std::string(raw) == "faces" ? 12u : 6u) << raw;
  }
}

}  // namespace
}  // namespace granary
