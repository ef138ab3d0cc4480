// Deterministic mutations of a valid input, for the robustness suite: each parser must turn every
// mutant into a result or its documented error, never a crash, a hang or a stray exception.
//
// One seed gives one mutant (so a failure names the seed that reproduces it). Mutations:
//   flip      one to four random bytes replaced by random values
//   truncate  cut at a random position
//   run       a long run (1 KiB .. 64 KiB) of one character or a short token inserted at a random place
//   dupline   a random line repeated 1 .. 50 times in place
//   number    a decimal number replaced by a huge, negative, zero, fractional, NaN or infinite value
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace dgps::test {

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  std::string mutate(const std::string& in) {
    switch (pick(5)) {
      case 0: return flip(in);
      case 1: return truncate(in);
      case 2: return insertRun(in);
      case 3: return duplicateLine(in);
      default: return replaceNumber(in);
    }
  }

 private:
  std::size_t pick(std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }

  std::string flip(std::string s) {
    if (s.empty()) return s;
    for (std::size_t i = 0, n = 1 + pick(4); i < n; ++i) s[pick(s.size())] = static_cast<char>(pick(256));
    return s;
  }

  std::string truncate(const std::string& s) { return s.substr(0, pick(s.size() + 1)); }

  std::string insertRun(std::string s) {
    static const std::vector<std::string> units = {"a", "9", "[", "{", "\"", " ", "-", ":", "\n", "!!str ",
                                                   "- ", "@x", "<", "array<i64: ", "\\", "\xff"};
    const std::string& u = units[pick(units.size())];
    const std::size_t len = 1024 + pick(64 * 1024);
    std::string run;
    while (run.size() < len) run += u;
    s.insert(pick(s.size() + 1), run);
    return s;
  }

  std::string duplicateLine(const std::string& s) {
    std::vector<std::size_t> starts = {0};
    for (std::size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n' && i + 1 < s.size()) starts.push_back(i + 1);
    const std::size_t k = pick(starts.size());
    const std::size_t b = starts[k];
    std::size_t e = s.find('\n', b);
    e = e == std::string::npos ? s.size() : e + 1;
    std::string line = s.substr(b, e - b);
    if (line.empty() || line.back() != '\n') line += '\n';
    std::string copies;
    for (std::size_t i = 0, n = 1 + pick(50); i < n; ++i) copies += line;
    return s.substr(0, e) + copies + s.substr(e);
  }

  std::string replaceNumber(const std::string& s) {
    static const std::vector<std::string> values = {
        "0",   "-1",  "-0", "4294967424", "4294967297", "-4294967296", "9223372036854775807",
        "99999999999999999999999", "-9223372036854775808", "1e999", "-1e999", "1e-320", "nan", ".nan",
        "inf", "-.inf", "0.5", "3", "2147483648", "65536", "1e308"};
    std::vector<std::size_t> numbers;
    for (std::size_t i = 0; i < s.size(); ++i)
      if (s[i] >= '0' && s[i] <= '9' && (i == 0 || !(s[i - 1] >= '0' && s[i - 1] <= '9'))) numbers.push_back(i);
    if (numbers.empty()) return flip(s);
    const std::size_t b = numbers[pick(numbers.size())];
    std::size_t e = b;
    while (e < s.size() && ((s[e] >= '0' && s[e] <= '9') || s[e] == '.' || s[e] == 'e' || s[e] == '-')) ++e;
    return s.substr(0, b) + values[pick(values.size())] + s.substr(e);
  }

  std::mt19937_64 rng_;
};

}  // namespace dgps::test
