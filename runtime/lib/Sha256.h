// SHA-256 (FIPS 180-4), used for binary-cache keys and entry checksums. Internal to the runtime.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dgps {
namespace detail {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t size);
  void update(const std::string& s) { update(s.data(), s.size()); }
  /// Appends a length-prefixed field, so that ("ab","c") and ("a","bc") hash differently.
  void field(const std::string& s);
  std::array<std::uint8_t, 32> digest();
  std::string hexDigest();

 private:
  void block(const std::uint8_t* p);
  std::uint32_t h_[8];
  std::uint8_t buf_[64];
  std::size_t buf_len_ = 0;
  std::uint64_t total_ = 0;
};

std::string sha256Hex(const std::string& data);
std::string toHex(const std::uint8_t* data, std::size_t size);

}  // namespace detail
}  // namespace dgps
