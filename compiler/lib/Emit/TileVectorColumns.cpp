// Column plan of the chunk_local token area (TileVectorColumns.h).
#include "TileVectorColumns.h"

#include <vector>

#include "dgps/Dialect/Tile/IR/Tile.h"

using namespace mlir;
using namespace dgps::tile;

namespace dgps {
namespace {

/// Columns of one 16-byte group of a row (both parts of the token area are 16-byte aligned per row).
constexpr int kGroup = 4;

/// A [C] f32 vector (not the [K] start vector, not a uniform scalar).
bool isRowVector(Value v) {
  auto t = v ? dyn_cast<TileType>(v.getType()) : TileType();
  return t && t.getRank() == 1 && t.getDims()[0] == Extent::C;
}

/// The value whose column `v` occupies: in-place ops write their operand's column.
Value storageOf(Value v) {
  while (auto c = v.getDefiningOp<CumsumOp>()) v = c.getX();
  return v;
}

/// The sets of vectors read together at one row, hottest first (see planVectorColumns).
std::vector<std::vector<Value>> setsReadTogether(Block& body) {
  std::vector<std::vector<Value>> scan, columns, rows, records;
  auto add = [](std::vector<std::vector<Value>>& to, std::initializer_list<Value> values) {
    std::vector<Value> set;
    for (Value v : values)
      if (isRowVector(v) && !llvm::is_contained(set, storageOf(v))) set.push_back(storageOf(v));
    if (set.size() >= 2) to.push_back(set);
  };
  for (Operation& op : body) {
    if (auto s = dyn_cast<ChannelScanOp>(op)) add(scan, {s.getA(), s.getB()});
    if (auto p = dyn_cast<LowerProductsOp>(op)) {
      add(columns, {p.getCol(), p.getGate()});
      const size_t np = p.getRowA().size();
      add(rows, {p.getRowA()[0], p.getRowB()[0], np > 1 ? p.getRowA()[1] : Value(), np > 1 ? p.getRowB()[1] : Value(),
                 p.getGate()});
    }
    if (auto r = dyn_cast<StoreTokenRecordOp>(op)) {
      const bool fields = r.getFields().size() == 2;
      add(records, {r.getA(), r.getB(), r.getC(), r.getGate(), fields ? r.getFields()[0] : Value(),
                    fields ? r.getFields()[1] : Value()});
    }
  }
  for (auto* more : {&columns, &rows, &records}) scan.insert(scan.end(), more->begin(), more->end());
  return scan;
}

/// The token-area columns being handed out.
class ColumnPlan {
 public:
  bool has(Value v) const { return column_.count(v.getAsOpaquePointer()) != 0; }
  int of(Value v) const { return column_.at(v.getAsOpaquePointer()); }
  int freeIn(int group) const {
    int n = 0;
    for (int c = group * kGroup; c < (group + 1) * kGroup; ++c) n += !used_[c];
    return n;
  }

  /// Places as many of `set`'s unplaced members as fit into one group (see planVectorColumns); false when none
  /// could be placed.
  bool placeSome(const std::vector<Value>& set) {
    std::vector<Value> todo;
    for (Value v : set)
      if (!has(v)) todo.push_back(v);
    const int group = chooseGroup(set, (int)todo.size());
    if (group < 0) return false;
    const int first = group * kGroup, last = first + kGroup;
    // free mates of placed members, then whole free pairs, then any free column
    for (Value v : set)
      if (has(v) && of(v) >= first && of(v) < last && !used_[of(v) ^ 1] && !todo.empty()) take(todo, of(v) ^ 1);
    for (int c = first; c < last && !todo.empty(); c += 2)
      if (!used_[c] && !used_[c + 1]) {
        take(todo, c);
        if (!todo.empty()) take(todo, c + 1);
      }
    for (int c = first; c < last && !todo.empty(); ++c)
      if (!used_[c]) take(todo, c);
    return true;
  }

  /// `v` in the first free column, if any.
  void placeAnywhere(Value v) {
    for (int c = 0; c < kTokenVectorColumns; ++c)
      if (!used_[c]) {
        assign(v, c);
        return;
      }
  }

  std::map<const void*, int> result() const { return column_; }

 private:
  void assign(Value v, int c) {
    column_[v.getAsOpaquePointer()] = c;
    used_[c] = true;
  }
  void take(std::vector<Value>& todo, int c) {
    assign(todo.front(), c);
    todo.erase(todo.begin());
  }

  /// A group holding a placed member of the set with room; else the first with room for all `n`; else the one
  /// with the most room (-1 when every column is taken).
  int chooseGroup(const std::vector<Value>& set, int n) const {
    constexpr int groups = kTokenVectorColumns / kGroup;
    for (Value v : set)
      if (has(v) && freeIn(of(v) / kGroup) > 0) return of(v) / kGroup;
    int best = -1;
    for (int g = 0; g < groups; ++g) {
      if (freeIn(g) >= n) return g;
      if (freeIn(g) > 0 && (best < 0 || freeIn(g) > freeIn(best))) best = g;
    }
    return best;
  }

  std::map<const void*, int> column_;
  bool used_[kTokenVectorColumns] = {};
};

}  // namespace

std::map<const void*, int> planVectorColumns(Block& body) {
  static_assert(kTokenVectorColumns % kGroup == 0, "whole 16-byte groups");
  ColumnPlan plan;
  for (const std::vector<Value>& set : setsReadTogether(body)) {
    // a set whose members are all placed, or all but one with no room beside them, is done
    while (llvm::any_of(set, [&](Value v) { return !plan.has(v); }))
      if (!plan.placeSome(set)) break;
  }
  // the other vectors, in order of definition
  for (Operation& op : body)
    if (!isa<CumsumOp>(op))
      for (Value r : op.getResults())
        if (isRowVector(r) && !plan.has(r)) plan.placeAnywhere(r);
  return plan.result();
}

}  // namespace dgps
