#include "preprocess/cifar.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "preprocess/source.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// `count` records of CIFAR's binary version: `label_bytes` label bytes
// (record n's: n % 10 + 10 * k for byte k), then 3,072 pixels, pixel k of
// record n = seed + n + k.
std::string Records(int count, int label_bytes, int seed) {
  std::string s;
  for (int n = 0; n < count; ++n) {
    for (int k = 0; k < label_bytes; ++k) s.push_back(static_cast<char>(n % 10 + 10 * k));
    for (int k = 0; k < kCifarPixelBytes; ++k) s.push_back(static_cast<char>(seed + n + k));
  }
  return s;
}

void WriteCifar10(const TempDir& dir, int batches) {
  for (int b = 1; b <= batches; ++b) {
    testing::WriteFile(dir.Sub("data_batch_" + std::to_string(b) + ".bin"), Records(3, 1, 10 * b));
  }
  testing::WriteFile(dir.Sub("test_batch.bin"), Records(2, 1, 100));
}

std::string Message(const Status& status) { return status.message(); }

TEST(CifarSource, Cifar10IsReadAsChwImagesAndLabelsFromEveryBatchInOrder) {
  TempDir dir;
  WriteCifar10(dir, 5);
  testing::WriteFile(dir.Sub("batches.meta.txt"), "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\n"
                                                  "truck  \n\n");
  testing::WriteFile(dir.Sub("readme.html"), "<html>");
  EXPECT_EQ(DetectFormat(dir.path()), "cifar");
  StatusOr<Source> source = OpenCifarSource(dir.path(), {});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.kind, "cifar");
  ASSERT_EQ(source->info.schema.fields.size(), 2u);
  EXPECT_EQ(source->info.schema.fields[0].shape, (Shape{3, 32, 32}));
  EXPECT_EQ(source->info.schema.fields[0].layout, "CHW");
  EXPECT_EQ(source->info.class_names.size(), 10u);
  EXPECT_EQ(source->info.class_names.back(), "truck");
  EXPECT_TRUE(source->info.notes.empty()) << source->info.notes[0];
  ASSERT_EQ(source->splits.size(), 2u);
  EXPECT_EQ(source->splits[0]->size(), 15u);
  EXPECT_EQ(source->splits[1]->name(), "test");
  EXPECT_EQ(source->splits[1]->size(), 2u);
  // Item 7 is data_batch_3.bin's record 1: label 1, pixels 30 + 1 + k, CHW as stored.
  EXPECT_EQ(source->splits[0]->ItemName(7), dir.Sub("data_batch_3.bin") + "[1]");
  Sample sample;
  ASSERT_TRUE(source->splits[0]->Produce(7, &sample).ok());
  ASSERT_EQ(sample.fields[0].size(), static_cast<size_t>(kCifarPixelBytes));
  EXPECT_EQ(static_cast<uint8_t>(sample.fields[0][0]), 31);
  EXPECT_EQ(static_cast<uint8_t>(sample.fields[0][1024]), static_cast<uint8_t>(31 + 1024));
  int64_t label = -1;
  std::memcpy(&label, sample.fields[1].data(), sizeof(label));
  EXPECT_EQ(label, 1);
  ASSERT_TRUE(source->splits[1]->Produce(1, &sample).ok());
  EXPECT_EQ(static_cast<uint8_t>(sample.fields[0][0]), 101);
}

TEST(CifarSource, Cifar100TakesTheFineLabelOrWithLabelCoarseTheCoarse) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train.bin"), Records(12, 2, 0));
  testing::WriteFile(dir.Sub("test.bin"), Records(4, 2, 0));
  std::string fine, coarse;
  for (int k = 0; k < 100; ++k) fine += "fine" + std::to_string(k) + "\n";
  for (int k = 0; k < 20; ++k) coarse += "coarse" + std::to_string(k) + "\n";
  testing::WriteFile(dir.Sub("fine_label_names.txt"), fine);
  testing::WriteFile(dir.Sub("coarse_label_names.txt"), coarse);
  EXPECT_EQ(DetectFormat(dir.path()), "cifar");
  for (const char* label : {"", "fine", "coarse"}) {
    CifarSourceOptions options;
    options.label = label;
    StatusOr<Source> source = OpenCifarSource(dir.path(), options);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    const bool is_coarse = std::string(label) == "coarse";
    EXPECT_EQ(source->info.num_classes, is_coarse ? 20 : 100);
    EXPECT_EQ(source->info.class_names[3], is_coarse ? "coarse3" : "fine3");
    EXPECT_EQ(source->info.options.at("label"), is_coarse ? "coarse" : "fine");  // recorded: another label, another db
    Sample sample;
    ASSERT_TRUE(source->splits[0]->Produce(11, &sample).ok());
    int64_t value = -1;
    std::memcpy(&value, sample.fields[1].data(), sizeof(value));
    EXPECT_EQ(value, is_coarse ? 1 : 11);  // record 11's bytes: coarse 1, fine 11
    EXPECT_EQ(static_cast<uint8_t>(sample.fields[0][0]), 11);
  }
  testing::WriteFile(dir.Sub("fine_label_names.txt"), "apple\npear\n");
  StatusOr<Source> few = OpenCifarSource(dir.path(), {});
  ASSERT_FALSE(few.ok());
  EXPECT_NE(Message(few.status()).find(dir.Sub("fine_label_names.txt") + ": 2 class names, the labels need 100"),
            std::string::npos)
      << few.status().ToString();
}

// A record whose label is outside the classes is rejected by itself (the
// build counts and names it); the others are read.
TEST(CifarSource, ALabelOutOfRangeRejectsThatRecordOnly) {
  TempDir dir;
  std::string batch = Records(3, 1, 0);
  batch[static_cast<size_t>(1 + kCifarPixelBytes)] = 10;  // record 1's label
  testing::WriteFile(dir.Sub("data_batch_1.bin"), batch);
  StatusOr<Source> source = OpenCifarSource(dir.path(), {});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Sample sample;
  EXPECT_TRUE(source->splits[0]->Produce(0, &sample).ok());
  Status bad = source->splits[0]->Produce(1, &sample);
  EXPECT_NE(bad.message().find("label 10 is outside CIFAR-10's 0..9"), std::string::npos) << bad.ToString();
  EXPECT_TRUE(source->splits[0]->Produce(2, &sample).ok());
  // Named: only one of 5 batches, no test split, no class names.
  ASSERT_EQ(source->info.notes.size(), 3u);
  EXPECT_NE(source->info.notes[0].find("no file of class names"), std::string::npos);
  EXPECT_NE(source->info.notes[1].find("1 of CIFAR-10's 5 training batches"), std::string::npos);
  EXPECT_NE(source->info.notes[2].find("no test split"), std::string::npos);
}

TEST(Cifar, WhatIsWrongWithAFolderIsNamed) {
  TempDir dir;
  auto error = [](const std::string& folder, const std::string& label = "") {
    return Message(FindCifarDataset(folder, label).status());
  };
  // A cut download, and a gap in the batches.
  testing::WriteFile(dir.Sub("data_batch_1.bin"), Records(2, 1, 0).substr(0, 5000));
  EXPECT_NE(error(dir.path()).find(dir.Sub("data_batch_1.bin") + ": 5000 bytes is not a whole number of CIFAR-10's "
                                                                  "3073-byte records (a cut download?)"),
            std::string::npos)
      << error(dir.path());
  testing::WriteFile(dir.Sub("data_batch_1.bin"), Records(2, 1, 0));
  testing::WriteFile(dir.Sub("data_batch_3.bin"), Records(2, 1, 0));
  EXPECT_NE(error(dir.path()).find("has data_batch_3.bin but no data_batch_2.bin"), std::string::npos);
  testing::WriteFile(dir.Sub("data_batch_2.bin"), Records(2, 1, 0));
  EXPECT_TRUE(FindCifarDataset(dir.path(), "").ok());
  EXPECT_NE(error(dir.path(), "coarse").find("--label coarse: CIFAR-10 has one label"), std::string::npos);
  // CIFAR-100's labels are fine or coarse; its records are 3,074 bytes.
  TempDir hundred;
  testing::WriteFile(hundred.Sub("train.bin"), Records(2, 1, 0));
  EXPECT_NE(error(hundred.path()).find("is not a whole number of CIFAR-100's 3074-byte records"), std::string::npos);
  EXPECT_NE(error(hundred.path(), "species").find("--label species: CIFAR-100's labels are fine"), std::string::npos);
  testing::WriteFile(dir.Sub("train.bin"), Records(2, 2, 0));
  EXPECT_NE(error(dir.path()).find("holds files of both CIFAR-10"), std::string::npos);
}

// The Python version (what torchvision downloads) is refused saying where
// the binary version is and how to write this one from Python, with the
// folder's parent as torchvision's root.
TEST(Cifar, ThePythonVersionIsRefusedWithTheCommandsThatBuildIt) {
  TempDir dir;
  const std::string py10 = dir.Sub("cifar-10-batches-py"), py100 = dir.Sub("cifar-100-python");
  std::filesystem::create_directories(py10);
  std::filesystem::create_directories(py100);
  for (const char* name : {"data_batch_1", "test_batch", "batches.meta"}) testing::WriteFile(py10 + "/" + name, "x");
  for (const char* name : {"train", "test", "meta"}) testing::WriteFile(py100 + "/" + name, "x");
  EXPECT_EQ(DetectFormat(py10), "cifar");
  EXPECT_EQ(DetectFormat(py100), "cifar");
  const std::string ten = Message(FindCifarDataset(py10, "").status());
  EXPECT_NE(ten.find("holds CIFAR-10 as Python pickles"), std::string::npos) << ten;
  EXPECT_NE(ten.find("cifar-10-binary.tar.gz"), std::string::npos) << ten;
  EXPECT_NE(ten.find("granary.write('DB', {'train': d.CIFAR10('" + dir.path() + "', train=True), 'test': d.CIFAR10('" +
                     dir.path() + "', train=False)})"),
            std::string::npos)
      << ten;
  EXPECT_EQ(ten.find("rename it"), std::string::npos);
  const std::string hundred = Message(FindCifarDataset(py100 + "/", "").status());
  EXPECT_NE(hundred.find("d.CIFAR100('" + dir.path() + "', train=True)"), std::string::npos) << hundred;
  // Renamed: torchvision would not find it where the command looks.
  std::filesystem::rename(py10, dir.Sub("cifar10"));
  EXPECT_NE(Message(FindCifarDataset(dir.Sub("cifar10"), "").status())
                .find("reads the folder as ROOT/cifar-10-batches-py"),
            std::string::npos);
}

// A download extracted into a folder of its own (raw/cifar-10-batches-bin/),
// or torchvision's root (root/FashionMNIST/raw/), read as an image folder
// without images: the error names the folder below that holds a dataset.
TEST(OpenSource, AFolderHoldingOneDatasetFolderSaysToBuildFromThat) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("cifar-10-batches-bin"));
  testing::WriteFile(dir.Sub("cifar-10-batches-bin/data_batch_1.bin"), Records(1, 1, 0));
  testing::WriteFile(dir.Sub("cifar-10-binary.tar.gz"), "gz");
  RawOptions options;
  options.raw = dir.path();
  StatusOr<Source> source = OpenSource(options);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(Message(source.status()).find("its folder " + dir.Sub("cifar-10-batches-bin") +
                                          " holds a CIFAR dataset: build from that (prep build " +
                                          dir.Sub("cifar-10-batches-bin") + " DB)"),
            std::string::npos)
      << source.status().ToString();
  // torchvision's root: the dataset two folders down, or two datasets.
  std::filesystem::create_directories(dir.Sub("root/FashionMNIST/raw"));
  std::filesystem::create_directories(dir.Sub("root/MNIST/raw"));
  testing::WriteFile(dir.Sub("root/FashionMNIST/raw/train-images-idx3-ubyte"), "");
  options.raw = dir.Sub("root");
  EXPECT_NE(Message(OpenSource(options).status()).find("its folder " + dir.Sub("root/FashionMNIST/raw") +
                                                       " holds an IDX dataset"),
            std::string::npos)
      << OpenSource(options).status().ToString();
  testing::WriteFile(dir.Sub("root/MNIST/raw/train-images-idx3-ubyte.gz"), "");
  EXPECT_NE(Message(OpenSource(options).status()).find("folders below it hold datasets: " +
                                                       dir.Sub("root/FashionMNIST/raw") + " (an IDX dataset), " +
                                                       dir.Sub("root/MNIST/raw") + " (an IDX dataset): build from one"),
            std::string::npos)
      << OpenSource(options).status().ToString();
  options.raw = dir.Sub("cifar-10-batches-bin");
  EXPECT_TRUE(OpenSource(options).ok());
  options.label = "fine";
  EXPECT_NE(Message(OpenSource(options).status()).find("CIFAR-10 has one label"), std::string::npos);
}

}  // namespace
}  // namespace granary
