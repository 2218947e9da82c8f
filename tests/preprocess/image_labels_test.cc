// prep build --labels: a folder of images labelled by a table, as Kaggle
// ships them (train/ beside train.csv: "id,label"), the images named in it
// by path, file name or stem; what the table and the folder disagree on is
// named.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "preprocess/folder_layout.h"
#include "preprocess/png.h"
#include "preprocess/source.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// A 4x4 gray PNG at `path` (its folders made).
void WriteImage(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const std::vector<uint8_t> px(16, 128);
  ASSERT_TRUE(WritePng(path, px.data(), 4, 4, 1).ok());
}

// Each item's name and label (-1: rejected), or its rejection's reason.
std::map<std::string, std::string> LabelsOf(const Source& source) {
  std::map<std::string, std::string> labels;
  for (const auto& split : source.splits) {
    for (uint64_t i = 0; i < split->size(); ++i) {
      Sample s;
      const Status st = split->Produce(i, &s);
      int64_t label = -1;
      if (st.ok()) std::memcpy(&label, s.fields[1].data(), 8);
      labels[split->name() + " " + split->ItemName(i)] = st.ok() ? std::to_string(label) : st.message();
    }
  }
  return labels;
}

ImageFolderOptions Labelled(const std::string& table, const std::string& column = "") {
  ImageFolderOptions o;
  o.width = o.height = 4;
  o.channels = 1;
  o.labels = table;
  o.label_column = column;
  return o;
}

TEST(ImageLabels, ImagesAreLabelledByTheRowNamingThemAndTheRestIsNamed) {
  TempDir dir;
  for (const char* name : {"a.png", "b.png", "c.png", "sub/d.png", "e.png"}) WriteImage(dir.Sub("train/") + name);
  // By file name, by stem, by path; e.png has no row; ghost names no image;
  // line 7 has no label. The labels are names: sorted, they are the classes.
  testing::WriteFile(dir.Sub("train.csv"), "id,breed\na.png,dog\nb,cat\nsub/d.png,dog\nc.png,cat\nghost.png,cat\nf.png,\n");
  auto source = OpenImageFolderSource(dir.Sub("train"), Labelled(dir.Sub("train.csv")));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"cat", "dog"}));
  const std::string missing = "no label: no row of " + dir.Sub("train.csv") + " names it";
  EXPECT_EQ(LabelsOf(source.value()), (std::map<std::string, std::string>{{"train a.png", "1"},
                                                                           {"train b.png", "0"},
                                                                           {"train c.png", "0"},
                                                                           {"train e.png", missing},
                                                                           {"train sub/d.png", "1"}}));
  const std::vector<std::string> notes = source->info.notes;
  const auto noted = [&](const std::string& text) {
    for (const std::string& note : notes) {
      if (note.find(text) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(noted("labels from " + dir.Sub("train.csv") + ": column 'breed' of the image named in 'id' (5 rows, 2 classes)"));
  EXPECT_TRUE(noted("1 row(s) of " + dir.Sub("train.csv") + " name no image in the folder: ghost.png"));
  EXPECT_TRUE(noted("left out 1 row(s) of " + dir.Sub("train.csv") + " without an image name and a label: " +
                    dir.Sub("train.csv") + ":7"));
  EXPECT_EQ(source->info.options.at("layout"), "labels");
  EXPECT_EQ(source->info.options.at("label"), "breed");
  // A table edited since is a build with other options.
  const std::string hash = source->info.options.at("labels_hash");
  testing::WriteFile(dir.Sub("train.csv"), "id,breed\na.png,cat\nb,cat\nsub/d.png,dog\nc.png,cat\ne.png,dog\n");
  auto edited = OpenImageFolderSource(dir.Sub("train"), Labelled(dir.Sub("train.csv")));
  ASSERT_TRUE(edited.ok()) << edited.status().ToString();
  EXPECT_NE(edited->info.options.at("labels_hash"), hash);
  EXPECT_EQ(LabelsOf(edited.value()).at("train e.png"), "1");
  // --val-fraction holds out images as for class folders.
  ImageFolderOptions held_out = Labelled(dir.Sub("train.csv"));
  held_out.val_fraction = 0.5;
  auto split = OpenImageFolderSource(dir.Sub("train"), held_out);
  ASSERT_TRUE(split.ok());
  ASSERT_EQ(split->splits.size(), 2u);
  EXPECT_EQ(split->splits[0]->size() + split->splits[1]->size(), 5u);
}

TEST(ImageLabels, TablesThatCannotLabelAreRefusedNamingTheTable) {
  TempDir dir;
  WriteImage(dir.Sub("train/a.png"));
  const std::string table = dir.Sub("t.csv");
  const std::pair<std::string, std::string> refused[] = {
      {"id,label\na.png,0\na.png,1\n", table + ":3: 'a.png' is labelled again, '1' where line 2 says '0'"},
      {"id,x,z\na.png,1,2\n", table + ": give --label COLUMN: no column is named label, target, class or y (its "
                              "columns: 'id', 'x', 'z')"},
      {"id\na.png\n", table + ": a labels table needs a column naming each image and a label column (its header: 'id')"},
      {"id,price\na.png,10.5\n", table + ": column 'price' holds numbers that are not integers (10.5, ...)"},
      {"id,label\n", table + ": a header and no data rows"},
      {"id,label\na.png,\n", table + ": no row names an image and its label"}};
  for (const auto& [text, message] : refused) {
    testing::WriteFile(table, text);
    const Status s = OpenImageFolderSource(dir.Sub("train"), Labelled(table)).status();
    EXPECT_NE(s.message().find(message), std::string::npos) << s.ToString();
  }
  // The column naming the images is found by its values (HAM10000's
  // metadata: lesion_id,image_id,dx: the images are ISIC_*.jpg).
  testing::WriteFile(table, "lesion_id,image_id,dx\nHAM_1,a,nv\n");
  auto ham = OpenImageFolderSource(dir.Sub("train"), Labelled(table, "dx"));
  ASSERT_TRUE(ham.ok()) << ham.status().ToString();
  EXPECT_EQ(LabelsOf(ham.value()).at("train a.png"), "0");
  testing::WriteFile(table, "lesion_id,dx\nHAM_1,nv\n");
  EXPECT_EQ(OpenImageFolderSource(dir.Sub("train"), Labelled(table)).status().message(),
            table + ": no column names the folder's images (its columns: 'lesion_id', 'dx'; first row: 'HAM_1', 'nv'; "
                    "an image: 'a.png'): a row names an image by its path in the folder, its file name, or its file "
                    "name without the extension");
  testing::WriteFile(table, "file,kind,label\na.png,x,3\n");
  EXPECT_NE(OpenImageFolderSource(dir.Sub("train"), Labelled(table, "nope")).status().message().find(
                table + ": no column 'nope' for --label (its columns: 'file', 'kind', 'label')"),
            std::string::npos);
  auto by_kind = OpenImageFolderSource(dir.Sub("train"), Labelled(table, "kind"));
  ASSERT_TRUE(by_kind.ok()) << by_kind.status().ToString();
  EXPECT_EQ(by_kind->info.class_names, (std::vector<std::string>{"x"}));
  // The flags as prep takes them: --labels only for images, --label only with a table.
  RawOptions raw;
  raw.raw = dir.Sub("train");
  raw.label = "kind";
  EXPECT_NE(OpenSource(raw).status().message().find("an image folder's labels are its class folders"),
            std::string::npos);
  raw.raw = table;
  raw.labels = table;
  EXPECT_NE(OpenSource(raw).status().message().find("--labels " + table + ": labels a folder of images"),
            std::string::npos);
  // A folder of images and no class folders points at --labels and the table beside it.
  RawOptions flat;
  flat.raw = dir.Sub("train");
  EXPECT_NE(OpenSource(flat).status().message().find("--labels TABLE (" + table + " beside it?)"), std::string::npos)
      << OpenSource(flat).status().ToString();
}

// A table without a header (its first row names an image): columns 1..N;
// of two, the second is the label; of more, --label N says which.
TEST(ImageLabels, ATableWithoutAHeaderIsReadFromItsFirstRow) {
  TempDir dir;
  for (const char* name : {"a.png", "b.png", "c.png"}) WriteImage(dir.Sub("train/") + name);
  testing::WriteFile(dir.Sub("labels.txt"), "a.png,dog\nb.png,cat\nc.png,dog\n");
  auto source = OpenImageFolderSource(dir.Sub("train"), Labelled(dir.Sub("labels.txt")));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(LabelsOf(source.value()),
            (std::map<std::string, std::string>{{"train a.png", "1"}, {"train b.png", "0"}, {"train c.png", "1"}}));
  EXPECT_NE(source->info.notes[0].find("(no header; columns numbered): column '2' of the image named in '1'"),
            std::string::npos)
      << source->info.notes[0];
  testing::WriteFile(dir.Sub("boxes.txt"), "a.png\t0\t0\tdog\nb.png\t0\t0\tcat\nc.png\t0\t0\tdog\n");
  auto wide = OpenImageFolderSource(dir.Sub("train"), Labelled(dir.Sub("boxes.txt")));
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("has no header (its first row names an image): give --label N, the number "
                                         "of its label column (1..4)"),
            std::string::npos)
      << wide.status().ToString();
  auto given = OpenImageFolderSource(dir.Sub("train"), Labelled(dir.Sub("boxes.txt"), "4"));
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->info.class_names, (std::vector<std::string>{"cat", "dog"}));
}

TEST(ImageLabels, ClassFromNameIsTheNameWithoutItsNumber) {
  const std::map<std::string, std::string> cases = {
      {"cat.0.jpg", "cat"}, {"train/dog.12499.jpg", "dog"}, {"Abyssinian_100.jpg", "Abyssinian"},
      {"great_pyrenees_12.png", "great_pyrenees"}, {"img-7.webp", "img"}, {"n02085620_10074.JPEG", "n02085620"},
      {"0001.jpg", ""}, {"sunset.jpg", ""}, {"cat.jpg", ""}};
  for (const auto& [name, expected] : cases) EXPECT_EQ(ClassFromName(name), expected) << name;
}

// Kaggle's dogs-vs-cats: train/ of cat.0.jpg, dog.0.jpg, ... beside test1/
// of unlabelled 1.jpg, ...: the refusals say --label-from-name, which labels
// each image by its name; an image whose name says no class is rejected by
// name; names that make no two classes are refused.
TEST(ImageLabels, LabelFromNameLabelsAFolderWhoseNamesSayTheClass) {
  TempDir dir;
  for (int i = 0; i < 5; ++i) {
    WriteImage(dir.Sub("dogs-vs-cats/train/cat." + std::to_string(i) + ".png"));
    WriteImage(dir.Sub("dogs-vs-cats/train/dog." + std::to_string(i) + ".png"));
    WriteImage(dir.Sub("dogs-vs-cats/test1/" + std::to_string(i + 1) + ".png"));
  }
  WriteImage(dir.Sub("dogs-vs-cats/train/0001.png"));
  ImageFolderOptions options = Labelled("");
  auto refused = OpenImageFolderSource(dir.Sub("dogs-vs-cats/train"), options);
  ASSERT_FALSE(refused.ok());
  // 0001.png says no class: no suggestion where not every name says one.
  EXPECT_EQ(refused.status().message().find("--label-from-name"), std::string::npos) << refused.status().ToString();
  std::filesystem::remove(dir.Sub("dogs-vs-cats/train/0001.png"));
  refused = OpenImageFolderSource(dir.Sub("dogs-vs-cats/train"), options);
  EXPECT_NE(refused.status().message().find("their names say a class (cat, dog: 2 by the name without its number): "
                                            "--label-from-name"),
            std::string::npos)
      << refused.status().ToString();
  // The folder above: train/ and test1/ read as classes, as ImageFolder would, with a note saying what to build.
  auto above = OpenImageFolderSource(dir.Sub("dogs-vs-cats"), options);
  ASSERT_TRUE(above.ok()) << above.status().ToString();
  std::string notes;
  for (const std::string& note : above->info.notes) notes += note + "\n";
  EXPECT_NE(notes.find("train/ holds its 10 images directly, in no class folder; their names say a class (cat, dog: "
                       "2 by the name without its number): prep build " + dir.Sub("dogs-vs-cats/train") +
                       " DB --label-from-name"),
            std::string::npos)
      << notes;
  WriteImage(dir.Sub("dogs-vs-cats/train/0001.png"));
  options.label_from_name = true;
  auto source = OpenImageFolderSource(dir.Sub("dogs-vs-cats/train"), options);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(source->info.options.at("layout"), "names");
  const std::map<std::string, std::string> labels = LabelsOf(source.value());
  EXPECT_EQ(labels.at("train cat.3.png"), "0");
  EXPECT_EQ(labels.at("train dog.0.png"), "1");
  EXPECT_EQ(labels.at("train 0001.png"), "no label: its name is no class followed by a number (as cat.0.jpg is)");
  auto unlabelled = OpenImageFolderSource(dir.Sub("dogs-vs-cats/test1"), options);
  ASSERT_FALSE(unlabelled.ok());
  EXPECT_NE(unlabelled.status().message().find("--label-from-name: the 5 images' names (without their number) give 0 "
                                               "class(es)"),
            std::string::npos)
      << unlabelled.status().ToString();
}

}  // namespace
}  // namespace granary
