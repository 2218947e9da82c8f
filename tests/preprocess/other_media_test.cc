// Class folders of text or audio given to prep: named, with the
// granary.write call that writes them (tests/python/datasets_test.py runs
// that call as printed); WebDataset shards, with the lines that make class
// folders of them (tools/drill's round 20 runs those as printed).
#include "preprocess/other_media.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "preprocess/source.h"
#include "preprocess/webdataset.h"
#include "tests/test_util.h"

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

// A ustar archive of `members` (name, bytes), as tar and WebDataset's writer make one.
std::string Tar(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string tar;
  for (const auto& [name, bytes] : members) {
    std::string header(512, '\0');
    header.replace(0, name.size(), name);
    char size[12];
    std::snprintf(size, sizeof(size), "%011o", static_cast<unsigned>(bytes.size()));
    header.replace(124, 11, size);
    header[156] = '0';
    header.replace(257, 6, std::string("ustar\0", 6));
    tar += header + bytes + std::string((512 - bytes.size() % 512) % 512, '\0');
  }
  return tar + std::string(1024, '\0');
}

TEST(OtherMedia, WebDatasetShardsAreNamedWithTheLinesThatMakeClassFolders) {
  TempDir dir;
  std::filesystem::create_directories(dir.Sub("wds"));
  testing::WriteFile(dir.Sub("wds/imagenet-train-000000.tar"),
                     Tar({{"n01/000001.jpg", "x"}, {"n01/000001.cls", "3\n"}, {"000002.JPEG", "x"},
                          {"000002.cls", "0"}}));
  testing::WriteFile(dir.Sub("wds/imagenet-val-000000.tar"), Tar({{"000009.png", "x"}, {"000009.cls", "1"}}));
  const std::string advice = WebDatasetAdvice(dir.Sub("wds"), "in.db");
  EXPECT_NE(advice.find(": WebDataset shards (2 .tar files): 2 images in imagenet-train-000000.tar, each a sample of "
                        "the files named like it and its class in a .cls file"), std::string::npos) << advice;
  EXPECT_NE(advice.find("mkdir -p in-tar/train && for s in '" + dir.Sub("wds") + "'/*train*.tar; do tar xf \"$s\" -C "
                        "in-tar/train; done && mkdir -p in-tar/val && "), std::string::npos) << advice;
  EXPECT_NE(advice.find("for e in jpeg jpg; do"), std::string::npos) << advice;
  EXPECT_NE(advice.find("prep build in-classes in.db"), std::string::npos) << advice;
  // OpenSource says it (a folder of shards was "no IDX dataset found"; a shard "a tar archive: extract it first").
  RawOptions raw;
  raw.raw = dir.Sub("wds/imagenet-val-000000.tar");
  raw.db = "v.db";
  EXPECT_NE(OpenSource(raw).status().message().find("a WebDataset shard: 1 images in"), std::string::npos);
  // Captions instead of classes: what writes them; a tar of no images, or a folder of more than shards: no advice.
  testing::WriteFile(dir.Sub("caps.tar"), Tar({{"a.jpg", "x"}, {"a.txt", "a dog"}}));
  EXPECT_NE(WebDatasetAdvice(dir.Sub("caps.tar"), "").find("no .cls class label beside 1 of them (beside them: txt)"),
            std::string::npos);
  testing::WriteFile(dir.Sub("docs.tar"), Tar({{"a.txt", "x"}}));
  EXPECT_EQ(WebDatasetAdvice(dir.Sub("docs.tar"), ""), "");
  testing::WriteFile(dir.Sub("wds/README"), "shards");
  EXPECT_EQ(WebDatasetAdvice(dir.Sub("wds"), ""), "");
}

}  // namespace
}  // namespace granary
