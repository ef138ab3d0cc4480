#include "YamlStrict.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <sstream>

#include "TextParse.h"
#include "dgps/dsl/Diagnostic.h"
#include "dgps/runtime/Error.h"

namespace dgps {
namespace detail {
namespace {

// Records the first forbidden construct; the rest of the stream is still consumed by the parser.
class PlainChecker : public YAML::EventHandler {
 public:
  bool failed() const { return !problem_.empty(); }
  const YAML::Mark& mark() const { return mark_; }
  const std::string& problem() const { return problem_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t a) override { anchor(m, a); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    flag(m, "an alias (*name) is not allowed; write the value out");
  }
  void OnScalar(const YAML::Mark& m, const std::string& tag, YAML::anchor_t a, const std::string&) override {
    this->tag(m, tag);
    anchor(m, a);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string& tag, YAML::anchor_t a, YAML::EmitterStyle::value) override {
    this->tag(m, tag);
    anchor(m, a);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string& tag, YAML::anchor_t a, YAML::EmitterStyle::value) override {
    this->tag(m, tag);
    anchor(m, a);
  }
  void OnMapEnd() override {}

 private:
  void flag(const YAML::Mark& m, const std::string& why) {
    if (failed()) return;
    mark_ = m;
    problem_ = why;
  }
  // yaml-cpp reports "?" for an untagged plain node and "!" for a quoted scalar; anything else was
  // written explicitly.
  void tag(const YAML::Mark& m, const std::string& t) {
    if (t.empty() || t == "?" || t == "!") return;
    std::string spelled = t;
    const std::string core = "tag:yaml.org,2002:";
    if (spelled.rfind(core, 0) == 0) spelled = "!!" + spelled.substr(core.size());
    flag(m, "the YAML tag " + text::shown(spelled, 40) + " is not allowed; write the plain value");
  }
  void anchor(const YAML::Mark& m, YAML::anchor_t a) {
    if (a != YAML::NullAnchor) flag(m, "an anchor (&name) is not allowed; write the value out");
  }

  YAML::Mark mark_;
  std::string problem_;
};

// In the schema readers' one error style (dsl Diagnostic.h): "<file>:<line>:<col>: error: <msg>".
[[noreturn]] void fail(const std::string& file, const YAML::Mark& m, const std::string& msg) {
  const bool located = m.line >= 0;
  throw RuntimeError(RuntimeErrorCode::Package, formatFileProblem(Severity::Error, file, located ? m.line + 1 : 0,
                                                                  located ? m.column + 1 : 0, "", msg));
}

}  // namespace

void checkPlainYaml(const std::string& text, const std::string& file, const std::string& what) {
  std::istringstream in(text);
  PlainChecker checker;
  try {
    YAML::Parser parser(in);
    // At most two documents are read: yaml-cpp can yield empty documents forever on some malformed
    // input (a stray ',' where a value starts), so the loop must not run until the stream ends.
    if (!parser.HandleNextDocument(checker)) fail(file, YAML::Mark(), "empty file; expected a mapping (" + what + ")");
    if (checker.failed()) fail(file, checker.mark(), checker.problem());
    struct DocMark : PlainChecker {
      YAML::Mark start;
      bool seen = false;
      void OnDocumentStart(const YAML::Mark& m) override {
        if (!seen) start = m;
        seen = true;
      }
    } rest;
    if (parser.HandleNextDocument(rest)) {
      fail(file, rest.start, "a second YAML document; " + what + " is a single document (no '---' or '...' markers)");
    }
  } catch (const YAML::Exception& e) {
    fail(file, e.mark, "malformed YAML: " + text::shown(e.msg, 200));
  }
}

}  // namespace detail
}  // namespace dgps
