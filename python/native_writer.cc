#include "python/native_writer.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "preprocess/sample_writer.h"
#include "python/native_common.h"
#include "store/db_writer.h"
#include "store/schema.h"

namespace granary {
namespace {

// A failed Status of the writer: FailedPrecondition is the write's state
// (a resume refused, a db in the way), not a db's format as for readers; an
// IOError is what the system refused the write (no permission, a full disk).
void ThrowIfWriteError(const Status& s) {
  if (s.code() == Status::Code::kFailedPrecondition) throw StatusError{s, "FailedPreconditionError"};
  if (s.code() == Status::Code::kIOError) throw StatusError{s, "WriteError"};
  ThrowIfError(s);
}

// granary.Writer's C++ side (python/granary/writer.py checks and converts the
// user's samples): a SampleWriter fed column by column. A column is a field's
// values for the samples of one add(): one C-contiguous array of N x its
// shape for a fixed-shape field, or a list of N arrays for a field whose
// shape varies. Copied into the writer's samples with the GIL held; encoded,
// compressed and written with it released.
class WriterHandle {
 public:
  WriterHandle(const std::string& path, const std::vector<std::tuple<std::string, std::string, Shape, std::string>>& fields,
               int zstd_level, const std::string& dictionary, int threads, bool overwrite, const std::string& source,
               const std::map<std::string, std::string>& options, bool resume, const std::string& fingerprint,
               uint64_t expected_samples) {
    SampleWriterOptions o;
    o.db_path = path;
    for (const auto& [name, dtype, shape, layout] : fields) {
      o.schema.fields.push_back({name, ValueOrThrow(ParseDType(dtype)), shape, layout});
    }
    o.zstd_level = zstd_level;
    if (dictionary != "auto" && dictionary != "on" && dictionary != "off") {
      ThrowIfError(Status::InvalidArgument("dictionary must be 'auto', 'on' or 'off', not '" + dictionary + "'"));
    }
    o.dictionary = dictionary == "on" ? DictionaryMode::kOn : dictionary == "off" ? DictionaryMode::kOff
                                                                                 : DictionaryMode::kAuto;
    o.threads = threads;
    o.overwrite = overwrite;
    o.source_path = source;
    o.options = options;
    o.resume = resume;
    o.fingerprint = fingerprint;
    o.expected_samples = expected_samples;
    StatusOr<std::unique_ptr<SampleWriter>> writer = [&] {
      py::gil_scoped_release unlocked;
      return SampleWriter::Create(o);
    }();
    ThrowIfWriteError(writer.status());
    writer_ = std::move(writer).value();
    schema_ = o.schema;
  }

  // Where a resumed write continues (SampleWriterResume), or None.
  py::object Resumed() const {
    const SampleWriterResume& r = writer_->resumed();
    if (!r.resuming) return py::none();
    py::list finished;
    for (const auto& [name, samples] : r.finished) finished.append(py::make_tuple(OsStr(name), samples));
    py::dict d;
    d["finished"] = finished;
    d["split"] = py::none();
    if (!r.split.empty()) d["split"] = OsStr(r.split);
    d["samples"] = r.samples;
    d["state"] = r.caller_state;
    return std::move(d);
  }

  void SetState(const std::string& state) { writer_->SetCallerState(state); }

  void BeginSplit(const std::string& name, uint64_t expected) {
    ThrowIfWriteError(writer_->BeginSplit(name, expected));
  }

  void Add(const py::list& columns) {
    if (columns.size() != schema_.fields.size()) {
      ThrowIfError(Status::InvalidArgument(std::to_string(columns.size()) + " columns for " +
                                           std::to_string(schema_.fields.size()) + " fields"));
    }
    std::vector<Sample> samples;
    for (size_t f = 0; f < schema_.fields.size(); ++f) AddColumn(f, columns[f], &samples);
    py::gil_scoped_release unlocked;
    ThrowIfWriteError(writer_->Add(std::move(samples)));
  }

  std::string TakeDiskWarning() { return writer_->TakeDiskWarning(); }

  void EndSplit() {
    py::gil_scoped_release unlocked;
    ThrowIfWriteError(writer_->EndSplit());
  }

  py::dict Finish(const std::string& label_field, int64_t num_classes, const std::vector<std::string>& class_names,
                  const std::vector<std::string>& notes) {
    StatusOr<SampleWriterSummary> done = [&] {
      py::gil_scoped_release unlocked;
      return writer_->Finish({label_field, num_classes, class_names, notes});
    }();
    ThrowIfWriteError(done.status());
    const SampleWriterSummary s = std::move(done).value();
    py::dict d;
    py::list splits;
    for (const SplitSummary& split : s.splits) splits.append(py::make_tuple(OsStr(split.name), split.written));
    d["splits"] = splits;
    d["payload_bytes"] = s.payload_bytes;
    d["stored_bytes"] = s.stored_bytes;
    d["dictionary_bytes"] = s.dictionary_bytes;
    d["dictionary"] = s.dictionary_note;
    d["content_hash"] = s.content_hash;
    d["seconds"] = s.seconds;
    d["threads"] = s.threads;
    d["notes"] = s.notes;
    return d;
  }

 private:
  // Field f of each sample from `column` (samples made on the first column).
  void AddColumn(size_t f, const py::handle& column, std::vector<Sample>* samples) {
    const FieldSpec& field = schema_.fields[f];
    const size_t item = DTypeBytes(field.dtype);
    auto take = [&](size_t k, const char* data, size_t bytes, Shape shape) {
      if (f == 0) samples->emplace_back();
      if (k >= samples->size()) {
        ThrowIfError(Status::InvalidArgument("field '" + field.name + "': more values than the first field's"));
      }
      Sample& s = (*samples)[k];
      s.fields.resize(schema_.fields.size());
      s.shapes.resize(schema_.fields.size());
      s.fields[f].assign(data, bytes);
      s.shapes[f] = std::move(shape);
    };
    size_t n = 0;
    if (field.HasVariableDims()) {
      for (const py::handle& value : py::reinterpret_borrow<py::list>(column)) {
        auto a = py::array::ensure(value, py::array::c_style);
        if (!a || !IsOf(a, field.dtype)) {
          ThrowIfError(Status::InvalidArgument("field '" + field.name + "': not an array of " + DTypeName(field.dtype)));
        }
        take(n++, static_cast<const char*>(a.data()), static_cast<size_t>(a.nbytes()), Shape(a.shape(), a.shape() + a.ndim()));
      }
    } else {
      auto a = py::array::ensure(column, py::array::c_style);
      const size_t row = item * static_cast<size_t>(field.FixedElements());
      if (!a || a.ndim() < 1 || !IsOf(a, field.dtype) ||
          static_cast<size_t>(a.nbytes()) != row * static_cast<size_t>(a.shape(0))) {
        ThrowIfError(Status::InvalidArgument("field '" + field.name + "': not an N x " + ShapeToString(field.shape) +
                                             " array of " + DTypeName(field.dtype)));
      }
      const char* data = static_cast<const char*>(a.data());
      for (py::ssize_t k = 0; k < a.shape(0); ++k) take(n++, data + k * row, row, {});
    }
    if (n != samples->size()) {
      ThrowIfError(Status::InvalidArgument("field '" + field.name + "': " + std::to_string(n) + " values for " +
                                           std::to_string(samples->size()) + " samples"));
    }
  }

  // Whether `a` holds values of `dtype` (Python converts them; checked again here).
  static bool IsOf(const py::array& a, DType dtype) {
    const char kind = VisitDType(dtype, [](auto tag) {
      using T = decltype(tag);
      return std::is_floating_point_v<T> ? 'f' : std::is_signed_v<T> ? 'i' : 'u';
    });
    return a.dtype().kind() == kind && static_cast<size_t>(a.itemsize()) == DTypeBytes(dtype);
  }

  Schema schema_;
  std::unique_ptr<SampleWriter> writer_;
};
}  // namespace

void DefineWriter(py::module_& m) {
  // For granary.write's worker processes: killed when the process that forked
  // them dies (the pool's pipes would keep them waiting for ever, holding
  // the db's build lock), or at once if it already has.
  m.def("die_with_parent", [](int parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(128 + SIGKILL);
  }, py::arg("parent"));
  m.def("resumable", [](const std::string& path) { return HasResumableBuild(path); }, py::arg("path"));
  py::class_<WriterHandle>(m, "Writer")
      .def(py::init<const std::string&, const std::vector<std::tuple<std::string, std::string, Shape, std::string>>&,
                    int, const std::string&, int, bool, const std::string&, const std::map<std::string, std::string>&,
                    bool, const std::string&, uint64_t>(),
           py::arg("path"), py::arg("fields"), py::arg("zstd_level"), py::arg("dictionary"), py::arg("threads"),
           py::arg("overwrite"), py::arg("source"), py::arg("options"), py::arg("resume") = false,
           py::arg("fingerprint") = "", py::arg("expected_samples") = 0)
      .def("resumed", &WriterHandle::Resumed)
      .def("set_state", &WriterHandle::SetState, py::arg("state"))
      .def("begin_split", &WriterHandle::BeginSplit, py::arg("name"), py::arg("expected") = 0)
      .def("add", &WriterHandle::Add, py::arg("columns"))
      .def("take_disk_warning", &WriterHandle::TakeDiskWarning)
      .def("end_split", &WriterHandle::EndSplit)
      .def("finish", &WriterHandle::Finish, py::arg("label_field"), py::arg("num_classes"), py::arg("class_names"),
           py::arg("notes"));
}

}  // namespace granary
