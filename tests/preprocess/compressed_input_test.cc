// CSV tables that arrive compressed (train.csv.gz as Kaggle serves it,
// .csv.zst), files that are not CSV text at all (other archives, workbooks,
// JSON), an empty folder and one of tables in other formats.
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "preprocess/compressed_input.h"
#include "preprocess/source.h"
#include "tests/test_util.h"

namespace granary {
namespace {

using testing::TempDir;

// `text` gzip-compressed (one member).
std::string Gzip(const std::string& text, const std::string& scratch) {
  gzFile f = gzopen(scratch.c_str(), "wb");
  EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  EXPECT_EQ(gzclose(f), Z_OK);
  return testing::ReadFile(scratch);
}

std::string Zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

// Every row's features and label, as text: "1.5 2 | 0; ...".
std::string RowsOf(const Source& source) {
  std::string rows;
  for (const auto& split : source.splits) {
    for (uint64_t i = 0; i < split->size(); ++i) {
      Sample s;
      Status st = split->Produce(i, &s);
      EXPECT_TRUE(st.ok()) << st.ToString();
      for (size_t at = 0; at + 4 <= s.fields[0].size(); at += 4) {
        float f = 0;
        std::memcpy(&f, s.fields[0].data() + at, 4);
        rows += std::to_string(f) + " ";
      }
      int64_t label = 0;
      std::memcpy(&label, s.fields[1].data(), 8);
      rows += "| " + std::to_string(label) + "; ";
    }
  }
  return rows;
}

TEST(CompressedInput, MagicBytesNameTheCompression) {
  EXPECT_EQ(CompressionOf("\x1f\x8b\x08"), "gzip");
  EXPECT_EQ(CompressionOf("\x28\xb5\x2f\xfd\x20"), "zstd");
  EXPECT_EQ(CompressionOf("BZh91AY"), "bzip2");
  EXPECT_EQ(CompressionOf(std::string("\xfd" "7zXZ\0", 6)), "xz");
  EXPECT_EQ(CompressionOf("PK\x03\x04"), "zip");
  EXPECT_EQ(CompressionOf("a,b,label"), "");
  EXPECT_EQ(CompressionOf(""), "");
  EXPECT_EQ(DecompressCommand("bzip2", "t.csv.bz2"), "bunzip2 -k t.csv.bz2");
}

// A gzip (of two members, as `cat a.gz b.gz` makes) or zstd table is read as
// the table itself, from an unnamed copy that leaves nothing in the
// temporary directory.
TEST(CompressedInput, GzipAndZstdTablesAreReadAsTheTableItself) {
  TempDir dir, tmp;
  const std::string head = "a,b,label\n1.5,2,0\n";
  const std::string tail = "-3,4e2,1\n7,8,0\n";
  testing::WriteFile(dir.Sub("t.csv"), head + tail);
  testing::WriteFile(dir.Sub("t.csv.gz"), Gzip(head, dir.Sub("a.gz")) + Gzip(tail, dir.Sub("b.gz")));
  testing::WriteFile(dir.Sub("t.csv.zst"), Zstd(head + tail));
  CsvOptions o;
  o.temp_dir = tmp.path();
  auto plain = OpenCsvSource(dir.Sub("t.csv"), o);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const std::string expected = RowsOf(plain.value());
  EXPECT_EQ(expected, "1.500000 2.000000 | 0; -3.000000 400.000000 | 1; 7.000000 8.000000 | 0; ");
  for (const char* name : {"t.csv.gz", "t.csv.zst"}) {
    auto source = OpenCsvSource(dir.Sub(name), o);
    ASSERT_TRUE(source.ok()) << name << ": " << source.status().ToString();
    EXPECT_EQ(RowsOf(source.value()), expected) << name;
    bool noted = false;
    for (const std::string& note : source->info.notes) noted = noted || note.find("decompressed copy") != std::string::npos;
    EXPECT_TRUE(noted) << name;
    EXPECT_TRUE(std::filesystem::is_empty(tmp.path())) << name;
  }
  // A folder's train.csv.gz (and test.csv.zst) is a CSV dataset.
  TempDir folder;
  testing::WriteFile(folder.Sub("train.csv.gz"), testing::ReadFile(dir.Sub("t.csv.gz")));
  testing::WriteFile(folder.Sub("test.csv.zst"), testing::ReadFile(dir.Sub("t.csv.zst")));
  EXPECT_EQ(DetectFormat(folder.path()), "csv");
  auto splits = OpenCsvSource(folder.path(), o);
  ASSERT_TRUE(splits.ok()) << splits.status().ToString();
  ASSERT_EQ(splits->splits.size(), 2u);
  EXPECT_EQ(splits->splits[1]->name(), "test");
  EXPECT_EQ(RowsOf(splits.value()), expected + expected);
}

TEST(CompressedInput, CutDamagedOtherCompressionsBinaryFilesAndOtherFormatsAreRefusedByName) {
  TempDir dir;
  std::string table = "a,b,label\n";
  for (int i = 0; i < 20000; ++i) table += std::to_string(i) + "," + std::to_string(i * 7 % 13) + "," + std::to_string(i % 3) + "\n";
  const std::string gz = Gzip(table, dir.Sub("scratch.gz"));
  const std::string zst = Zstd(table);
  std::string damaged = gz;
  for (size_t i = 40; i < 60; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
  const std::pair<std::string, std::string> refused[] = {
      {gz.substr(0, gz.size() / 2), "the gzip data ends early"},
      {zst.substr(0, zst.size() / 2), "the zstd data ends early"},
      {damaged, "damaged gzip data"},
      {"BZh91AY&SY", "is bzip2-compressed: prep reads CSV text as it is, gzip or zstd; decompress it first (bunzip2 -k"},
      {"PAR1\x15\x04", "is a Parquet file"},
      {"PK\x03\x04\x14\x00", "is a zip archive: prep reads a folder or a table, not an archive; extract it first "
                               "(unzip " + dir.Sub("t.csv") + " -d DIR)"},
      {std::string(257, 'a') + "ustar\x00" + std::string(300, '\0'), "is a tar archive: prep reads a folder or a table"},
      {Gzip(std::string(257, 'a') + "ustar\x00" + std::string(300, '\0'), dir.Sub("scratch.gz")),
       "is a tar archive (gzip-compressed): prep reads a folder or a table, not an archive; extract it first (tar xf"},
      {std::string("\x7f" "ELF\x02\x01\x01\0\0\0", 10), "is not a text table (a NUL byte at byte 7)"},
      // Tables in other formats: named, with the pandas line that makes the CSV.
      {"PK\x03\x04\x14\x00" + std::string(24, '\x01') + "[Content_Types].xml....PK\x03\x04xl/workbook.xml",
       "is an Excel workbook: prep reads CSV text; save the sheet as CSV (pandas: pd.read_excel('" + dir.Sub("t.csv") +
           "').to_csv('table.csv', index=False)"},
      {"PK\x03\x04\x14\x00" + std::string(24, '\x01') + "mimetypeapplication/vnd.oasis.opendocument.spreadsheet",
       "is an OpenDocument spreadsheet"},
      {std::string("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1\0\0", 10), "is an Excel 97-2003 workbook"},
      {"{\"a\": 1, \"label\": 0}\n{\"a\": 2, \"label\": 1}\n",
       "is JSON Lines (an object a line), not CSV: prep reads CSV text; convert it (pandas: pd.read_json('" +
           dir.Sub("t.csv") + "', lines=True).to_csv('table.csv', index=False)), or write its records from Python "
           "with granary.write"},
      {"  [{\"a\": 1, \"label\": 0}]", "is JSON, not CSV"},
      // Array and data files of other tools (a --labels table is read by the same reader).
      {std::string("\x93NUMPY\x01\x00\x46\x00", 10) + "{'descr': '<i8', 'fortran_order': False, 'shape': (8189,), }",
       "is a NumPy array (dtype '<i8', shape (8189,)): prep reads CSV text; write it as CSV (pandas: "
       "pd.DataFrame(np.load('" + dir.Sub("t.csv") + "')).to_csv('table.csv', index=False))"},
      {"MATLAB 5.0 MAT-file, Platform: posix, Created on: Thu Feb 19 15:43:33 2009" + std::string(60, ' '),
       "is a MATLAB file (.mat): prep reads CSV text; read it with scipy.io.loadmat('" + dir.Sub("t.csv") + "')"},
      {std::string("\x89HDF\r\n\x1a\n\0\0", 10), "is an HDF5 file: prep reads CSV text; read it with h5py"},
      {std::string("ARROW1\0\0", 8), "is an Arrow (Feather) file"},
      {std::string("\x80\x04\x95\x00\x00", 5), "is a Python pickle: prep reads CSV text"}};
  for (const auto& [bytes, message] : refused) {
    testing::WriteFile(dir.Sub("t.csv"), bytes);
    auto s = OpenCsvSource(dir.Sub("t.csv"), CsvOptions());
    ASSERT_FALSE(s.ok()) << message;
    EXPECT_NE(s.status().message().find(dir.Sub("t.csv") + ": " + message), std::string::npos) << s.status().ToString();
  }
  // No room for the copy: the temporary directory is named, with the way out.
  testing::WriteFile(dir.Sub("t.csv"), gz);
  CsvOptions no_room;
  no_room.temp_dir = dir.Sub("nonexistent");
  auto s = OpenCsvSource(dir.Sub("t.csv"), no_room);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(dir.Sub("nonexistent") + ": create a temporary file (set TMPDIR"),
            std::string::npos)
      << s.status().ToString();
}

// An empty folder is named as one, not taken for an IDX folder without its files.
TEST(OpenSource, AnEmptyFolderIsNamedAsOne) {
  TempDir dir;
  RawOptions raw;
  raw.raw = dir.path();
  EXPECT_EQ(OpenSource(raw).status().message(), dir.path() + ": the folder is empty (prep reads an IDX folder, a CIFAR "
                                                             "folder, an image folder of <class>/ folders, or a CSV "
                                                             "table)");
}

// A folder of tables in other formats is named as such; one of TSV tables is read as a CSV folder is.
TEST(OpenSource, AFolderOfTablesInAnotherFormatIsNamedAndTsvIsRead) {
  TempDir dir;
  testing::WriteFile(dir.Sub("train.jsonl"), "{\"a\": 1, \"label\": 0}\n");
  testing::WriteFile(dir.Sub("Test.JSONL"), "{\"a\": 1, \"label\": 0}\n");
  RawOptions raw;
  raw.raw = dir.path();
  EXPECT_EQ(OpenSource(raw).status().message(),
            dir.path() + ": it holds Test.JSONL, train.jsonl: tables of a format prep does not read (it reads CSV: a "
                         "folder's train.csv, val.csv, test.csv, or one table by its path); convert them to CSV "
                         "(pandas: df.to_csv('train.csv', index=False)), or write them from Python with granary.write");
  TempDir tsv;
  std::string table = "a\tb\tlabel\n";
  for (int i = 0; i < 30; ++i) {
    table += std::to_string(i) + "\t" + std::to_string(i * 2) + "\t" + std::to_string(i % 2) + "\n";
  }
  testing::WriteFile(tsv.Sub("train.tsv"), table);
  testing::WriteFile(tsv.Sub("test.tsv"), table);
  raw.raw = tsv.path();
  StatusOr<Source> source = OpenSource(raw);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->info.kind, "csv");
  ASSERT_EQ(source->splits.size(), 2u);
  EXPECT_EQ(source->splits[1]->name(), "test");
  EXPECT_EQ(source->splits[0]->size(), 30u);
}

// RAW spelt as no local path can be (a URL, an unexpanded '~', a pasted space), or one image: said so.
TEST(OpenSource, ARawThatIsAUrlATildeOrOneImageIsNamedSo) {
  TempDir dir;
  testing::WriteFile(dir.Sub("cat.jpg"), "\xff\xd8\xff");
  const std::pair<std::string, std::string> named[] = {
      {"https://example.com/train.csv", "https://example.com/train.csv: is a URL: prep reads local files and "
                                        "folders; download it first (curl -LO https://example.com/train.csv)"},
      {"s3://bucket/photos", "s3://bucket/photos: is a URL: prep reads local files and folders; download it first "
                             "(gsutil cp, aws s3 cp or the like)"},
      {"~/photos", "~/photos: no such folder (a '~' no shell expanded, as inside quotes: $HOME/photos is meant?)"},
      {dir.Sub("cat.jpg "), dir.Sub("cat.jpg ") + ": no such folder (the name has a space at its start or end"},
      {dir.Sub("cat.jpg"), dir.Sub("cat.jpg") + ": is an image: prep builds a db from a folder of them"},
      {dir.Sub("nothing"), dir.Sub("nothing") + ": no such folder"}};
  for (const auto& [raw, message] : named) {
    RawOptions options;
    options.raw = raw;
    const Status status = OpenSource(options).status();
    EXPECT_EQ(status.message().rfind(message, 0), 0u) << status.ToString();
  }
}

TEST(OpenSource, ADatasetOfOneClassIsNoted) {
  TempDir dir;
  testing::WriteFile(dir.Sub("one.csv"), "a,label\n1,0\n2,0\n3,0\n");
  testing::WriteFile(dir.Sub("two.csv"), "a,label\n1,0\n2,1\n3,0\n");
  RawOptions raw;
  raw.raw = dir.Sub("one.csv");
  StatusOr<Source> one = OpenSource(raw);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  const std::string note = "every sample has the one class '0' (one label value): a classifier needs two or more, "
                           "and train refuses a db of one class";
  EXPECT_NE(std::find(one->info.notes.begin(), one->info.notes.end(), note), one->info.notes.end());
  raw.raw = dir.Sub("two.csv");
  StatusOr<Source> two = OpenSource(raw);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  for (const std::string& n : two->info.notes) EXPECT_EQ(n.find("one class"), std::string::npos) << n;
}

}  // namespace
}  // namespace granary
