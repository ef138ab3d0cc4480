// Column plan of the chunk_local token area (TileVectorColumns.h).
#include "TileVectorColumns.h"

#include <utility>
#include <vector>

#include "dgps/Dialect/Tile/IR/Tile.h"

using namespace mlir;
using namespace dgps::tile;

namespace dgps {
namespace {

/// The column groups of a row that one shared load can read: 16 bytes (columns 4m .. 4m + 3) of the [C][8] part,
/// and the 8 bytes of the [C][2] part.
constexpr int kGroups = 3;
constexpr int kGroupFirst[kGroups + 1] = {0, 4, 8, kTokenVectorColumns};
static_assert(kTokenVectorColumns == 10, "two 16-byte groups of the [C][8] part, one 8-byte pair of the [C][2] part");
int groupOf(int c) { return c < 8 ? c / 4 : 2; }

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

/// A set of vectors read together at one row, and how hot the read is (a rough count of reads per row).
struct ReadSet {
  std::vector<Value> values;
  int weight;
};

/// The sets of vectors read together at one row, hottest first (see planVectorColumns).
std::vector<ReadSet> setsReadTogether(Block& body) {
  std::vector<ReadSet> scan, columns, rows, records;
  auto add = [](std::vector<ReadSet>& to, int weight, std::initializer_list<Value> values) {
    std::vector<Value> set;
    for (Value v : values)
      if (isRowVector(v) && !llvm::is_contained(set, storageOf(v))) set.push_back(storageOf(v));
    if (set.size() >= 2) to.push_back({set, weight});
  };
  for (Operation& op : body) {
    // every channel's scan reads a_i, b_i of every row
    if (auto s = dyn_cast<ChannelScanOp>(op)) add(scan, 100, {s.getA(), s.getB()});
    if (auto p = dyn_cast<LowerProductsOp>(op)) {
      // each 16x16 block reads the column factor and gate of 4 columns and the row factors of 2 rows per lane
      add(columns, 20, {p.getCol(), p.getGate()});
      const size_t np = p.getRowA().size();
      add(rows, 10, {p.getRowA()[0], p.getRowB()[0], np > 1 ? p.getRowA()[1] : Value(),
                     np > 1 ? p.getRowB()[1] : Value(), p.getGate()});
    }
    if (auto r = dyn_cast<StoreTokenRecordOp>(op)) {
      // once per row: its first two factors together, the step coefficients together, then the rest
      add(records, 2, {r.getA(), r.getB()});
      if (r.getFields().size() == 2) add(records, 2, {r.getFields()[0], r.getFields()[1]});
      add(records, 1, {r.getA(), r.getB(), r.getC(), r.getGate()});
    }
  }
  for (auto* more : {&columns, &rows, &records}) scan.insert(scan.end(), more->begin(), more->end());
  return scan;
}

/// Shared loads that read the columns `mask` of one group (16 bytes of the [C][8] part, or the 8-byte [C][2]
/// part): one for columns within one 8-byte pair or a run from the group's first column (a 16-byte load), else
/// one per 8-byte pair touched.
int loadsInGroup(unsigned mask) {
  if (mask == 0) return 0;
  if ((mask & 0x3u) == mask || (mask & 0xcu) == mask || mask == 0x7u || mask == 0xfu) return 1;
  return ((mask & 0x3u) ? 1 : 0) + ((mask & 0xcu) ? 1 : 0);
}

/// The token-area columns being handed out.
class ColumnPlan {
 public:
  bool has(Value v) const { return column_.count(v.getAsOpaquePointer()) != 0; }
  int of(Value v) const { return column_.at(v.getAsOpaquePointer()); }
  int freeIn(int group) const {
    int n = 0;
    for (int c = kGroupFirst[group]; c < kGroupFirst[group + 1]; ++c) n += !used_[c];
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
    const int first = kGroupFirst[group], last = kGroupFirst[group + 1];
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

  /// Swaps the contents of two columns (either may be free) while that lowers cost(); the greedy placement
  /// can leave a colder set's pair unaligned inside a group that a hotter set filled in another order.
  void improve(const std::vector<ReadSet>& sets) {
    for (bool better = true; better;) {
      better = false;
      for (int x = 0; x < kTokenVectorColumns; ++x)
        for (int y = x + 1; y < kTokenVectorColumns; ++y) {
          const int before = cost(sets);
          swapColumns(x, y);
          if (cost(sets) < before)
            better = true;
          else
            swapColumns(x, y);
        }
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
    for (Value v : set)
      if (has(v) && freeIn(groupOf(of(v))) > 0) return groupOf(of(v));
    int best = -1;
    for (int g = 0; g < kGroups; ++g) {
      if (freeIn(g) >= n) return g;
      if (freeIn(g) > 0 && (best < 0 || freeIn(g) > freeIn(best))) best = g;
    }
    return best;
  }

  /// Weighted shared loads of all sets.
  int cost(const std::vector<ReadSet>& sets) const {
    int total = 0;
    for (const ReadSet& set : sets) {
      unsigned mask[kGroups] = {};
      for (Value v : set.values)
        if (has(v)) mask[groupOf(of(v))] |= 1u << (of(v) - kGroupFirst[groupOf(of(v))]);
      for (unsigned m : mask) total += set.weight * loadsInGroup(m);
    }
    return total;
  }

  void swapColumns(int x, int y) {
    for (auto& [v, c] : column_)
      if (c == x)
        c = y;
      else if (c == y)
        c = x;
    std::swap(used_[x], used_[y]);
  }

  std::map<const void*, int> column_;
  bool used_[kTokenVectorColumns] = {};
};

}  // namespace

std::map<const void*, int> planVectorColumns(Block& body) {
  ColumnPlan plan;
  const std::vector<ReadSet> sets = setsReadTogether(body);
  for (const ReadSet& set : sets)
    while (llvm::any_of(set.values, [&](Value v) { return !plan.has(v); }))
      if (!plan.placeSome(set.values)) break;  // every column taken
  // the other vectors, in order of definition
  for (Operation& op : body)
    if (!isa<CumsumOp>(op))
      for (Value r : op.getResults())
        if (isRowVector(r) && !plan.has(r)) plan.placeAnywhere(r);
  plan.improve(sets);
  return plan.result();
}

}  // namespace dgps
