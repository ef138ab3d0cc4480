// --shape parsing: every malformed string is ONE clear error naming the offending piece; a valid one is
// completed against the spec (H from the spec when fixed, HV = H * gva_ratio).
#include <gtest/gtest.h>

#include "dgps/runtime/Error.h"
#include "dgps/runtime/tune/TuneCli.h"

namespace dgps {
namespace {

using tune::parseShapeArg;
using tune::resolveShapeArg;
using tune::ShapeArg;

std::string errorOf(const std::string& text) {
  try {
    parseShapeArg(text);
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.code(), RuntimeErrorCode::InvalidArgument);
    return e.what();
  }
  return "";
}

TEST(ShapeArg, ParsesEveryKey) {
  const ShapeArg a = parseShapeArg("B=8,T=4096,H=16,HV=32,K=128,V=64");
  EXPECT_EQ(a.B, 8);
  EXPECT_EQ(a.T, 4096);
  EXPECT_EQ(a.H, 16);
  EXPECT_EQ(a.HV, 32);
  EXPECT_EQ(a.K, 128);
  EXPECT_EQ(a.V, 64);
}

TEST(ShapeArg, OrderAndSpacesDoNotMatter) {
  const ShapeArg a = parseShapeArg(" V=128 , K=128,T=7 ");
  EXPECT_EQ(a.B, 0);
  EXPECT_EQ(a.T, 7);
  EXPECT_EQ(a.K, 128);
  EXPECT_EQ(a.V, 128);
}

TEST(ShapeArg, MalformedStringsNameThePiece) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"", "--shape is empty"},
      {"   ", "--shape is empty"},
      {"B=8,,T=4", "empty entry"},
      {"B=8,T=4,", "trailing comma"},
      {"B8", "'B8' is not KEY=VALUE"},
      {"X=3", "unknown key 'X'"},
      {"b=3", "unknown key 'b'"},
      {"T=4k", "'T=4k': T must be a positive integer"},
      {"T=", "'T=': T must be a positive integer"},
      {"T=0", "'T=0': T must be a positive integer"},
      {"T=-5", "'T=-5': T must be a positive integer"},
      {"T=1.5", "'T=1.5': T must be a positive integer"},
      {"T=99999999999999999999999", "T must be a positive integer"},
      {"T=4,T=8", "key T given twice"},
  };
  for (const Case& c : cases) {
    const std::string e = errorOf(c.text);
    EXPECT_NE(e.find(c.needle), std::string::npos) << "input '" << c.text << "' gave: " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
  }
}

Spec specWith(int heads_qk, int gva) {
  Spec s;
  s.name = "s";
  s.heads_qk = heads_qk;
  s.gva_ratio = gva;
  return s;
}

TEST(ShapeArg, ResolveFillsDefaultsFromTheSpec) {
  ReferenceProblem s = resolveShapeArg(parseShapeArg("T=100,H=4,K=64,V=64"), specWith(0, 2));
  EXPECT_EQ(s.batch, 1);
  EXPECT_EQ(s.seq_len, 100);
  EXPECT_EQ(s.heads_qk, 4);
  EXPECT_EQ(s.heads_v, 8);
  s = resolveShapeArg(parseShapeArg("B=3,T=100,K=64,V=64"), specWith(6, 1));
  EXPECT_EQ(s.heads_qk, 6);
  EXPECT_EQ(s.heads_v, 6);
}

TEST(ShapeArg, ResolveRejectsWhatTheSpecContradicts) {
  auto err = [](const std::string& text, const Spec& spec) {
    try {
      resolveShapeArg(parseShapeArg(text), spec);
    } catch (const RuntimeError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("H=4,K=64,V=64", specWith(0, 1)).find("T is required"), std::string::npos);
  EXPECT_NE(err("T=4,H=4,V=64", specWith(0, 1)).find("K is required"), std::string::npos);
  EXPECT_NE(err("T=4,K=64,V=64", specWith(0, 1)).find("H is required"), std::string::npos);
  EXPECT_NE(err("T=4,H=5,K=64,V=64", specWith(4, 1)).find("fixes H=4"), std::string::npos);
  EXPECT_NE(err("T=4,H=4,HV=4,K=64,V=64", specWith(0, 2)).find("HV must be H*2 = 8"), std::string::npos);
}

}  // namespace
}  // namespace dgps
