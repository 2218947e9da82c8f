#include "preprocess/csv_columns.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <set>

#include "base/names_text.h"
#include "preprocess/csv_layout.h"
#include "preprocess/folder_layout.h"
#include "preprocess/masks_and_boxes.h"

namespace granary {
namespace {

// Where most of a text column's values are sentences (three words or more:
// reviews, descriptions), what a user with such a table can do instead.
std::string FreeTextAdvice(const std::set<std::string>& values) {
  size_t sentences = 0;
  for (const std::string& v : values) sentences += std::count(v.begin(), v.end(), ' ') >= 2;
  if (2 * sentences <= values.size()) return "";
  return "; its values read as free text, and train has no model of text: write the rows from Python with "
         "granary.write (a str is a text field, read back as str) and tokenise it in your own script";
}

// Whether `v` starts with a date: 2021-03-04 (ISO 8601, a time after it or
// not), 2021/03/04, 04/03/2021 or 04.03.2021.
bool LooksLikeADate(const std::string& v) {
  const auto digits = [&](size_t at, size_t n) {
    if (at + n > v.size()) return false;
    for (size_t i = at; i < at + n; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(v[i]))) return false;
    }
    return true;
  };
  const auto mark = [&](size_t at) { return at < v.size() && (v[at] == '-' || v[at] == '/' || v[at] == '.'); };
  const bool year_first = digits(0, 4) && mark(4) && digits(5, 2) && mark(7) && digits(8, 2);
  const bool year_last = digits(0, 2) && mark(2) && digits(3, 2) && mark(5) && digits(6, 4);
  return (year_first || year_last) && (v.size() == 10 || v[10] == ' ' || v[10] == 'T');
}

// Where most of a text column's values are dates (sales, weather, logs),
// what to make of them.
std::string DateAdvice(const std::string& column, const std::set<std::string>& values) {
  const size_t dates = static_cast<size_t>(std::count_if(values.begin(), values.end(), LooksLikeADate));
  if (2 * dates <= values.size()) return "";
  return "; its values are dates, which a model takes better as numbers: derive them before prep (pandas: d = "
         "pd.to_datetime(df['" + column + "']); df['year'], df['month'], df['weekday'] = d.dt.year, d.dt.month, "
         "d.dt.weekday; then --drop " + column + ")";
}

// Rows of the first table whose values decide which columns are text.
constexpr uint64_t kSampledRows = 1000;

// Whether a column's name says it identifies its row: "id", "Id", "ID",
// "PassengerId", "customer_id", "CustomerID", "order-id".
bool NamedLikeAnId(const std::string& name) {
  if (name.size() < 2) return false;
  const std::string end = name.substr(name.size() - 2);
  if (name.size() == 2) return end == "id" || end == "Id" || end == "ID";
  const auto before = static_cast<unsigned char>(name[name.size() - 3]);
  return end == "Id" ? std::islower(before) || !std::isalnum(before)
         : end == "ID" ? !std::isupper(before)
                       : end == "id" && !std::isalnum(before);
}

// A note for each feature column named like an id whose sampled values (of
// `rows` rows) are distinct integers: a row id, which a model learns only
// noise from (Kaggle's Id, PassengerId), and which prep keeps (--drop leaves it out).
void NoteIdColumns(const std::map<size_t, std::set<std::string>>& ids, const std::vector<std::string>& header,
                   uint64_t rows, std::vector<std::string>* notes) {
  for (const auto& [c, values] : ids) {
    const bool integers = std::all_of(values.begin(), values.end(), [](const std::string& v) {
      return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
    });
    if (rows < 20 || values.size() != rows || !integers) continue;
    notes->push_back("column '" + header[c] + "' is named like an id and its values are distinct integers: a row id, "
                     "from which a model learns nothing but noise; kept as a feature (--drop " + header[c] +
                     " leaves it out)");
  }
}

// Parses a whole decimal or scientific number that float32 can hold; false if
// anything is left over, for hexadecimal ("0x1b", which strtod reads), and
// for inf, nan and values beyond float32's range (1e39 would be stored as
// inf, which "inf" itself is refused as).
bool ParseNumber(const std::string& v, double* out) {
  // Underflow gives 0 or a denormal, as float32 would.
  return ParseDecimal(v, out) && std::isfinite(*out) && std::fabs(*out) <= std::numeric_limits<float>::max();
}

// `v` with its one comma read as a decimal point ("1,5" -> "1.5"), for a
// message; as it is if it holds another number of commas.
std::string DecimalPoint(std::string v) {
  const size_t comma = v.find(',');
  if (comma != std::string::npos && v.find(',', comma + 1) == std::string::npos) v[comma] = '.';
  return v;
}

// Whether `v` is written with thousands separators: "1,234", "-12,345,678.5".
bool ThousandsSeparated(const std::string& v) {
  size_t i = v.empty() || (v[0] != '-' && v[0] != '+') ? 0 : 1;
  size_t digits = 0;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i, ++digits;
  if (digits < 1 || digits > 3 || i == v.size() || v[i] != ',') return false;
  while (i < v.size() && v[i] == ',') {
    if (i + 3 >= v.size()) return false;  // a comma and three digits
    for (size_t k = i + 1; k <= i + 3; ++k) {
      if (!std::isdigit(static_cast<unsigned char>(v[k]))) return false;
    }
    i += 4;
  }
  if (i == v.size()) return true;
  if (v[i] != '.' || i + 1 == v.size()) return false;
  for (++i; i < v.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(v[i]))) return false;
  }
  return true;
}

// Whether `v` is meant as a number, even one a feature cannot hold ("inf",
// "0x1b", "1e39", a decimal comma): a column of such values is no text, and
// each is refused with its reason.
bool MeantAsNumber(const std::string& v) {
  double x = 0;
  if (ParseNumber(DecimalPoint(v), &x) || ThousandsSeparated(v)) return true;
  char* end = nullptr;
  (void)std::strtod(v.c_str(), &end);
  return !v.empty() && end == v.c_str() + v.size();
}

// Why `v` (trimmed) is not a value of column `name`: a feature's, or (not
// `feature`) a regression target's.
Status NotANumber(const std::string& name, const std::string& v, bool feature = true) {
  // A quoted value may hold line ends: shown escaped, the reason stays one line.
  std::string shown;
  for (char ch : v) shown += ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : std::string(1, ch);
  const bool infinite = v.find("inf") != std::string::npos || v.find("Inf") != std::string::npos ||
                        v.find("INF") != std::string::npos;
  double x = 0;
  const bool thousands = ThousandsSeparated(v);
  const bool decimal_comma = !thousands && v.find(',') != std::string::npos && ParseNumber(DecimalPoint(v), &x);
  return Status::InvalidArgument(
      "column '" + name + "': '" + shown + "' is not a number float32 can hold" +
      (infinite && !feature ? " (a value to predict must be finite)"
       : infinite           ? " (features must be finite; --missing applies to empty, NA, N/A, NaN, null and ?)"
       : thousands          ? " (thousands separators, or a decimal comma: prep reads numbers written as "
                              "1234.5, with a decimal point and no separators)"
       : decimal_comma      ? " (a decimal comma, where this table's numbers are read with a decimal point: "
                              "--decimal comma reads commas)"
       : v.find_first_of("xX") != std::string::npos ? " (decimal numbers only, not hexadecimal)"
                                                    : ""));
}

// `on_value(table, line, column, value)` for each value present (trimmed,
// not missing) in columns `text` of every row of `tables` that has the
// header's field count (the others are rejected as they are read); its
// first error ends the walk.
Status ForEachTextValue(
    const std::vector<const CsvTable*>& tables, const std::vector<size_t>& text,
    const std::function<Status(const CsvTable&, uint64_t, size_t, const std::string&)>& on_value) {
  for (const CsvTable* table : tables) {
    if (text.empty()) break;
    GRANARY_RETURN_IF_ERROR(table->ForEachRow(CsvParser::kAllColumns, [&](const CsvParser::Row& row, int) -> Status {
      if (row.columns != table->header().size()) return Status::OK();
      for (size_t c : text) {
        const std::string v = TrimCsvField((*row.fields)[c]);
        if (!IsMissingCsvValue(v)) GRANARY_RETURN_IF_ERROR(on_value(*table, row.line, c, v));
      }
      return Status::OK();
    }));
  }
  return Status::OK();
}

}  // namespace

Status ParseCsvNumber(const std::string& column, const std::string& value, float* out, char decimal) {
  if (IsMissingCsvValue(value)) return Status::InvalidArgument("column '" + column + kMissingValue);
  double x = 0;
  if (!ParseNumber(decimal == ',' ? DecimalPoint(value) : value, &x)) {
    return NotANumber(column, value, /*feature=*/false);
  }
  *out = static_cast<float>(x);
  return Status::OK();
}

bool IsMissingCsvValue(const std::string& v) {
  return v.empty() || v == "NA" || v == "N/A" || v == "NaN" || v == "nan" || v == "null" || v == "NULL" || v == "?";
}

namespace {

// A text column whose every value names an image file ("im1.jpg"), or
// whose values name the images in a folder beside the table (Kaggle's ids):
// the table labels images (or their boxes) and holds no features: refused,
// saying how to build from the images; OK otherwise.
Status CheckNotImageNames(const std::string& path, const std::vector<std::string>& header, size_t c,
                          const std::set<std::string>& values) {
  const std::vector<std::string> first(values.begin(), std::next(values.begin(), std::min<size_t>(values.size(), 20)));
  const bool named = !values.empty() && std::all_of(values.begin(), values.end(), [](const std::string& v) {
    return HasImageExtension(v);
  });
  const std::string folder = FolderOfImagesNamed(path, first);
  if (!named && folder.empty()) return Status::OK();
  const std::string images = folder.empty() ? "IMAGES" : folder.substr(0, folder.size() - 1);
  const std::string boxes = BoxColumnsIn(header);
  return Status::InvalidArgument(
      path + ": column '" + header[c] + "' names " + (folder.empty() ? "image files" : "the images in " + folder) +
      " (" + NamesText(std::vector<std::string>(first.begin(), first.begin() + std::min<size_t>(first.size(), 3))) +
      "): a table that labels images, not one of features" +
      (boxes.empty() ? ": prep build " + images + " DB --labels " + path + " builds the images with their labels"
                     : ", a box a row (its columns " + boxes + "): a detection table. prep builds classification "
                       "dbs; write the images with their boxes with granary.write (README, \"Masks and boxes\")") +
      "; --drop " + header[c] + " reads the rest as features");
}

}  // namespace

StatusOr<CsvColumns> CsvColumns::Plan(const std::vector<const CsvTable*>& tables, size_t label_column,
                                      const std::vector<std::string>& drop, std::vector<std::string>* notes) {
  const CsvTable& first = *tables[0];
  const std::vector<std::string>& header = first.header();
  CsvColumns plan;
  plan.decimal_ = first.decimal();
  plan.columns_.resize(header.size());
  for (size_t c = 0; c < header.size(); ++c) plan.columns_[c].name = header[c];
  plan.columns_[label_column].kind = Kind::kLeftOut;
  const bool index_column = IsIndexColumn(header, 0) && label_column != 0;
  if (index_column) {
    plan.columns_[0].kind = Kind::kLeftOut;
    if (!first.row_names()) {  // else the table's note says what they are
      notes->push_back("column 1 has no name: the index pandas' to_csv writes (unless index=False), row numbers; "
                       "left out");
    }
  }
  for (const std::string& name : drop) {
    const auto at = std::find(header.begin(), header.end(), name);
    if (at == header.end() || static_cast<size_t>(at - header.begin()) == label_column) {
      return Status::InvalidArgument("--drop " + name + ": " +
                                     (at == header.end() ? "no such column in " + first.path() + " (its columns: " +
                                                               CsvHeaderText(header) + ")"
                                                         : "is the label column"));
    }
    plan.columns_[static_cast<size_t>(at - header.begin())].kind = Kind::kLeftOut;
  }
  // Text columns: most of their values in the first rows are no numbers.
  std::vector<uint64_t> numbers(header.size(), 0), texts(header.size(), 0);
  std::map<size_t, std::set<std::string>> ids;  // the values of the feature columns named like an id
  for (size_t c = 0; c < header.size(); ++c) {
    if (plan.columns_[c].kind == Kind::kNumber && NamedLikeAnId(header[c])) ids[c];
  }
  const int part = first.rows(0) > 0 ? 0 : 1;
  std::vector<std::string> fields;
  uint64_t sampled = 0;
  for (uint64_t r = 0; r < std::min(kSampledRows, first.rows(part)); ++r) {
    uint64_t line = 0;
    GRANARY_RETURN_IF_ERROR(first.ReadRow(part, r, &fields, &line));
    if (fields.size() != header.size()) continue;
    ++sampled;
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string v = TrimCsvField(fields[c]);
      if (!IsMissingCsvValue(v)) ++(MeantAsNumber(v) ? numbers : texts)[c];
      if (auto id = ids.find(c); id != ids.end()) id->second.insert(v);
    }
  }
  NoteIdColumns(ids, header, sampled, notes);
  std::vector<size_t> text;
  for (size_t c = 0; c < header.size(); ++c) {
    if (plan.columns_[c].kind == Kind::kNumber && texts[c] > numbers[c]) {
      plan.columns_[c].kind = Kind::kText;
      text.push_back(c);
    }
  }
  // Their categories, from every row of every table.
  std::vector<std::set<std::string>> values(header.size());
  GRANARY_RETURN_IF_ERROR(ForEachTextValue(
      tables, text, [&](const CsvTable& table, uint64_t line, size_t c, const std::string& v) -> Status {
        if (!values[c].insert(v).second || values[c].size() <= kMaxCategories) return Status::OK();
        return Status::InvalidArgument(table.path() + ":" + std::to_string(line) + ": column '" + header[c] +
                                       "' is text of over " + std::to_string(kMaxCategories) +
                                       " distinct values (an id, a name, free text?), too many to one-hot encode: "
                                       "--drop " + header[c] + " leaves it out" + DateAdvice(header[c], values[c]) +
                                       FreeTextAdvice(values[c]));
      }));
  std::vector<std::string> left_out;
  for (size_t c = 0; c < header.size(); ++c) {
    Column& column = plan.columns_[c];
    if (column.kind != Kind::kLeftOut) plan.order_.push_back(c);
    if (column.kind == Kind::kNumber) plan.names_.push_back(column.name);
    if (column.kind == Kind::kLeftOut && c != label_column && !(index_column && c == 0)) {
      left_out.push_back("'" + column.name + "'");
    }
    if (column.kind != Kind::kText) continue;
    GRANARY_RETURN_IF_ERROR(CheckNotImageNames(first.path(), header, c, values[c]));
    std::string shown;
    for (const std::string& v : values[c]) {
      column.categories.emplace(v, static_cast<uint32_t>(column.categories.size()));
      plan.names_.push_back(column.name + "=" + v);
      if (column.categories.size() <= 8) shown += (column.categories.size() > 1 ? ", " : "") + v;
    }
    notes->push_back("column '" + column.name + "' is text: one-hot encoded as " +
                     std::to_string(column.categories.size()) + " feature(s) (" + shown +
                     (column.categories.size() > 8 ? ", ..." : "") + "; --drop " + column.name + " leaves it out)" +
                     DateAdvice(column.name, values[c]));
  }
  if (!left_out.empty()) {
    std::string names;
    for (const std::string& n : left_out) names += (names.empty() ? "" : ", ") + n;
    notes->push_back("column(s) left out by --drop: " + names);
  }
  if (plan.names_.empty()) return Status::InvalidArgument(first.path() + ": no feature columns besides the label");
  return plan;
}

Status CsvColumns::Append(const std::vector<std::string>& fields, MissingPolicy missing, std::string* features,
                          MissingCounts* counts) const {
  const auto append = [&](float f) { features->append(reinterpret_cast<const char*>(&f), sizeof(f)); };
  for (size_t c : order_) {
    const Column& column = columns_[c];
    const std::string v = TrimCsvField(fields[c]);
    const size_t width = column.kind == Kind::kText ? column.categories.size() : 1;
    if (IsMissingCsvValue(v)) {
      if (missing == MissingPolicy::kReject) return Status::InvalidArgument("column '" + column.name + kMissingValue);
      if (counts != nullptr) ++counts->absent[c];
      for (size_t i = 0; i < width; ++i) append(missing == MissingPolicy::kNaN ? std::nanf("") : 0.0f);
      continue;
    }
    if (column.kind == Kind::kText) {
      const auto found = column.categories.find(v);
      if (found == column.categories.end() && like_.empty()) {  // the file changed since its categories were read
        return Status::InvalidArgument("column '" + column.name + "': '" + v + "' is none of its categories");
      }
      if (found == column.categories.end()) {  // a value the db it is built like never had: missing
        if (missing == MissingPolicy::kReject) {
          return Status::InvalidArgument("column '" + column.name + "': '" + v + "' is none of " + like_ +
                                         "'s categories (--missing nan or zero keeps the row)");
        }
        if (counts != nullptr) ++counts->unseen[c];
        for (size_t i = 0; i < width; ++i) append(missing == MissingPolicy::kNaN ? std::nanf("") : 0.0f);
        continue;
      }
      for (size_t i = 0; i < width; ++i) append(i == found->second ? 1.0f : 0.0f);
      continue;
    }
    double x = 0;
    if (!ParseNumber(decimal_ == ',' ? DecimalPoint(v) : v, &x)) return NotANumber(column.name, v);
    append(static_cast<float>(x));
  }
  return Status::OK();
}

namespace {

// `like`'s values none of its categories, in each text column of `plan`'s:
// counted over every table's rows, noted with what they are taken as.
Status NoteUnseenValues(const std::vector<const CsvTable*>& tables, const std::vector<size_t>& text,
                        const std::function<bool(size_t, const std::string&)>& known, const std::string& like,
                        std::vector<std::string>* notes) {
  // Column -> value -> rows, for at most kMaxCategories values a column (an
  // id's would fill memory); the rows of the values past them, counted apart.
  std::map<size_t, std::map<std::string, uint64_t>> unseen;
  std::map<size_t, uint64_t> more;
  GRANARY_RETURN_IF_ERROR(
      ForEachTextValue(tables, text, [&](const CsvTable&, uint64_t, size_t c, const std::string& v) -> Status {
        if (known(c, v)) return Status::OK();
        std::map<std::string, uint64_t>& values = unseen[c];
        if (auto at = values.find(v); at != values.end() || values.size() < kMaxCategories) {
          ++values[v];
        } else {
          ++more[c];
        }
        return Status::OK();
      }));
  for (const auto& [c, values] : unseen) {
    std::string shown;
    int n = 0;
    for (const auto& [value, rows] : values) {
      if (n++ < 5) shown += (n > 1 ? ", " : "") + ("'" + value + "' in " + std::to_string(rows) + " row(s)");
    }
    const std::string count = more.count(c) > 0 ? "over " + std::to_string(values.size())
                                                 : std::to_string(values.size());
    notes->push_back("column '" + tables[0]->header()[c] + "' holds " + count +
                     " value(s) that are none of " + like + "'s categories (" + shown + (n > 5 ? ", ..." : "") +
                     "): each is taken as a missing value, as --missing says (reject, the default: its row is "
                     "rejected; nan: its feature's mean to train's models; zero)");
  }
  return Status::OK();
}

}  // namespace

StatusOr<CsvColumns> CsvColumns::PlanLike(const std::vector<const CsvTable*>& tables, size_t label_column,
                                          const LikeDb& like, std::vector<std::string>* notes) {
  const CsvTable& first = *tables[0];
  const std::vector<std::string>& header = first.header();
  CsvColumns plan;
  plan.decimal_ = first.decimal();
  plan.like_ = like.named;
  plan.names_ = like.feature_names;
  std::map<std::string, size_t> columns;  // name -> place, the label's left out
  for (size_t c = 0; c < header.size(); ++c) {
    plan.columns_.push_back({header[c], Kind::kLeftOut, {}});
    if (c != label_column) columns.emplace(header[c], c);
  }
  std::vector<std::string> lacking;
  for (const std::string& name : like.feature_names) {
    auto found = columns.find(name);  // a number's column, else the column of which it is "column=value"
    size_t eq = found != columns.end() ? std::string::npos : name.find('=');
    while (eq != std::string::npos && (found = columns.find(name.substr(0, eq))) == columns.end()) {
      eq = name.find('=', eq + 1);
    }
    if (found == columns.end()) {
      lacking.push_back("'" + name + "'");
      continue;
    }
    Column& column = plan.columns_[found->second];
    const Kind kind = eq == std::string::npos ? Kind::kNumber : Kind::kText;
    if (column.kind == Kind::kLeftOut) {
      column.kind = kind;
      plan.order_.push_back(found->second);
    } else if (kind == Kind::kNumber || column.kind != Kind::kText || plan.order_.back() != found->second) {
      return Status::InvalidArgument(like.named + ": its feature '" + name + "' is no table column's "
                                     "element where " + first.path() + " has columns named as its features");
    }
    if (kind == Kind::kText) {
      column.categories.emplace(name.substr(eq + 1), static_cast<uint32_t>(column.categories.size()));
    }
  }
  if (!lacking.empty()) {
    return Status::InvalidArgument(first.path() + ": lacks the column(s) of " + like.named + "'s feature(s) " +
                                   NamesText(lacking) + " (its columns: " + CsvHeaderText(header) + ")");
  }
  std::string left_out;
  std::vector<size_t> text;
  for (size_t c = 0; c < header.size(); ++c) {
    const Kind kind = plan.columns_[c].kind;
    if (kind == Kind::kLeftOut && c != label_column) left_out += (left_out.empty() ? "'" : ", '") + header[c] + "'";
    if (kind == Kind::kText) text.push_back(c);
  }
  if (!left_out.empty()) {
    notes->push_back("column(s) none of " + like.named + "'s features, left out: " + left_out);
  }
  const auto known = [&](size_t c, const std::string& v) { return plan.columns_[c].categories.count(v) > 0; };
  GRANARY_RETURN_IF_ERROR(NoteUnseenValues(tables, text, known, like.named, notes));
  return plan;
}

}  // namespace granary
