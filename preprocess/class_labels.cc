#include "preprocess/class_labels.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "base/names_text.h"
#include "preprocess/csv_table.h"

namespace granary {

std::vector<std::string> ColumnsNamedLikeALabel(const std::vector<std::string>& header) {
  static const std::vector<std::vector<std::string>> kNames = {{"label", "labels"}, {"target", "targets"}, {"class"},
                                                               {"y"}};
  for (const std::vector<std::string>& names : kNames) {
    std::vector<std::string> named;
    for (const std::string& column : header) {
      std::string lower = column;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (std::find(names.begin(), names.end(), lower) != names.end()) named.push_back(column);
    }
    if (!named.empty()) return named;
  }
  return {};
}

bool IntegralLabel(const std::string& text, int64_t* value) {
  if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(x) || x != std::floor(x) ||
      std::fabs(x) > 9.0e15) {  // past 2^53 a double no longer tells integers apart
    return false;
  }
  *value = static_cast<int64_t>(x);
  return true;
}

std::map<std::string, int64_t> ChooseClasses(const std::set<std::string>& values, std::vector<std::string>* names) {
  // Classes: labels that are all integral numbers, however spelled, by
  // value: non-negative ones as they are, when dense (at most twice as many
  // indices as values, plus a few: a class may be absent from a small
  // table); else in numeric order, named by their values (a label of 594082
  // is one class, not 594083; -1 and 1 are classes 0 and 1). Any other
  // labels: the sorted distinct strings.
  std::map<std::string, int64_t> classes;
  std::set<int64_t> numbers;  // integral labels in numeric order ("7", "07" and "7.0" are one)
  bool integers = !values.empty();
  for (const std::string& v : values) {
    int64_t x = 0;
    if (!IntegralLabel(v, &x)) {
      integers = false;
      break;
    }
    classes[v] = x;
    numbers.insert(x);
  }
  const bool dense =
      integers && *numbers.begin() >= 0 && *numbers.rbegin() < 2 * static_cast<int64_t>(numbers.size()) + 16;
  if (dense) {
    for (int64_t i = 0; i <= *numbers.rbegin(); ++i) names->push_back(std::to_string(i));
  } else if (integers) {
    std::map<int64_t, int64_t> index;  // label value -> class
    for (int64_t number : numbers) {
      index[number] = static_cast<int64_t>(names->size());
      names->push_back(std::to_string(number));
    }
    for (auto& [v, x] : classes) x = index[x];
  } else {
    classes.clear();
    for (const std::string& v : values) {
      classes[v] = static_cast<int64_t>(names->size());
      names->push_back(v);
    }
  }
  return classes;
}

std::string RegressionHint(const std::string& value) {
  double x = 0;
  if (!ParseDecimal(value, &x) || !std::isfinite(x)) return "";
  return "; a number to predict (a price, a count) is read with --regression";
}

namespace {

// Whether `v` is a run-length encoded mask as Kaggle's segmentation
// competitions write them: pairs of a start pixel and a run's length
// ("264661 17 265429 33"), each run after the one before it, one past pixel
// 100 (a short list of tag numbers, "3 17", is none).
bool IsRunLengths(const std::string& v) {
  std::vector<uint64_t> numbers;
  for (size_t at = v.find_first_not_of(' '); at != std::string::npos; at = v.find_first_not_of(' ', at)) {
    const size_t end = std::min(v.find(' ', at), v.size());
    if (end - at > 12 || !std::all_of(v.begin() + at, v.begin() + end, [](char c) { return c >= '0' && c <= '9'; })) {
      return false;
    }
    numbers.push_back(std::stoull(v.substr(at, end - at)));
    at = end;
  }
  if (numbers.size() < 2 || numbers.size() % 2 != 0 || numbers[numbers.size() - 2] < 100) return false;
  for (size_t i = 2; i < numbers.size(); i += 2) {
    if (numbers[i] < numbers[i - 2] + numbers[i - 1]) return false;
  }
  return true;
}

}  // namespace

Status CheckClassLabels(const std::string& path, const std::string& label, const std::set<std::string>& values,
                        uint64_t labelled, bool table, std::vector<std::string>* notes) {
  const size_t runs = std::count_if(values.begin(), values.end(), IsRunLengths);
  if (runs >= 2 && 2 * runs >= values.size()) {
    const auto first = std::find_if(values.begin(), values.end(), IsRunLengths);
    return Status::InvalidArgument(path + ": column '" + label + "' holds run-length encoded masks ('" +
                                   first->substr(0, 40) + (first->size() > 40 ? "..." : "") + "', ...: pairs of a "
                                   "pixel and a run's length, as Kaggle's segmentation competitions write them), not "
                                   "classes: a segmentation dataset. prep builds classification dbs; decode each "
                                   "image's mask and write the two with granary.write (README, \"Masks and boxes\")");
  }
  std::vector<std::string> fractions, text;  // the first three of each, to show
  size_t fractional = 0, texts = 0;
  for (const std::string& v : values) {
    double x = 0;
    int64_t integral = 0;
    if (!ParseDecimal(v, &x) || !std::isfinite(x)) {
      if (++texts <= 3) text.push_back(v);
      continue;
    }
    if (IntegralLabel(v, &integral)) continue;
    ++fractional;
    if (fractions.size() < 3) fractions.push_back(v);
  }
  const std::string way_forward =
      table ? ": --regression reads it as a number to predict (train fits it with mean squared error; a row whose "
              "value is no number is rejected), or --label picks another column"
            : ": an image folder's labels are classes (granary.write stores images with a float target to predict), "
              "or --label picks another column";
  const auto joined = [](const std::vector<std::string>& list) {
    std::string out;
    for (const std::string& v : list) out += (out.empty() ? "" : ", ") + v;
    return out;
  };
  // Text among the values makes them class names, unless nearly all are
  // fractional numbers: a price column with a stray "n/a?" is no 800 classes.
  if (!fractions.empty() && fractional >= 10 * texts) {
    const std::string no_number =
        texts == 0 ? "" : " and " + std::to_string(texts) + " that are no number (" + joined(text) + ")";
    return Status::InvalidArgument(path + ": column '" + label + "' holds numbers that are not integers (" +
                                   joined(fractions) + ", ...)" + no_number + ": a regression target, not classes" +
                                   way_forward);
  }
  // "clear primary", "haze primary water": lists of tags (Planet's Amazon images), whose combinations became classes.
  std::set<std::string> tags;
  std::string shown;  // the first list
  size_t lists = 0;
  for (const std::string& v : values) {
    size_t words = 0;
    for (size_t at = 0; at < v.size();) {
      const size_t end = std::min(v.find_first_of(" ;|", at), v.size());
      if (end > at) tags.insert(v.substr(at, end - at)), ++words;
      at = end + 1;
    }
    if (words > 1 && lists++ == 0) shown = v;
  }
  if (values.size() >= 10 && 2 * lists > values.size() && 2 * tags.size() <= values.size()) {
    notes->push_back("column '" + label + "' holds lists of tags ('" + shown + "', ...: " +
                     std::to_string(tags.size()) + " tags in " + std::to_string(values.size()) +
                     " combinations): each combination is a class of its own, and train's models predict one class; "
                     "for several labels a sample, write a multi-hot field with granary.write and train it in your "
                     "own script (BCEWithLogitsLoss; launch runs it on every core)");
  }
  // "Cat" and "cat": one class to the eye, two to a model.
  std::map<std::string, std::vector<std::string>> spellings;
  for (const std::string& v : values) {
    std::string key = v;
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
    spellings[key].push_back("'" + v + "'");
  }
  std::vector<std::string> alike;
  for (const auto& [key, spelt] : spellings) {
    if (spelt.size() > 1 && alike.size() < 3) alike.push_back(joined(spelt));
  }
  if (!alike.empty()) {
    notes->push_back("column '" + label + "' holds labels that differ only in case (" + alike[0] +
                     (alike.size() > 1 ? "; " + alike[1] : "") + (alike.size() > 2 ? "; ..." : "") +
                     "): each is a class of its own; where they mean one, spell them one way in the table "
                     "(pandas: df['" + label + "'] = df['" + label + "'].str.lower())");
  }
  if (values.size() > 100 && values.size() * 2 > labelled) {
    const std::string many = "column '" + label + "' holds " + std::to_string(values.size()) + " classes for " +
                             std::to_string(labelled) + " rows";
    // Integers that are nearly all distinct are a count or a price (Kaggle's SalePrice), or an id: no classes.
    if (table && texts == 0) {
      return Status::InvalidArgument(path + ": " + many + ": a number to predict (a price, a count) or an id, not "
                                     "classes" + way_forward);
    }
    notes->push_back(many + ": an id or a measured value rather than a class label? (--label picks another column)");
  } else if (table && texts == 0 && values.size() > 100 && labelled < 50 * values.size()) {
    // A count (bicycles rented an hour: 919 values over 2,000 rows), each value a class with a few rows to learn from.
    notes->push_back("column '" + label + "' holds " + std::to_string(values.size()) + " integer values, each a "
                     "class, for " + std::to_string(labelled) + " rows (" +
                     std::to_string((10 * labelled / values.size() + 5) / 10) + " a class on average): a count or an "
                     "amount to predict? --regression reads it as a number (train fits it with mean squared error)");
  }
  return Status::OK();
}

std::string ClassWithoutPeriod(const std::string& value, const std::set<std::string>& classes) {
  if (value.size() < 2 || value.back() != '.' || classes.count(value) > 0) return "";
  const std::string without = value.substr(0, value.size() - 1);
  return classes.count(without) > 0 ? without : "";
}

std::string PeriodNote(const std::map<std::string, std::string>& read_as) {
  std::vector<std::string> values, classes;
  for (const auto& [value, of] : read_as) {
    values.push_back("'" + value + "'");
    classes.push_back("'" + of + "'");
  }
  return NamesText(values) + " read as " + NamesText(classes) + " (the same but for a '.' after them, as UCI's "
         "adult.test writes its labels)";
}

std::map<std::string, int64_t> ClassesLike(const LikeDb& like, const std::string& label,
                                           const std::set<std::string>& values, std::vector<std::string>* names,
                                           std::vector<std::string>* notes) {
  *names = like.class_names;
  std::map<std::string, int64_t> classes;
  for (size_t c = 0; c < like.class_names.size(); ++c) classes.emplace(like.class_names[c], static_cast<int64_t>(c));
  const std::set<std::string> names_of(like.class_names.begin(), like.class_names.end());
  std::vector<std::string> unknown;
  std::map<std::string, std::string> read_as;  // with a '.' after a class
  for (const std::string& value : values) {
    if (classes.count(value) > 0) continue;
    int64_t number = 0;
    const auto as = IntegralLabel(value, &number) ? classes.find(std::to_string(number)) : classes.end();
    if (as != classes.end()) {
      classes.emplace(value, as->second);
    } else if (const std::string of = ClassWithoutPeriod(value, names_of); !of.empty()) {
      classes.emplace(value, classes.at(of));
      read_as.emplace(value, of);
    } else {
      unknown.push_back("'" + value + "'");
    }
  }
  if (!read_as.empty()) {
    notes->push_back("label column '" + label + "': " + PeriodNote(read_as) + ", " + like.named + "'s classes");
  }
  if (!unknown.empty()) {
    notes->push_back("label column '" + label + "' holds " + std::to_string(unknown.size()) + " value(s) that are "
                     "none of " + like.named + "'s classes (" + NamesText(unknown) +
                     "): their rows are rejected, a model trained on it having no output for them");
  }
  return classes;
}

}  // namespace granary
