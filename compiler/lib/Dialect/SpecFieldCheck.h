// Private to the dialect verifiers: the spec language's rules for integer-valued IR attributes.
//
// dgps.recurrence carries heads_qk, gva_ratio, key_dims, value_dims and the tuning lists as i64; a
// lowered function carries chunk.chunk_size, chunk.gva_ratio, chunk.key_dims, chunk.value_dims and
// chunk.tuning; a chunk.kernel carries #chunk.tile. All of them hold values of spec fields, so they are
// checked by dsl's validateSpec (one source of truth for the ranges and allowed sets), field by field on
// an otherwise default Spec. The Spec holds `int`: a value outside int's range is never narrowed (that
// turned 4294967424 into 128); it is reported with the rule the language states for the field.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dgps/dsl/SpecParser.h"
#include "llvm/ADT/ArrayRef.h"

namespace dgps::ir {

/// What is wrong with the values of one field: the language's message and its "expected" text.
struct FieldProblem {
  std::string element;  ///< "[1]" when the problem is one element of a list, else empty
  std::string message;
  std::string expected;
};

/// Stores the values into a Spec field (e.g. s.key_dims = v, or s.gva_ratio = v[0]).
using StoreField = std::function<void(Spec&, const std::vector<int>&)>;

namespace detail {

inline std::optional<FieldProblem> firstProblem(const std::vector<int>& values, const std::string& path,
                                                const StoreField& store) {
  Spec s;
  s.name = "ir";  // a valid name: only the field under test may fail
  store(s, values);
  for (const Diagnostic& d : validateSpec(s)) {
    if (d.severity != Severity::Error) continue;
    const bool ours = d.path == path || d.path.rfind(path + "[", 0) == 0 || d.path.rfind(path + ".", 0) == 0;
    if (!ours) continue;
    return FieldProblem{d.path.substr(path.size()), d.message, d.expected};
  }
  return std::nullopt;
}

}  // namespace detail

/// The first problem of `values` as the spec field at `path` ("heads.gva_ratio", "dims.key",
/// "tuning.chunk", ...), or nullopt when the language accepts them. Values beyond int are checked as
/// INT_MAX / INT_MIN (outside every range of the language) and the message shows the value given.
inline std::optional<FieldProblem> checkSpecInts(llvm::ArrayRef<int64_t> values, const std::string& path,
                                                 const StoreField& store) {
  std::vector<int> narrow;
  std::optional<std::pair<std::string, std::string>> swapped;  // sentinel text -> the value given
  for (int64_t v : values) {
    if (v > INT_MAX || v < INT_MIN) {
      const int sentinel = v > 0 ? INT_MAX : INT_MIN;
      if (!swapped) swapped = std::make_pair(std::to_string(sentinel), std::to_string(v));
      narrow.push_back(sentinel);
    } else {
      narrow.push_back(static_cast<int>(v));
    }
  }
  std::optional<FieldProblem> p = detail::firstProblem(narrow, path, store);
  if (swapped) {
    if (!p) {  // cannot happen for the fields above; say so rather than accept a narrowed value
      return FieldProblem{"", swapped->second + " does not fit a 32-bit integer", "a value the spec language allows for " + path};
    }
    for (size_t at = p->message.find(swapped->first); at != std::string::npos;
         at = p->message.find(swapped->first, at + swapped->second.size()))
      p->message.replace(at, swapped->first.size(), swapped->second);
  }
  return p;
}

}  // namespace dgps::ir
