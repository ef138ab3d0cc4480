#include "VariantTable.h"

#include <sstream>

namespace dgps {
namespace detail {

std::size_t VariantKeyHash::operator()(const VariantKey& k) const {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a offset basis, over whole fields rather than bytes
  auto mix = [&h](std::uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  mix(k.package_id);
  mix(reinterpret_cast<std::uintptr_t>(k.context));
  mix(std::uint64_t(std::int64_t(k.device)));
  mix(std::uint64_t(k.key_dim));
  mix(std::uint64_t(k.value_dim));
  mix(std::uint64_t(k.input_dtype));
  mix(std::uint64_t(std::uint32_t(k.config.chunk)) << 32 | std::uint32_t(k.config.block_v));
  mix(std::uint64_t(std::uint32_t(k.config.warps)) << 32 | std::uint32_t(k.config.stages));
  return std::size_t(h);
}

std::string toString(const VariantKey& k) {
  std::ostringstream os;
  os << "package " << k.package_id << ", device " << k.device << " (context " << k.context << "), K=" << k.key_dim
     << ", V=" << k.value_dim << ", " << toString(k.input_dtype) << ", " << toString(k.config);
  return os.str();
}

}  // namespace detail
}  // namespace dgps
