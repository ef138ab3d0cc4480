#include "dgps/runtime/Package.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "TextParse.h"
#include "YamlStrict.h"
#include "dgps/dsl/Canonical.h"
#include "dgps/dsl/Diagnostic.h"
#include "dgps/dsl/FileRead.h"
#include "dgps/dsl/LaunchManifest.h"
#include "dgps/dsl/SpecParser.h"
#include "dgps/runtime/Error.h"
#include "dgps/runtime/Validation.h"

namespace dgps {
namespace {

// Longest names the manifest may hold: far beyond what dgpsc writes, short enough for every message.
constexpr std::size_t kMaxIdentifier = 256;
constexpr std::size_t kMaxFileName = 255;
// The manifest format this runtime reads (dsl/LaunchManifest.h's kPackageFormatVersion, which dgpsc writes).
constexpr int kManifestVersion = 2;
static_assert(kManifestVersion == kPackageFormatVersion, "the runtime reads the format dgpsc writes");

[[noreturn]] void packageError(const std::string& msg) { throw RuntimeError(RuntimeErrorCode::Package, msg); }

// A problem in one field of a package file, in the schema readers' one error style (dsl Diagnostic.h):
// "<file>:<line>:<col>: error: <field>: <message>"; line and column 0 when unknown.
[[noreturn]] void fieldError(const std::string& file, int line, int column, const std::string& field,
                             const std::string& msg) {
  packageError(formatFileProblem(Severity::Error, file, line, column, field, msg));
}

// Strict reader of one manifest: every accessor checks the node's type and value and fails with
// "<file>:<line>:<col>: error: <key>: expected <what>, got <what came>" (fieldError).
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& msg,
                         int column_offset = 0) const {
    const bool located = at.IsDefined() && at.Mark().line >= 0;
    fieldError(file_, located ? at.Mark().line + 1 : 0, located ? at.Mark().column + 1 + column_offset : 0,
               key.empty() ? std::string("manifest") : key, msg);
  }

  static std::string describe(const YAML::Node& n) {
    if (!n.IsDefined() || n.IsNull()) return "nothing";
    if (n.IsScalar()) return "'" + text::shown(n.Scalar()) + "'";
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a mapping";
    return "an unknown node";
  }

  // The map `node` must have exactly the keys `required` plus any of `optional`, each once.
  void checkKeys(const YAML::Node& node, const std::string& key, const std::vector<std::string>& required,
                 const std::vector<std::string>& optional = {}) const {
    if (!node.IsMap()) fail(node, key, "expected a mapping, got " + describe(node));
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      std::string k = it->first.IsScalar() ? it->first.Scalar() : "?";
      std::string full = key.empty() ? k : key + "." + k;
      bool known = std::find(required.begin(), required.end(), k) != required.end() ||
                   std::find(optional.begin(), optional.end(), k) != optional.end();
      if (!known) fail(it->first, full, "unknown key (expected one of: " + join(required, optional) + ")");
      if (!seen.insert(k).second) fail(it->first, full, "duplicate key");
    }
    for (const auto& r : required) {
      if (!seen.count(r)) fail(node, key.empty() ? r : key + "." + r, "missing required key");
    }
  }

  std::string str(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, key, "expected a string, got " + describe(n));
    return n.Scalar();
  }

  long long integer(const YAML::Node& n, const std::string& key, long long lo, long long hi) const {
    const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    long long v = 0;
    if (!n.IsScalar() || !text::parseInt(n.Scalar(), LLONG_MIN, LLONG_MAX, &v)) {
      fail(n, key, "expected an integer in " + range + ", got " + describe(n));
    }
    if (v < lo || v > hi) fail(n, key, "expected an integer in " + range + ", got " + n.Scalar());
    return v;
  }

  double number(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, key, "expected a number, got " + describe(n));
    const std::string& s = n.Scalar();
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0) {
      fail(n, key, "expected a finite number >= 0, got " + describe(n));
    }
    return v;
  }

  bool boolean(const YAML::Node& n, const std::string& key) const {
    if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) return n.Scalar() == "true";
    fail(n, key, "expected true or false, got " + describe(n));
  }

  template <typename E>
  E enumeration(const YAML::Node& n, const std::string& key, const std::vector<std::pair<std::string, E>>& values) const {
    std::string names;
    for (const auto& v : values) names += (names.empty() ? "" : "|") + v.first;
    if (n.IsScalar()) {
      for (const auto& v : values) {
        if (v.first == n.Scalar()) return v.second;
      }
    }
    fail(n, key, "expected one of " + names + ", got " + describe(n));
  }

  std::vector<int> intList(const YAML::Node& n, const std::string& key, int lo, int hi) const {
    if (!n.IsSequence() || n.size() == 0) fail(n, key, "expected a non-empty list of integers, got " + describe(n));
    std::vector<int> out;
    for (std::size_t i = 0; i < n.size(); ++i) {
      int v = int(integer(n[i], key + "[" + std::to_string(i) + "]", lo, hi));
      if (std::find(out.begin(), out.end(), v) != out.end()) {
        fail(n[i], key + "[" + std::to_string(i) + "]", "duplicate value " + std::to_string(v));
      }
      out.push_back(v);
    }
    return out;
  }

  std::vector<std::string> identList(const YAML::Node& n, const std::string& key) const {
    if (!n.IsSequence() || n.size() == 0) fail(n, key, "expected a non-empty list of names, got " + describe(n));
    std::vector<std::string> out;
    for (std::size_t i = 0; i < n.size(); ++i) {
      std::string k = key + "[" + std::to_string(i) + "]";
      std::string s = str(n[i], k);
      if (!text::isIdentifier(s, kMaxIdentifier)) {
        fail(n[i], k, "expected a C identifier [A-Za-z_][A-Za-z0-9_]* of at most " + std::to_string(kMaxIdentifier) +
                          " characters, got " + describe(n[i]));
      }
      out.push_back(s);
    }
    return out;
  }

  // A launch formula over the symbols and `lets` (LaunchFormula.h); a compile error points at its column.
  Formula formula(const YAML::Node& n, const std::string& key, const std::vector<std::string>& lets) const {
    if (!n.IsScalar()) fail(n, key, "expected a formula (a quoted integer expression), got " + describe(n));
    try {
      return Formula::compile(n.Scalar(), lets);
    } catch (const FormulaError& e) {
      // A quoted scalar's mark is its opening quote; the formula's first character is one further.
      const int quote = n.Tag() == "!" ? 1 : 0;
      fail(n, key, std::string("bad formula \"") + text::shown(n.Scalar(), 80) + "\": " + e.what(),
           quote + e.column() - 1);
    }
  }

  // A plain file name inside the package folder (no folders, no "..").
  std::string fileName(const YAML::Node& n, const std::string& key) const {
    std::string s = str(n, key);
    bool ok = !s.empty() && s.size() <= kMaxFileName && s[0] != '.' && s[0] != '-';
    for (char c : s) ok = ok && (text::isAlpha(c) || text::isDigit(c) || c == '_' || c == '.' || c == '-');
    if (!ok) {
      fail(n, key, "expected a file name inside the package folder ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most " +
                       std::to_string(kMaxFileName) + " characters; no '/' or '..'), got " + describe(n));
    }
    return s;
  }

 private:
  static std::string join(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::string s;
    for (const auto& x : a) s += (s.empty() ? "" : ", ") + x;
    for (const auto& x : b) s += (s.empty() ? "" : ", ") + x;
    return s;
  }
  std::string file_;
};

template <typename E>
std::vector<std::pair<std::string, E>> enumValues(std::initializer_list<E> list) {
  std::vector<std::pair<std::string, E>> out;
  for (E e : list) out.emplace_back(toString(e), e);
  return out;
}

void parseTunables(const Reader& r, const YAML::Node& n, Manifest& m) {
  r.checkKeys(n, "tunables", {"chunk", "block_v", "warps", "stages"});
  m.tunables.chunk = r.intList(n["chunk"], "tunables.chunk", 1, 1024);
  m.tunables.block_v = r.intList(n["block_v"], "tunables.block_v", 1, 1024);
  m.tunables.warps = r.intList(n["warps"], "tunables.warps", 1, 32);
  m.tunables.stages = r.intList(n["stages"], "tunables.stages", 1, 16);
}

void parseDefaultConfig(const Reader& r, const YAML::Node& n, Manifest& m) {
  r.checkKeys(n, "default_config", {"chunk", "block_v", "warps", "stages"});
  auto member = [&](const char* k, const std::vector<int>& allowed) {
    std::string key = std::string("default_config.") + k;
    int v = int(r.integer(n[k], key, 1, 1024));
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      std::string list;
      for (int a : allowed) list += (list.empty() ? "" : ", ") + std::to_string(a);
      r.fail(n[k], key, "expected a value from tunables." + std::string(k) + " [" + list + "], got " + std::to_string(v));
    }
    return v;
  };
  m.default_config.chunk = member("chunk", m.tunables.chunk);
  m.default_config.block_v = member("block_v", m.tunables.block_v);
  m.default_config.warps = member("warps", m.tunables.warps);
  m.default_config.stages = member("stages", m.tunables.stages);
}

std::string identifier(const Reader& r, const YAML::Node& n, const std::string& key) {
  std::string s = r.str(n, key);
  if (!text::isIdentifier(s, kMaxIdentifier)) {
    r.fail(n, key, "expected a C identifier [A-Za-z_][A-Za-z0-9_]* of at most " + std::to_string(kMaxIdentifier) +
                       " characters, got " + Reader::describe(n));
  }
  return s;
}

void parseDims(const Reader& r, const YAML::Node& n, const std::string& key, const std::vector<std::string>& lets,
               Formula out[3]) {
  if (!n.IsSequence() || n.size() != 3) r.fail(n, key, "expected a list of 3 formulas [x, y, z], got " + Reader::describe(n));
  for (std::size_t i = 0; i < 3; ++i) out[i] = r.formula(n[i], key + "[" + std::to_string(i) + "]", lets);
}

KernelLaunchRule parseKernel(const Reader& r, const YAML::Node& n, const std::string& key, bool has_role,
                             const std::vector<std::string>& lets) {
  if (has_role) {
    r.checkKeys(n, key, {"role", "symbol", "grid", "block", "smem"});
  } else {
    r.checkKeys(n, key, {"symbol", "grid", "block", "smem"});
  }
  KernelLaunchRule k;
  k.role = has_role ? identifier(r, n["role"], key + ".role") : "decode";
  k.symbol = identifier(r, n["symbol"], key + ".symbol");
  parseDims(r, n["grid"], key + ".grid", lets, k.grid);
  parseDims(r, n["block"], key + ".block", lets, k.block);
  k.smem = r.formula(n["smem"], key + ".smem", lets);
  return k;
}

// layer: what validation needs beyond features, dims, dtypes and io (Package.h).
void parseLayer(const Reader& r, const YAML::Node& n, Manifest& m) {
  r.checkKeys(n, "layer", {"heads_qk", "gva_ratio", "scale", "precond_inputs"});
  PackageLayer& l = m.layer;
  l.heads_qk = int(r.integer(n["heads_qk"], "layer.heads_qk", 0, 65536));
  l.gva_ratio = int(r.integer(n["gva_ratio"], "layer.gva_ratio", 1, 1024));
  const YAML::Node sc = n["scale"];
  if (sc.IsScalar() && sc.Scalar() == "auto") {
    l.scale.reset();
  } else {
    if (!sc.IsScalar()) r.fail(sc, "layer.scale", "expected auto or a number > 0, got " + Reader::describe(sc));
    l.scale = r.number(sc, "layer.scale");
    if (!(*l.scale > 0)) r.fail(sc, "layer.scale", "expected auto or a number > 0, got " + sc.Scalar());
  }
  const YAML::Node pi = n["precond_inputs"];
  r.checkKeys(pi, "layer.precond_inputs", {"gate", "gain", "center"});
  l.precond_gate = r.boolean(pi["gate"], "layer.precond_inputs.gate");
  l.precond_gain = r.boolean(pi["gain"], "layer.precond_inputs.gain");
  l.precond_center = r.boolean(pi["center"], "layer.precond_inputs.center");
  if (m.features.precond == PrecondKind::None && (l.precond_gate || l.precond_gain || l.precond_center))
    r.fail(pi, "layer.precond_inputs", "preconditioner inputs are set but features.precond is none");
}

// launch.forward_segmented: {kernels, buffers} (Package.h); the buffers follow launch.workspace's, so both
// lists together stay within kMaxWorkspaceBuffers.
void parseSegmented(const Reader& r, const YAML::Node& n, LaunchRules& L) {
  r.checkKeys(n, "launch.forward_segmented", {"kernels", "buffers"});
  const YAML::Node ks = n["kernels"];
  if (!ks.IsSequence() || ks.size() == 0 || ks.size() > kMaxForwardKernels) {
    r.fail(ks, "launch.forward_segmented.kernels",
           "expected a list of 1 to " + std::to_string(kMaxForwardKernels) + " kernels, got " + Reader::describe(ks) +
               (ks.IsSequence() ? " of " + std::to_string(ks.size()) : std::string()));
  }
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const std::string key = "launch.forward_segmented.kernels[" + std::to_string(i) + "]";
    KernelLaunchRule k = parseKernel(r, ks[i], key, true, L.let_names);
    for (const KernelLaunchRule& e : L.forward_segmented)
      if (e.role == k.role) r.fail(ks[i]["role"], key + ".role", "duplicate role " + k.role);
    L.forward_segmented.push_back(std::move(k));
  }
  const YAML::Node bufs = n["buffers"];
  if (!bufs.IsSequence() || L.workspace.size() + bufs.size() > kMaxWorkspaceBuffers) {
    r.fail(bufs, "launch.forward_segmented.buffers",
           "expected a list of at most " + std::to_string(kMaxWorkspaceBuffers - L.workspace.size()) +
               " buffers (with launch.workspace's, at most " + std::to_string(kMaxWorkspaceBuffers) + "), got " +
               Reader::describe(bufs) + (bufs.IsSequence() ? " of " + std::to_string(bufs.size()) : std::string()));
  }
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    const std::string key = "launch.forward_segmented.buffers[" + std::to_string(i) + "]";
    r.checkKeys(bufs[i], key, {"name", "bytes"});
    WorkspaceBufferRule b;
    b.name = identifier(r, bufs[i]["name"], key + ".name");
    b.bytes = r.formula(bufs[i]["bytes"], key + ".bytes", L.let_names);
    L.workspace_segmented.push_back(std::move(b));
  }
}

// launch: the compiler's plan (Package.h). Lets are compiled in order, each seeing only earlier ones, so
// no definition can refer to itself.
void parseLaunch(const Reader& r, const YAML::Node& n, Manifest& m) {
  r.checkKeys(n, "launch", {"device_layout", "let"}, {"forward", "workspace", "forward_segmented", "decode"});
  // The formulas below size shared memory and the workspace on the host; the kernels read the slot, pitch and
  // feedback-scan rules of the device headers this runtime compiles them with (launch_rules.h,
  // tile/feedback_scan_layout.h). Both must be the same (LaunchManifest.h deviceLayoutHash).
  const std::string layout = r.str(n["device_layout"], "launch.device_layout");
  if (layout != deviceLayoutHash()) {
    r.fail(n["device_layout"], "launch.device_layout",
           "the package was generated for device layout \"" + text::shown(layout) +
               "\" but this runtime's device library has layout \"" + deviceLayoutHash() +
               "\" (runtime/device/dgps/device/launch_rules.h or tile/feedback_scan_layout.h changed between dgpsc and "
               "this runtime); "
               "regenerate the package with this version's dgpsc compile");
  }
  LaunchRules& L = m.launch;
  const YAML::Node let = n["let"];
  if (!let.IsSequence()) r.fail(let, "launch.let", "expected a list of {name, value}, got " + Reader::describe(let));
  if (let.size() > std::size_t(kMaxFormulaLets)) {
    r.fail(let, "launch.let", "expected at most " + std::to_string(kMaxFormulaLets) + " names, got " +
                                  std::to_string(let.size()));
  }
  for (std::size_t i = 0; i < let.size(); ++i) {
    const std::string key = "launch.let[" + std::to_string(i) + "]";
    r.checkKeys(let[i], key, {"name", "value"});
    const std::string name = identifier(r, let[i]["name"], key + ".name");
    bool taken = std::find(L.let_names.begin(), L.let_names.end(), name) != L.let_names.end();
    for (int k = 0; k < kFormulaSymbols; ++k) taken = taken || name == toString(FormulaSymbol(k));
    if (taken) r.fail(let[i]["name"], key + ".name", "'" + name + "' is already a symbol or an earlier let name");
    L.lets.push_back(r.formula(let[i]["value"], key + ".value", L.let_names));
    L.let_names.push_back(name);
  }
  if (n["forward"]) {
    const YAML::Node fw = n["forward"];
    if (!fw.IsSequence() || fw.size() == 0 || fw.size() > kMaxForwardKernels) {
      r.fail(fw, "launch.forward",
             "expected a list of 1 to " + std::to_string(kMaxForwardKernels) + " kernels, got " + Reader::describe(fw) +
                 (fw.IsSequence() ? " of " + std::to_string(fw.size()) : std::string()));
    }
    for (std::size_t i = 0; i < fw.size(); ++i) {
      KernelLaunchRule k = parseKernel(r, fw[i], "launch.forward[" + std::to_string(i) + "]", true, L.let_names);
      if (std::find(m.forward_roles.begin(), m.forward_roles.end(), k.role) != m.forward_roles.end())
        r.fail(fw[i]["role"], "launch.forward[" + std::to_string(i) + "].role", "duplicate role " + k.role);
      m.forward_roles.push_back(k.role);
      m.forward_symbols.push_back(k.symbol);
      L.forward.push_back(std::move(k));
    }
    m.has_forward = true;
    const YAML::Node ws = n["workspace"];
    if (!ws) r.fail(n, "launch.workspace", "missing required key (a forward needs its workspace layout)");
    r.checkKeys(ws, "launch.workspace", {"align", "buffers"});
    L.workspace_align = r.integer(ws["align"], "launch.workspace.align", 1, 4096);
    if ((L.workspace_align & (L.workspace_align - 1)) != 0)
      r.fail(ws["align"], "launch.workspace.align", "expected a power of two, got " + ws["align"].Scalar());
    const YAML::Node bufs = ws["buffers"];
    if (!bufs.IsSequence() || bufs.size() > kMaxWorkspaceBuffers) {
      r.fail(bufs, "launch.workspace.buffers",
             "expected a list of at most " + std::to_string(kMaxWorkspaceBuffers) + " buffers, got " +
                 Reader::describe(bufs) + (bufs.IsSequence() ? " of " + std::to_string(bufs.size()) : std::string()));
    }
    for (std::size_t i = 0; i < bufs.size(); ++i) {
      const std::string key = "launch.workspace.buffers[" + std::to_string(i) + "]";
      r.checkKeys(bufs[i], key, {"name", "bytes"});
      WorkspaceBufferRule b;
      b.name = identifier(r, bufs[i]["name"], key + ".name");
      b.bytes = r.formula(bufs[i]["bytes"], key + ".bytes", L.let_names);
      L.workspace.push_back(std::move(b));
    }
    if (n["forward_segmented"]) parseSegmented(r, n["forward_segmented"], L);
  } else if (n["workspace"]) {
    r.fail(n["workspace"], "launch.workspace", "a workspace without launch.forward kernels");
  } else if (n["forward_segmented"]) {
    r.fail(n["forward_segmented"], "launch.forward_segmented", "a segmented forward without launch.forward kernels");
  }
  if (n["decode"]) {
    L.decode = parseKernel(r, n["decode"], "launch.decode", false, L.let_names);
    L.has_decode = true;
    m.has_decode = true;
    m.decode_symbol = L.decode.symbol;
  }
  if (!m.has_forward && !m.has_decode)
    r.fail(n, "launch", "a package needs a forward or a decode kernel; neither is listed");
}

}  // namespace

Manifest parseManifest(const std::string& text, const std::string& file) {
  detail::checkPlainYaml(text, file, "a package manifest");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fieldError(file, e.mark.line + 1, e.mark.column + 1, "", "malformed YAML: " + text::shown(e.msg, 200));
  }
  Reader r(file);
  Manifest m;
  try {
    // The version first, so an old package gets "regenerate it" rather than a list of unknown keys.
    if (!root.IsMap()) r.fail(root, "", "expected a mapping, got " + Reader::describe(root));
    m.dgps_package = int(r.integer(root["dgps_package"], "dgps_package", 1, 1000000));
    if (m.dgps_package != kManifestVersion) {
      r.fail(root["dgps_package"], "dgps_package",
             "expected " + std::to_string(kManifestVersion) + " (the package format this runtime reads), got " +
                 std::to_string(m.dgps_package) +
                 (m.dgps_package < kManifestVersion
                      ? "; the package was written by an older dgpsc: regenerate it with `dgpsc compile <spec.yaml> -o "
                        "<folder>` (scripts/regen_generated.sh for generated/)"
                      : "; the package is newer than this runtime"));
    }
    r.checkKeys(root, "",
                {"dgps_package", "codegen_version", "name", "spec_hash", "source", "spec", "features", "dims",
                 "dtypes", "io", "layer", "launch", "tunables", "default_config", "plan"});
    m.codegen_version = int(r.integer(root["codegen_version"], "codegen_version", 1, 1000000));
    m.name = r.str(root["name"], "name");
    if (!text::isLowerIdentifier(m.name, kMaxIdentifier)) {
      r.fail(root["name"], "name",
             "expected an identifier [a-z][a-z0-9_]* of at most " + std::to_string(kMaxIdentifier) +
                 " characters, got " + Reader::describe(root["name"]));
    }
    m.spec_hash = r.str(root["spec_hash"], "spec_hash");
    if (!text::isLowerHex(m.spec_hash, 16)) {
      r.fail(root["spec_hash"], "spec_hash", "expected 16 lowercase hex digits, got " + Reader::describe(root["spec_hash"]));
    }
    m.source = r.fileName(root["source"], "source");
    m.spec = r.fileName(root["spec"], "spec");

    const YAML::Node f = root["features"];
    r.checkKeys(f, "features", {"decay", "gain", "precond", "precond_side", "precond_source", "solve"}, {"steps", "write_key"});
    m.features.decay = r.enumeration(f["decay"], "features.decay",
                                     enumValues({DecayKind::None, DecayKind::Scalar, DecayKind::Diagonal}));
    m.features.gain = r.enumeration(f["gain"], "features.gain", enumValues({GainKind::None, GainKind::Scalar}));
    m.features.precond =
        r.enumeration(f["precond"], "features.precond", enumValues({PrecondKind::None, PrecondKind::Diagonal}));
    m.features.precond_side = r.enumeration(f["precond_side"], "features.precond_side",
                                            enumValues({PrecondSide::Key, PrecondSide::Query}));
    m.features.precond_source =
        r.enumeration(f["precond_source"], "features.precond_source",
                      enumValues({PrecondSource::EmaSqSquash, PrecondSource::HypergradOgd}));
    m.features.solve = r.enumeration(f["solve"], "features.solve", enumValues({SolveKind::Linear, SolveKind::Delta}));
    if (f["steps"]) m.features.steps = int(r.integer(f["steps"], "features.steps", 1, 4));
    if (f["write_key"])
      m.features.write_key = r.enumeration(f["write_key"], "features.write_key",
                                           std::vector<std::pair<std::string, int>>{{"rebuilt", 0}, {"stored", 1},
                                                                                    {"segments", 2}});

    const YAML::Node d = root["dims"];
    r.checkKeys(d, "dims", {"key", "value"});
    m.key_dims = r.intList(d["key"], "dims.key", 1, 256);
    m.value_dims = r.intList(d["value"], "dims.value", 1, 256);

    const YAML::Node t = root["dtypes"];
    r.checkKeys(t, "dtypes", {"inputs", "state"});
    const YAML::Node in = t["inputs"];
    if (!in.IsSequence() || in.size() == 0) r.fail(in, "dtypes.inputs", "expected a non-empty list of bf16|f16, got " + Reader::describe(in));
    for (std::size_t i = 0; i < in.size(); ++i) {
      DType dt = r.enumeration(in[i], "dtypes.inputs[" + std::to_string(i) + "]", enumValues({DType::BF16, DType::F16}));
      if (std::find(m.input_dtypes.begin(), m.input_dtypes.end(), dt) != m.input_dtypes.end()) {
        r.fail(in[i], "dtypes.inputs[" + std::to_string(i) + "]", "duplicate dtype");
      }
      m.input_dtypes.push_back(dt);
    }
    m.state_dtype = r.enumeration(t["state"], "dtypes.state", enumValues({DType::F32}));

    const YAML::Node io = root["io"];
    r.checkKeys(io, "io", {"initial_state", "final_state", "initial_precond_state", "final_precond_state", "varlen"});
    m.io.initial_state = r.boolean(io["initial_state"], "io.initial_state");
    m.io.final_state = r.boolean(io["final_state"], "io.final_state");
    m.io.initial_precond_state = r.boolean(io["initial_precond_state"], "io.initial_precond_state");
    m.io.final_precond_state = r.boolean(io["final_precond_state"], "io.final_precond_state");
    m.io.varlen = r.boolean(io["varlen"], "io.varlen");
    if (m.features.precond == PrecondKind::None && (m.io.initial_precond_state || m.io.final_precond_state)) {
      r.fail(io, "io", "precond state inputs/outputs are set but features.precond is none");
    }

    parseLayer(r, root["layer"], m);
    parseLaunch(r, root["launch"], m);

    parseTunables(r, root["tunables"], m);
    parseDefaultConfig(r, root["default_config"], m);

    const YAML::Node p = root["plan"];
    r.checkKeys(p, "plan", {"bytes_per_token_head", "flops_per_token_head"});
    m.bytes_per_token_head = r.number(p["bytes_per_token_head"], "plan.bytes_per_token_head");
    m.flops_per_token_head = r.number(p["flops_per_token_head"], "plan.flops_per_token_head");
  } catch (const YAML::Exception& e) {
    // yaml-cpp can still throw on odd documents (e.g. a key that is itself a mapping); keep it one error.
    fieldError(file, e.mark.line + 1, e.mark.column + 1, "", text::shown(e.msg, 200));
  }
  return m;
}

namespace {
// Reads one file of the package with a size limit; `role` names it in the error ("the package manifest").
std::string readPackageFile(const std::string& path, std::uint64_t limit, const std::string& role) {
  FileReadResult r = readRegularFile(path, limit, role);
  if (!r.ok) packageError(path + ": cannot read " + role + ": " + r.error);
  return std::move(r.data);
}

// The package's spec.yaml is what `dgpsc compile` writes: canonicalYaml of the spec. Anything else
// (a tag, `heads.qk: 0` for `any`, a comment, another spelling) means the file was not written by dgpsc
// and may not mean what the hash says; the first differing line is named.
void checkCanonical(const std::string& text, const Spec& spec, const std::string& spath) {
  const std::string canon = canonicalYaml(spec);
  if (text == canon) return;
  std::istringstream a(text), b(canon);
  std::string got, want;
  int line = 0;
  for (;;) {
    ++line;
    const bool more_got = static_cast<bool>(std::getline(a, got));
    const bool more_want = static_cast<bool>(std::getline(b, want));
    if (!more_got && !more_want) break;
    if (more_got && more_want && got == want) continue;
    std::string msg = "the package's spec is not in the canonical form dgpsc compile writes: expected ";
    msg += more_want ? "'" + text::shown(want) + "'" : std::string("the end of the file");
    msg += ", got ";
    msg += more_got ? "'" + text::shown(got) + "'" : std::string("the end of the file");
    msg += " (regenerate the package with dgpsc compile)";
    fieldError(spath, line, 0, "", msg);
  }
  fieldError(spath, 0, 0, "", "the package's spec differs from the canonical form dgpsc compile writes in its line "
                              "endings (regenerate the package with dgpsc compile)");
}

template <typename T>
std::string listString(const std::vector<T>& v) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}
std::string dtypeList(const std::vector<DType>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += std::string(i ? ", " : "") + toString(v[i]);
  return s + "]";
}
template <typename T>
std::vector<T> sorted(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// The manifest describes the same layer as the spec; a mismatch means the package was edited by hand
// or assembled from two compiler runs.
void crossCheck(const Manifest& m, const Spec& s, const std::string& mpath, const std::string& spath) {
  auto mismatch = [&](const std::string& key, const std::string& manifest_value, const std::string& spec_value) {
    fieldError(mpath, 0, 0, key, "is " + manifest_value + " but " + spath + " says " + spec_value +
                                     " (the package is inconsistent; regenerate it with dgpsc compile)");
  };
  if (m.name != s.name) mismatch("name", m.name, s.name);
  if (m.features.decay != s.decay.kind) mismatch("features.decay", toString(m.features.decay), toString(s.decay.kind));
  if (m.features.gain != s.gain.kind) mismatch("features.gain", toString(m.features.gain), toString(s.gain.kind));
  if (m.features.precond != s.precond.kind) {
    mismatch("features.precond", toString(m.features.precond), toString(s.precond.kind));
  }
  if (s.precond.kind == PrecondKind::Diagonal) {
    if (m.features.precond_side != s.precond.side) {
      mismatch("features.precond_side", toString(m.features.precond_side), toString(s.precond.side));
    }
    if (m.features.precond_source != s.precond.source) {
      mismatch("features.precond_source", toString(m.features.precond_source), toString(s.precond.source));
    }
  }
  if (m.features.solve != s.solve.kind) mismatch("features.solve", toString(m.features.solve), toString(s.solve.kind));
  if (m.features.steps != householderSteps(s)) {
    mismatch("features.steps", std::to_string(m.features.steps), "solve.steps " + std::to_string(householderSteps(s)));
  }
  if (sorted(m.key_dims) != sorted(s.key_dims)) mismatch("dims.key", listString(m.key_dims), listString(s.key_dims));
  if (sorted(m.value_dims) != sorted(s.value_dims)) {
    mismatch("dims.value", listString(m.value_dims), listString(s.value_dims));
  }
  if (sorted(m.input_dtypes) != sorted(s.input_dtypes)) {
    mismatch("dtypes.inputs", dtypeList(m.input_dtypes), dtypeList(s.input_dtypes));
  }
  if (m.state_dtype != s.state_dtype) mismatch("dtypes.state", toString(m.state_dtype), toString(s.state_dtype));
  auto b = [](bool x) { return std::string(x ? "true" : "false"); };
  if (m.io.initial_state != s.initial_state) mismatch("io.initial_state", b(m.io.initial_state), b(s.initial_state));
  if (m.io.final_state != s.final_state) mismatch("io.final_state", b(m.io.final_state), b(s.final_state));
  if (m.io.initial_precond_state != s.initial_precond_state) {
    mismatch("io.initial_precond_state", b(m.io.initial_precond_state), b(s.initial_precond_state));
  }
  if (m.io.final_precond_state != s.final_precond_state) {
    mismatch("io.final_precond_state", b(m.io.final_precond_state), b(s.final_precond_state));
  }
  if (m.io.varlen != s.varlen) mismatch("io.varlen", b(m.io.varlen), b(s.varlen));
  if (m.layer.heads_qk != s.heads_qk)
    mismatch("layer.heads_qk", std::to_string(m.layer.heads_qk), std::to_string(s.heads_qk));
  if (m.layer.gva_ratio != s.gva_ratio)
    mismatch("layer.gva_ratio", std::to_string(m.layer.gva_ratio), std::to_string(s.gva_ratio));
  auto scale = [](const std::optional<double>& x) { return x ? std::to_string(*x) : std::string("auto"); };
  if (m.layer.scale != s.scale) mismatch("layer.scale", scale(m.layer.scale), scale(s.scale));
  if (m.layer.precond_gate != specTakesPrecondGate(s))
    mismatch("layer.precond_inputs.gate", b(m.layer.precond_gate), b(specTakesPrecondGate(s)));
  if (m.layer.precond_gain != specTakesPrecondGain(s))
    mismatch("layer.precond_inputs.gain", b(m.layer.precond_gain), b(specTakesPrecondGain(s)));
  if (m.layer.precond_center != specTakesPrecondCenter(s))
    mismatch("layer.precond_inputs.center", b(m.layer.precond_center), b(specTakesPrecondCenter(s)));
  if (m.has_forward != hasKernel(s, KernelKind::ChunkForward)) {
    mismatch("forward", m.has_forward ? "present" : "absent",
             hasKernel(s, KernelKind::ChunkForward) ? "kernels includes chunk_forward" : "no chunk_forward kernel");
  }
  if (m.has_decode != hasKernel(s, KernelKind::Decode)) {
    mismatch("decode", m.has_decode ? "present" : "absent",
             hasKernel(s, KernelKind::Decode) ? "kernels includes decode" : "no decode kernel");
  }
  auto tun = [&](const char* k, const std::vector<int>& a, const std::vector<int>& bb) {
    if (sorted(a) != sorted(bb)) mismatch(std::string("tunables.") + k, listString(a), listString(bb));
  };
  tun("chunk", m.tunables.chunk, s.tuning.chunk);
  tun("block_v", m.tunables.block_v, s.tuning.block_v);
  tun("warps", m.tunables.warps, s.tuning.warps);
  tun("stages", m.tunables.stages, s.tuning.stages);
}
}  // namespace

namespace {
// The layer as the manifest describes it (Package::layer): the fields validation reads.
Spec layerOf(const Manifest& m) {
  Spec s;
  s.name = m.name;
  s.decay.kind = m.features.decay;
  s.gain.kind = m.features.gain;
  s.precond.kind = m.features.precond;
  s.precond.side = m.features.precond_side;
  s.precond.source = m.features.precond_source;
  s.precond.squash.has_gate = m.layer.precond_gate;
  s.precond.squash.has_gain = m.layer.precond_gain;
  s.precond.hypergrad.has_retention = m.layer.precond_gate;
  s.solve.kind = m.features.solve;
  s.solve.steps = m.features.steps;
  s.scale = m.layer.scale;
  s.heads_qk = m.layer.heads_qk;
  s.gva_ratio = m.layer.gva_ratio;
  s.key_dims = m.key_dims;
  s.value_dims = m.value_dims;
  s.input_dtypes = m.input_dtypes;
  s.state_dtype = m.state_dtype;
  s.initial_state = m.io.initial_state;
  s.final_state = m.io.final_state;
  s.initial_precond_state = m.io.initial_precond_state;
  s.final_precond_state = m.io.final_precond_state;
  s.varlen = m.io.varlen;
  s.kernels.clear();
  if (m.has_forward) s.kernels.push_back(KernelKind::ChunkForward);
  if (m.has_decode) s.kernels.push_back(KernelKind::Decode);
  s.tuning = m.tunables;
  return s;
}

// spec.yaml, read, parsed and checked against the manifest (Package::spec).
Spec loadSpec(const std::string& dir, const Manifest& manifest) {
  const std::string mpath = dir + "/manifest.yaml";
  const std::string spath = dir + "/" + manifest.spec;
  const std::string spec_text = readPackageFile(spath, file_limits::kManifest, "the package's spec");
  detail::checkPlainYaml(spec_text, spath, "a spec");
  ParseResult parsed = parseSpecString(spec_text, spath);
  if (!parsed.ok()) {
    std::string msg = spath + ": the package's spec does not parse:";
    int shown = 0;
    for (const auto& d : parsed.diagnostics) {
      if (d.severity != Severity::Error) continue;
      msg += "\n  " + formatDiagnostic(d);
      if (++shown == 5) break;
    }
    packageError(msg);
  }
  Spec spec = *parsed.spec;
  const std::string hash = specHash(spec);
  if (hash != manifest.spec_hash) {
    fieldError(mpath, 0, 0, "spec_hash",
               "is \"" + manifest.spec_hash + "\" but " + spath + " hashes to \"" + hash +
                   "\" (the spec was edited after the package was generated; regenerate it with dgpsc compile)");
  }
  crossCheck(manifest, spec, mpath, spath);
  checkCanonical(spec_text, spec, spath);
  return spec;
}
}  // namespace

const Spec& Package::spec() const {
  std::call_once(spec_->once, [this] { spec_->spec = loadSpec(dir_, manifest_); });
  return spec_->spec;
}

Manifest readManifest(const std::string& path) {
  return parseManifest(readPackageFile(path, file_limits::kManifest, "the package manifest"), path);
}

Package Package::open(const std::string& directory) {
  struct stat st {};
  if (::stat(directory.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    const auto ends = [&](const std::string& suffix) {
      return directory.size() >= suffix.size() && directory.compare(directory.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends(".yaml") || ends(".yml")) {
      packageError(directory + ": this is a spec; compile it first (dgpsc compile " + directory +
                   " -o <folder>) or use `dgpsc tune " + directory +
                   " --shape ...`, which compiles and tunes in one step (expected a package folder)");
    }
    packageError(directory + ": expected a package folder (holding manifest.yaml, spec.yaml, kernels.cu), got a file");
  }
  Package p;
  p.dir_ = directory;
  while (p.dir_.size() > 1 && p.dir_.back() == '/') p.dir_.pop_back();
  p.manifest_ = readManifest(p.dir_ + "/manifest.yaml");
  p.layer_ = layerOf(p.manifest_);
  const std::string mpath = p.dir_ + "/manifest.yaml";
  p.source_ = readPackageFile(p.sourcePath(), file_limits::kSource, "the kernel source");
  if (p.source_.empty()) packageError(p.sourcePath() + ": the kernel source is empty");
  for (const auto& sym : p.manifest_.forward_symbols) {
    if (p.source_.find(sym) == std::string::npos) {
      fieldError(mpath, 0, 0, "launch.forward", "symbol " + sym + " does not occur in " + p.sourcePath());
    }
  }
  for (const KernelLaunchRule& k : p.manifest_.launch.forward_segmented) {
    if (p.source_.find(k.symbol) == std::string::npos) {
      fieldError(mpath, 0, 0, "launch.forward_segmented",
                 "symbol " + k.symbol + " does not occur in " + p.sourcePath());
    }
  }
  if (p.manifest_.has_decode && p.source_.find(p.manifest_.decode_symbol) == std::string::npos) {
    fieldError(mpath, 0, 0, "launch.decode.symbol", p.manifest_.decode_symbol + " does not occur in " + p.sourcePath());
  }
  static std::atomic<std::uint64_t> next_instance_id{1};
  p.instance_id_ = next_instance_id.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void Package::checkConfig(const TileConfig& c) const {
  auto check = [&](const char* key, int v, const std::vector<int>& allowed) {
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                         "tile config for package " + name() + ": " + key + "=" + std::to_string(v) +
                             " is not in the package's tunables." + key + " " + listString(allowed));
    }
  };
  check("chunk", c.chunk, manifest_.tunables.chunk);
  check("block_v", c.block_v, manifest_.tunables.block_v);
  check("warps", c.warps, manifest_.tunables.warps);
  check("stages", c.stages, manifest_.tunables.stages);
  if (c.segment_chunks < -1)
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "tile config for package " + name() + ": segment_chunks=" + std::to_string(c.segment_chunks) +
                           ": expected 0 (the plain state pass), a segment length >= 1 in chunks, or unset");
  if (c.segment_chunks >= 1 && manifest_.launch.forward_segmented.empty())
    throw RuntimeError(RuntimeErrorCode::InvalidArgument,
                       "tile config for package " + name() + ": segment_chunks=" + std::to_string(c.segment_chunks) +
                           " but the package has no segmented state pass (launch.forward_segmented; the compiler writes it "
                           "for every chunk forward: recompile the package with dgpsc compile); use 0 or leave it unset");
}

}  // namespace dgps
