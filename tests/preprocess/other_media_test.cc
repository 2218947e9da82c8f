// Class folders of text or audio given to prep: named, with the
// granary.write call that writes them (tests/python/datasets_test.py runs
// that call as printed); WebDataset shards, read in place.
#include "preprocess/other_media.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "preprocess/png.h"
#include "preprocess/source.h"
#include "preprocess/webdataset.h"
#include "tests/test_util.h"
#include "tests/ustar.h"

namespace granary {
namespace {

using testing::TempDir;

// A RIFF WAV header of `bits` a sample and `frames` silent mono frames.
std::string Wav(int bits, int frames = 4) {
  const auto le = [](uint32_t v, int n) {
    std::string b;
    for (int i = 0; i < n; ++i) b += static_cast<char>(v >> (8 * i) & 0xFF);
    return b;
  };
  const uint32_t data = static_cast<uint32_t>(frames * bits / 8);
  return "RIFF" + le(36 + data, 4) + "WAVE" + "fmt " + le(16, 4) + le(1, 2) + le(1, 2) + le(16000, 4) +
         le(16000 * bits / 8, 4) + le(bits / 8, 2) + le(bits, 2) + "data" + le(data, 4) + std::string(data, '\0');
}

void Files(const TempDir& dir, const std::string& folder, const std::string& suffix, const std::string& bytes,
           int count = 2) {
  std::filesystem::create_directories(dir.Sub(folder));
  for (int k = 0; k < count; ++k) testing::WriteFile(dir.Sub(folder + "/" + std::to_string(k) + suffix), bytes);
}

TEST(OtherMedia, ClassFoldersOfTextAreNamedWithTheWriteOfEachSplit) {
  TempDir dir;
  for (const char* folder : {"train/pos", "train/neg", "test/pos", "test/neg"}) Files(dir, folder, "_7.txt", "good");
  Files(dir, "train/unsup", "_0.txt", "unlabelled");
  testing::WriteFile(dir.Sub("train/urls_pos.txt"), "http://\n");  // aclImdb's files beside the classes
  const std::string raw = dir.Sub("");
  EXPECT_EQ(OtherMediaAdvice(raw, "imdb.db"),
            raw + ": its class folders (neg/, pos/) hold 8 .txt files and no image: text, which prep does not read "
                  "(it reads images, CSV tables, IDX and CIFAR files); unsup/ left out (no class); write it from "
                  "Python, each file a str (a text field): import granary, pathlib; classes = ['neg', 'pos']; rows = "
                  "lambda d: [{'text': f.read_text(), 'label': k} for k, c in enumerate(classes) for f in "
                  "sorted((pathlib.Path(d) / c).rglob('*.txt'))]; granary.write('imdb.db', {'train': rows('" +
                  raw + "train'), 'test': rows('" + raw + "test')}, classes=classes)");
  EXPECT_EQ(OtherMediaAdvice(dir.Sub("train"), "").find(dir.Sub("train") + ": its class folders (neg/, pos/) hold 4"),
            0u);
  Files(dir, "train/pos", ".jpg", "not really a jpeg", 1);  // an image among them: the image folder's own error
  EXPECT_EQ(OtherMediaAdvice(raw, "db"), "");
}

TEST(OtherMedia, AudioIsWrittenAsItsSamplesWithTheSplitsItsListsName) {
  TempDir dir;
  for (const char* word : {"yes", "no", "_background_noise_"}) Files(dir, word, "_nohash_0.wav", Wav(16));
  testing::WriteFile(dir.Sub("validation_list.txt"), "yes/0_nohash_0.wav\n");
  const std::string advice = OtherMediaAdvice(dir.path(), "words.db");
  EXPECT_NE(advice.find(": its class folders (no/, yes/) hold 4 audio files and no image: audio, which prep does not "
                        "read"), std::string::npos) << advice;
  EXPECT_NE(advice.find("_background_noise_/ left out (no class)"), std::string::npos);
  EXPECT_NE(advice.find("held = {**dict.fromkeys(open('" + dir.Sub("validation_list.txt") + "').read().split(), "
                        "'val')}"), std::string::npos) << advice;
  EXPECT_NE(advice.find("granary.write('words.db', {s: rows(s) for s in ('train', 'val')}, classes=classes, "
                        "schema={'audio': ('int16', [-1]), 'label': ('int64', [])})"), std::string::npos) << advice;
  // 8-bit samples (or a FLAC) are not np.int16: the advice says how to decode them instead.
  TempDir other;
  for (const char* word : {"up", "down"}) Files(other, word, ".wav", Wav(8));
  EXPECT_NE(OtherMediaAdvice(other.path(), "db").find("decode each clip to an array (soundfile.read, "
                                                      "torchaudio.load)"), std::string::npos);
}

TEST(OtherMedia, AFolderThatIsNoClassFoldersOfTextOrAudioGetsNoAdvice) {
  TempDir one, none, file;
  Files(one, "pos", ".txt", "good");  // one class
  EXPECT_EQ(OtherMediaAdvice(one.path(), "db"), "");
  Files(none, "a", ".bin", "?");
  Files(none, "b", ".bin", "?");
  EXPECT_EQ(OtherMediaAdvice(none.path(), "db"), "");
  testing::WriteFile(file.Sub("t.txt"), "a,label\n");
  EXPECT_EQ(OtherMediaAdvice(file.Sub("t.txt"), "db"), "");
}

using testing::UstarArchive;

// A PNG of w x h gray pixels of `value`.
std::string Png(const TempDir& dir, int w, int h, uint8_t value) {
  const std::vector<uint8_t> pixels(static_cast<size_t>(w * h), value);
  EXPECT_TRUE(WritePng(dir.Sub("p.png"), pixels.data(), w, h, 1).ok());
  return testing::ReadFile(dir.Sub("p.png"));
}

// The first pixel and the label of sample `i`, or why it is rejected.
std::string SampleOf(const SplitSource& split, uint64_t i) {
  granary::Sample s;
  if (Status st = split.Produce(i, &s); !st.ok()) return st.message();
  int64_t label = -1;
  std::memcpy(&label, s.fields[1].data(), sizeof(label));
  return std::to_string(static_cast<uint8_t>(s.fields[0][0])) + " -> " + std::to_string(label);
}

TEST(WebDataset, ShardsAreReadInPlaceTheirSamplesLabelledByTheirClsFiles) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("wds"));
  const std::string pax = "23 path=n01/000003.png\n";  // a pax header naming the member after it
  testing::WriteFile(dir.Sub("wds/imagenet-train-000000.tar"),
                     UstarArchive({{"n01/000001.jpg", "not a jpeg"}, {"n01/000001.cls", "10\n"},
                                   {"000002.png", Png(dir, 8, 6, 7)}, {"000002.cls", "2"}, {"x|x", pax},
                                   {"ignored.png", Png(dir, 8, 6, 9)}, {"n01/000003.cls", " 2 "},
                                   {"000004.png", Png(dir, 8, 6, 1)}, {"000005.cls", "1"}}));
  testing::WriteFile(dir.Sub("wds/imagenet-val-000000.tar"),
                     UstarArchive({{"000009.png", Png(dir, 4, 4, 200)}, {"000009.cls", "10"}}));
  EXPECT_TRUE(IsWebDataset(dir.Sub("wds")));
  RawOptions raw;
  raw.raw = dir.Sub("wds");
  raw.size = "4";
  raw.channels = 1;
  auto source = OpenSource(raw);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.kind, "webdataset");
  ASSERT_EQ(source->info.class_names.size(), 11u);  // integers as class indices, as a table's are
  ASSERT_EQ(source->splits.size(), 2u);
  const SplitSource& train = *source->splits[0];
  ASSERT_EQ(train.size(), 5u);
  EXPECT_EQ(train.ItemName(0), "imagenet-train-000000.tar:n01/000001");
  EXPECT_NE(SampleOf(train, 0).find("JPEG"), std::string::npos) << SampleOf(train, 0);  // a broken image: named
  EXPECT_EQ(SampleOf(train, 1), "7 -> 2");
  EXPECT_EQ(SampleOf(train, 2), "9 -> 2");  // its name from the pax header
  EXPECT_EQ(SampleOf(train, 3), "no .cls label beside its image");
  EXPECT_EQ(SampleOf(train, 4), "no image (.jpg, .jpeg, .png, .webp) among its files (cls)");
  EXPECT_EQ(SampleOf(*source->splits[1], 0), "200 -> 10");
  // Captions instead of classes: what writes them; a shard cut short: named.
  testing::WriteFile(dir.Sub("caps.tar"), UstarArchive({{"a.png", Png(dir, 2, 2, 0)}, {"a.txt", "a dog"}}));
  raw.raw = dir.Sub("caps.tar");
  EXPECT_EQ(OpenSource(raw).status().message(),
            dir.Sub("caps.tar") + ": WebDataset shards of 1 samples, none with a .cls class label (beside the images: "
                                  "txt): prep reads images labelled by class; write them from Python with "
                                  "granary.write (README, \"Any dataset from Python\")");
  const std::string whole = UstarArchive({{"a.png", Png(dir, 30, 30, 0)}, {"a.cls", "0"}});
  testing::WriteFile(dir.Sub("cut.tar"), whole.substr(0, 520));
  raw.raw = dir.Sub("cut.tar");
  EXPECT_FALSE(IsWebDataset(raw.raw));  // read as a table: a tar archive, extract it first
  ImageFolderOptions o;
  EXPECT_NE(OpenWebDatasetSource(dir.Sub("cut.tar"), o).status().message().find("cut.tar: cut short (a member of"),
            std::string::npos);
  // A folder of more than shards is no WebDataset.
  testing::WriteFile(dir.Sub("wds/README"), "shards");
  EXPECT_FALSE(IsWebDataset(dir.Sub("wds")));
}

}  // namespace
}  // namespace granary
