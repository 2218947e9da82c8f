// granary._native: the C++ reader and prefetching loader for Python
// (python/granary/data.py wraps them). Arrays come back as numpy arrays;
// the Python side makes torch tensors of them with torch.from_numpy, which
// shares their memory. The GIL is released while granary reads or waits.
//
// A loader batch is handed over without copying: its arrays point into the
// loader's Batch buffers, and the Batch goes back to a pool for the loader to
// refill once Python has dropped both arrays.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "python/native_common.h"
#include "python/native_table.h"
#include "python/native_writer.h"
#include "loader/augment.h"
#include "loader/class_counts.h"
#include "loader/fields.h"
#include "loader/loader.h"
#include "loader/sampler.h"
#include "preprocess/image.h"
#include "preprocess/sample_writer.h"
#include "store/db.h"
#include "store/schema.h"

namespace py = pybind11;

namespace granary {
namespace {

// granary.Loader's and Dataset's names for the field choices.
constexpr FieldChoiceNames kPythonFieldNames = {"input_field", "target_field"};


const char* ErrorClassName(Status::Code code) {
  switch (code) {
    case Status::Code::kInvalidArgument:
      return "InvalidArgumentError";
    case Status::Code::kNotFound:
      return "NotFoundError";
    case Status::Code::kCorruption:
      return "CorruptionError";
    case Status::Code::kIOError:
      return "ReadError";
    case Status::Code::kFailedPrecondition:
      return "FormatError";
    default:
      return "Error";
  }
}

py::dtype NumpyDType(DType dtype) {
  return VisitDType(dtype, [](auto tag) { return py::dtype::of<decltype(tag)>(); });
}

std::vector<py::ssize_t> ToDims(const Shape& shape) { return std::vector<py::ssize_t>(shape.begin(), shape.end()); }

std::shared_ptr<DbReader> OpenDb(const std::string& path) {
  StatusOr<std::unique_ptr<DbReader>> db = [&] {
    py::gil_scoped_release unlocked;
    return DbReader::Open(path);
  }();
  return std::shared_ptr<DbReader>(ValueOrThrow(std::move(db)));
}

// The samples of each class of `split` (granary.class_counts); the db's
// label must be classes, not a number to predict.
std::vector<uint64_t> CountClasses(const std::string& path, const std::string& split) {
  const std::shared_ptr<DbReader> db = OpenDb(path);
  const Manifest& m = db->manifest();
  const int label = m.schema.FieldIndex(m.label_field);
  if (label < 0 || IsFloatDType(m.schema.fields[label].dtype)) {
    ThrowIfError(Status::InvalidArgument(
        path + ": " + (label < 0 ? "has no label field: no classes to count"
                                 : "its label '" + m.label_field + "' is a number to predict: it has no classes")));
  }
  if (m.FindSplit(split) == nullptr) ThrowIfError(NoSuchSplit(m, path, split));
  StatusOr<std::vector<uint64_t>> counts = [&] {
    py::gil_scoped_release unlocked;
    return ClassCounts(*db, split, m.label_field, m.num_classes, /*skip_corrupt=*/false);
  }();
  return ValueOrThrow(std::move(counts));
}

// One split's samples by index, each field copied into its own array (the
// reader's buffers are reused by the next read). One per process: LMDB
// handles must not cross fork(), so Dataset opens one in each worker.
class SplitHandle {
 public:
  SplitHandle(const std::string& path, const std::string& split)
      : db_(OpenDb(path)), reader_(ValueOrThrow(SplitReader::Create(*db_, split))) {}

  size_t size() const { return reader_->size(); }
  const std::string& content_hash() const { return db_->manifest().content_hash; }

  py::dict Read(int64_t index) {
    if (index < 0 || static_cast<uint64_t>(index) >= reader_->size()) {
      throw py::index_error("sample " + std::to_string(index) + " of split '" + reader_->split() + "' (" +
                            std::to_string(reader_->size()) + " samples)");
    }
    // Read and copy out with the GIL released; the lock orders threads that
    // share this handle (the reader keeps one record's buffers).
    std::vector<std::string> bytes;
    std::vector<Shape> shapes;
    Status read;
    {
      py::gil_scoped_release unlocked;
      MutexLock one_reader(&mutex_);
      const FieldView* fields = nullptr;
      read = reader_->Read(static_cast<uint64_t>(index), &fields);
      for (size_t f = 0; read.ok() && f < db_->schema().fields.size(); ++f) {
        bytes.emplace_back(reinterpret_cast<const char*>(fields[f].data), fields[f].bytes);
        shapes.push_back(fields[f].shape);
      }
    }
    ThrowIfError(read);
    py::dict sample;
    const Schema& schema = db_->schema();
    for (size_t f = 0; f < schema.fields.size(); ++f) {
      py::array array(NumpyDType(schema.fields[f].dtype), ToDims(shapes[f]));
      if (static_cast<size_t>(array.nbytes()) != bytes[f].size()) {  // the decoder checks this; never trust it blindly
        ThrowIfError(Status::Corruption(db_->path() + ": split '" + reader_->split() + "', sample " +
                                        std::to_string(index) + ": field '" + schema.fields[f].name +
                                        "' holds " + std::to_string(bytes[f].size()) + " bytes, not its shape's"));
      }
      std::memcpy(array.mutable_data(), bytes[f].data(), bytes[f].size());
      sample[OsStr(schema.fields[f].name)] = std::move(array);
    }
    return sample;
  }

 private:
  std::shared_ptr<DbReader> db_;
  std::unique_ptr<SplitReader> reader_;
  Mutex mutex_;  // one Read at a time: the reader keeps one record's buffers
};

// Batches whose arrays Python has dropped, for the loader to fill again.
class BatchPool {
 public:
  std::unique_ptr<Batch> Take() {
    MutexLock lock(&mutex_);
    if (free_.empty()) return std::make_unique<Batch>();
    std::unique_ptr<Batch> b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void Give(Batch* b) {
    MutexLock lock(&mutex_);
    free_.emplace_back(b);
  }

 private:
  Mutex mutex_;
  std::vector<std::unique_ptr<Batch>> free_ GRANARY_GUARDED_BY(mutex_);
};

// An array over `data` whose base keeps `owner` (and so the Batch) alive.
py::array ArrayOver(const py::dtype& dtype, const std::vector<py::ssize_t>& dims, const void* data,
                    const std::shared_ptr<Batch>& owner) {
  auto* keep = new std::shared_ptr<Batch>(owner);
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Batch>*>(p); });
  return py::array(dtype, dims, {}, data, base);
}

// What granary.describe tells of a db: its splits, fields, classes and
// build, and the fields a model reads by the shared rule (loader/fields.h;
// None where the rule needs a name).
py::dict Describe(const std::string& path) {
  const std::shared_ptr<DbReader> db = OpenDb(path);
  const Manifest& m = db->manifest();
  py::dict d;
  d["path"] = OsStr(path);
  d["format_version"] = m.format_version;
  d["builder"] = m.builder;
  d["created_utc"] = m.created_utc;
  d["content_hash"] = m.content_hash;
  py::list splits, fields;
  for (const SplitInfo& split : m.splits) {
    py::dict s;
    s["name"] = OsStr(split.name);
    s["samples"] = split.count;
    s["shards"] = split.shards.size();
    splits.append(s);
  }
  for (const FieldSpec& field : m.schema.fields) {
    py::dict f;
    f["name"] = OsStr(field.name);
    f["dtype"] = DTypeName(field.dtype);
    f["shape"] = field.shape;
    f["layout"] = field.layout;
    fields.append(f);
  }
  d["splits"] = splits;
  d["fields"] = fields;
  d["label_field"] = m.label_field.empty() ? py::object(py::none()) : py::object(OsStr(m.label_field));
  d["num_classes"] = m.num_classes;
  d["classes"] = OsStrs(m.class_names);
  StatusOr<BatchFields> chosen = ChooseBatchFields(m, path);
  d["input_field"] = chosen.ok() ? py::object(OsStr(chosen->input)) : py::object(py::none());
  d["target_field"] = chosen.ok() ? py::object(OsStr(chosen->target)) : py::object(py::none());
  d["input_shape"] = chosen.ok() ? py::object(py::cast(BatchedShape(m.schema.fields[m.schema.FieldIndex(chosen->input)])))
                                 : py::object(py::none());
  d["codec"] = m.codec;
  d["zstd_level"] = m.zstd_level;
  d["source"] = py::make_tuple(m.source_kind, OsStr(m.source_path));
  d["build_options"] = m.build_options;
  d["rejected"] = m.rejected.size();
  py::dict statistics;  // split -> field -> per-element lists (NaN where no value is present)
  for (const auto& [split, by_field] : m.statistics) {
    py::dict fs;
    for (const auto& [field, f] : by_field) {
      py::dict one;
      one["samples"] = f.samples;
      one["missing"] = f.missing;
      one["mean"] = f.mean;
      one["std"] = f.stddev;
      one["min"] = f.min;
      one["max"] = f.max;
      fs[OsStr(field)] = one;
    }
    statistics[OsStr(split)] = fs;
  }
  d["statistics"] = statistics;
  py::dict class_counts;  // split -> samples of each class, as the build counted them
  for (const auto& [split, counts] : m.class_counts) class_counts[OsStr(split)] = counts;
  d["class_counts"] = class_counts;
  return d;
}

struct LoaderArgs {
  std::string input_field, target_field;  // "" for the shared rule (loader/fields.h)
  std::string split;
  size_t batch_size;
  int rank, world;
  uint64_t seed;
  int threads, prefetch;
  std::string augment, shuffle;
  std::vector<float> mean, stddev;
  bool channels_last, drop_last;
};

// A loader's threads do not survive fork(): a handle used in a forked child
// refuses with one line, and one destroyed there is left alone (joining
// threads that exist only in the parent would hang or abort); granary.Loader
// opens a new one in the child.
class LoaderHandle {
 public:
  ~LoaderHandle() {
    if (::getpid() == owner_) return;
    (void)loader_.release();                                      // leaked in the child, on purpose
    (void)new std::shared_ptr<DbReader>(std::move(db_));          // likewise: its LMDB handles are the parent's
  }
  LoaderHandle(const LoaderHandle&) = delete;
  LoaderHandle& operator=(const LoaderHandle&) = delete;

  LoaderHandle(const std::string& path, const LoaderArgs& a) : db_(OpenDb(path)) {
    LoaderOptions o;
    o.split = a.split;
    o.batch_size = a.batch_size;
    o.sampler.rank = a.rank;
    o.sampler.world = a.world;
    o.sampler.seed = a.seed;
    o.sampler.drop_last = a.drop_last;
    o.sampler.mode = ValueOrThrow(ParseShuffleMode(a.shuffle));
    o.threads = a.threads;
    o.prefetch = a.prefetch;
    o.augment = ValueOrThrow(ParseAugment(a.augment));
    o.channels_last = a.channels_last;
    const Schema& schema = db_->schema();
    const BatchFields fields =
        ValueOrThrow(ChooseBatchFields(db_->manifest(), path, a.input_field, a.target_field, kPythonFieldNames));
    o.input_field = fields.input;
    o.target_field = fields.target;
    const FieldSpec& field = schema.fields[schema.FieldIndex(o.input_field)];
    o.scale = field.dtype == DType::kUInt8 ? 1.0f / 255.0f : 1.0f;
    if (a.mean.empty() && a.stddev.empty()) {  // normalize=True: ImageNet's for RGB images, else 0.5 / 0.5
      const bool rgb = field.shape.size() == 3 && field.shape[field.layout == "HWC" ? 2 : 0] == 3;
      o.channel_mean = rgb ? kImageNetMean : std::vector<float>{};
      o.channel_std = rgb ? kImageNetStd : std::vector<float>{};
      o.mean = rgb ? 0.0f : 0.5f;
      o.stddev = rgb ? 1.0f : 0.5f;
    } else if (a.mean.size() == 1 && a.stddev.size() == 1) {
      o.mean = a.mean[0];
      o.stddev = a.stddev[0];
    } else {
      o.channel_mean = a.mean;
      o.channel_std = a.stddev;
    }
    StatusOr<std::unique_ptr<Loader>> loader = [&] {
      py::gil_scoped_release unlocked;
      return Loader::Create(*db_, o);
    }();
    loader_ = ValueOrThrow(std::move(loader));
  }

  void Start(uint64_t epoch, uint64_t position) {
    CheckSameProcess();
    const Sampler& sampler = loader_->sampler();
    if (position > sampler.dataset_size()) {
      ThrowIfError(Status::InvalidArgument("position " + std::to_string(position) + " is past the epoch's " +
                                           std::to_string(sampler.dataset_size()) + " samples"));
    }
    py::gil_scoped_release unlocked;
    MutexLock one_consumer(&consumer_);
    loader_->StartEpoch(epoch, position);
  }

  // (input, target) arrays of the next batch, or None at the end of the epoch.
  py::object Next() {
    CheckSameProcess();
    std::unique_ptr<Batch> batch = pool_->Take();
    StatusOr<bool> more = [&] {
      py::gil_scoped_release unlocked;
      MutexLock one_consumer(&consumer_);
      return loader_->Next(batch.get());
    }();
    if (!ValueOrThrow(std::move(more))) {
      pool_->Give(batch.release());
      return py::none();
    }
    std::weak_ptr<BatchPool> pool = pool_;
    std::shared_ptr<Batch> owner(batch.release(), [pool](Batch* b) {
      if (auto p = pool.lock()) {
        p->Give(b);
      } else {
        delete b;
      }
    });
    py::array input = ArrayOver(py::dtype::of<float>(), ToDims(owner->input_shape), owner->input.data(), owner);
    const py::ssize_t size = static_cast<py::ssize_t>(owner->size);
    py::array target = owner->value_target
                           ? ArrayOver(py::dtype::of<float>(), {size}, owner->target_values.data(), owner)
                           : ArrayOver(py::dtype::of<int64_t>(), {size}, owner->target.data(), owner);
    return py::make_tuple(std::move(input), std::move(target));
  }

  const std::string& content_hash() const { return db_->manifest().content_hash; }

  py::tuple State() {
    CheckSameProcess();
    const LoaderState s = [&] {
      py::gil_scoped_release unlocked;
      MutexLock one_consumer(&consumer_);
      return loader_->state();
    }();
    return py::make_tuple(s.epoch, s.position);
  }

  py::dict Plan(uint64_t position) const {
    CheckSameProcess();
    const Sampler& s = loader_->sampler();
    py::dict d;
    d["samples"] = s.dataset_size();
    d["samples_per_rank"] = s.samples_per_rank(position);
    d["padded"] = s.padded(position);
    d["dropped"] = s.dropped(position);
    return d;
  }

  uint64_t BatchesPerEpoch() const {
    CheckSameProcess();
    return loader_->batches_per_epoch();
  }

  py::dict Stats() const {
    CheckSameProcess();
    const LoaderStats s = loader_->stats();
    py::dict d;
    d["batches"] = s.batches;
    d["wait_seconds"] = s.wait_seconds;
    d["mean_queue_depth"] = s.mean_queue_depth();
    return d;
  }

 private:
  void CheckSameProcess() const {
    if (::getpid() == owner_) return;
    ThrowIfError(Status::Busy("granary.Loader: made in process " + std::to_string(owner_) + ", used in process " +
                              std::to_string(::getpid()) + " after fork(); its threads stayed in the parent: "
                              "create the Loader in the process that iterates it"));
  }

  const pid_t owner_ = ::getpid();
  std::shared_ptr<DbReader> db_;
  std::unique_ptr<Loader> loader_;
  std::shared_ptr<BatchPool> pool_ = std::make_shared<BatchPool>();
  // The C++ loader has one consumer; Python threads sharing a Loader take
  // turns (each takes the lock with the GIL released, so neither waits on
  // the other's GIL).
  Mutex consumer_;
};

}  // namespace
}  // namespace granary

PYBIND11_MODULE(_native, m) {
  using namespace granary;
  m.doc() = "granary's C++ reader and loader (use the granary package, not this module)";
  py::module_::import("granary.errors");  // fail at import, not at the first error
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      const char* name = e.python_class != nullptr ? e.python_class : ErrorClassName(e.status.code());
      py::object cls = py::module_::import("granary.errors").attr(name);
      PyErr_SetObject(cls.ptr(), OsStr(e.status.message()).ptr());
    }
  });

  m.def("describe", &Describe, py::arg("path"));
  m.def("loader_bounds", [] {  // loader/loader.h's, for granary.Loader's checks
    py::dict d;
    d["threads"] = kLoaderThreadsPerCore * UsableCpuCount();
    d["prefetch"] = kMaxLoaderPrefetch;
    d["batch_size"] = kMaxLoaderBatch;
    return d;
  });
  m.def("oom_kills", [] {  // base/machine.h's counts: a worker killed for memory is said so
    const OomKills kills = CountOomKills();
    return py::make_tuple(kills.cgroup, kills.machine, MemoryLimitBytes());
  });
  // Samples per class of a split, and the balanced weights: loader/class_counts.h.
  m.def("class_counts", &CountClasses, py::arg("path"), py::arg("split") = "train");
  m.def("class_weights", [](const std::string& path, const std::string& split) {
    return BalancedWeights(CountClasses(path, split));
  }, py::arg("path"), py::arg("split") = "train");
  m.def("batch_fields", [](const std::string& path, const std::string& input_field, const std::string& target_field) {
    const BatchFields f = ValueOrThrow(
        ChooseBatchFields(OpenDb(path)->manifest(), path, input_field, target_field, kPythonFieldNames));
    return py::make_tuple(OsStr(f.input), OsStr(f.target));
  }, py::arg("path"), py::arg("input_field") = "", py::arg("target_field") = "");

  // An image file's bytes decoded, resized and centre-cropped as prep build
  // stores an image folder's images: H x W x C uint8 (granary.load_image).
  m.def("decode_image", [](const py::bytes& data, int width, int height, int channels, uint64_t max_mb) {
    const std::string bytes = data;
    ImageTransform transform{width, height, channels, max_mb << 20};
    Image image;
    Status decoded;
    {
      py::gil_scoped_release release;
      decoded = DecodeImage(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), transform, &image);
    }
    ThrowIfError(decoded);
    py::array_t<uint8_t> out({image.height, image.width, image.channels});
    std::memcpy(out.mutable_data(), image.pixels.data(), image.pixels.size());
    return out;
  }, py::arg("data"), py::arg("width"), py::arg("height"), py::arg("channels"), py::arg("max_mb") = 256);

  DefineWriter(m);
  DefineTable(m);

  py::class_<SplitHandle>(m, "Split")
      .def(py::init<const std::string&, const std::string&>(), py::arg("path"), py::arg("split"))
      .def("__len__", &SplitHandle::size)
      .def_property_readonly("content_hash", &SplitHandle::content_hash)
      .def("read", &SplitHandle::Read, py::arg("index"));

  py::class_<LoaderHandle>(m, "Loader")
      .def(py::init([](const std::string& path, const std::string& split, size_t batch_size, int rank, int world,
                       uint64_t seed, int threads, int prefetch, const std::string& augment, const std::string& shuffle,
                       std::vector<float> mean, std::vector<float> stddev, bool channels_last, bool drop_last,
                       const std::string& input_field, const std::string& target_field) {
             return std::make_unique<LoaderHandle>(
                 path, LoaderArgs{input_field, target_field, split, batch_size, rank, world, seed, threads, prefetch,
                                  augment, shuffle, std::move(mean), std::move(stddev), channels_last, drop_last});
           }),
           py::arg("path"), py::arg("split"), py::arg("batch_size"), py::arg("rank"), py::arg("world"), py::arg("seed"),
           py::arg("threads"), py::arg("prefetch"), py::arg("augment"), py::arg("shuffle"), py::arg("mean"),
           py::arg("std"), py::arg("channels_last"), py::arg("drop_last"), py::arg("input_field") = "",
           py::arg("target_field") = "")
      .def("start", &LoaderHandle::Start, py::arg("epoch"), py::arg("position"))
      .def("next", &LoaderHandle::Next)
      .def_property_readonly("content_hash", [](const LoaderHandle& l) { return l.content_hash(); })
      .def("state", &LoaderHandle::State)
      .def("plan", &LoaderHandle::Plan, py::arg("position"))
      .def("batches_per_epoch", &LoaderHandle::BatchesPerEpoch)
      .def("stats", &LoaderHandle::Stats);
}
