// Class labels written as text: a CSV table's label column, a labels table
// beside a folder of images (prep build --labels). Which column is the
// label, which value is which class, and what is no class label at all.
// Internal to preprocess.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "preprocess/source.h"

namespace granary {

// At most this many distinct label values: a column with more is no class
// label (a float target, an id), and its distinct values would fill memory.
inline constexpr size_t kMaxLabelValues = 100000;

// The columns of `header` named like a label, compared without case: those
// named label(s), else target(s), else class, else y ("x,y,target" is
// labelled by target); empty if none is.
std::vector<std::string> ColumnsNamedLikeALabel(const std::vector<std::string>& header);

// `text` as an integral number in decimal however it is spelled ("7",
// "07", "7.0", "7e0", "-1"; pandas writes an integer column that held a NaN
// as "7.0"), into *value; false for anything else (hex, "7.5", "inf").
bool IntegralLabel(const std::string& text, int64_t* value);

// The classes of a label column's distinct `values`: each value's class, and
// the classes' names in order (*names). Labels that are all integral
// numbers are classes by value (non-negative and dense: the indices
// themselves), any others the sorted distinct strings.
std::map<std::string, int64_t> ChooseClasses(const std::set<std::string>& values, std::vector<std::string>* names);

// "; a number to predict (a price, a count) is read with --regression" where
// `value` is a number, "" otherwise: for a refusal of a CSV column as classes.
std::string RegressionHint(const std::string& value);

// Refuses a label column (`label`, of the table at `path`) of numbers that
// are not all integers (a price: a regression target, where each value would
// become a class of its own), nearly all such numbers beside a few that are
// text; of a CSV table (`table`: --regression reads it as a number to
// predict), also one of integers with more classes than half its `labelled`
// rows (a price in whole units, a count, an id); notes one of text so (a
// labels table's too), and a table's of over 100 integer classes with fewer
// than 50 rows a class (a count to predict?).
Status CheckClassLabels(const std::string& path, const std::string& label, const std::set<std::string>& values,
                        uint64_t labelled, bool table, std::vector<std::string>* notes);

// `value` without the '.' after it where that is one of `classes` and
// `value` is not (UCI's adult.test labels "<=50K." what adult.data labels
// "<=50K"); "" otherwise.
std::string ClassWithoutPeriod(const std::string& value, const std::set<std::string>& classes);

// "'a.', 'b.' read as 'a', 'b' (the same but for a '.' after them, as UCI's
// adult.test writes its labels)": what ClassWithoutPeriod found, noted.
std::string PeriodNote(const std::map<std::string, std::string>& read_as);

// The classes of a label column's distinct `values` (column `label`) read
// --like a db: each value its class of the db's (an integral number however
// spelt, 1.0 for 1, too; with a '.' after it: ClassWithoutPeriod), the
// db's classes the new db's (*names); values none of them are noted (their rows are rejected as no class).
std::map<std::string, int64_t> ClassesLike(const LikeDb& like, const std::string& label,
                                           const std::set<std::string>& values, std::vector<std::string>* names,
                                           std::vector<std::string>* notes);

}  // namespace granary
