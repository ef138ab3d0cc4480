// Safetensors read/write (https://huggingface.co/docs/safetensors format):
//   bytes 0..7   N, the header length, unsigned 64-bit little-endian
//   bytes 8..8+N a JSON object {name: {"dtype": "BF16"|"F16"|"F32"|"F64"|"I32"|"I64",
//                "shape": [d0, ...], "data_offsets": [begin, end]}, "__metadata__": {str: str}}
//   the rest     the data buffer; offsets are relative to its start, little-endian, row-major.
//
// Reading validates everything and throws DataError naming the file (and tensor) on: a file shorter than
// 8 bytes, a header length past the end of the file, a header that is not a JSON object, a key
// written twice (two tensors of one name), nesting deeper than a header has, an entry without
// a known dtype / non-negative integer shape / [begin, end] offsets, offsets past the data buffer, a
// byte range whose size differs from numel * element size, overlapping tensors, or bytes of the data
// buffer that no tensor covers. No input, however corrupt, crashes the reader.
#pragma once

#include <map>
#include <string>

#include "dgps/dsl/Tensor.h"

namespace dgps {

struct SafetensorsFile {
  TensorMap tensors;
  std::map<std::string, std::string> metadata;  ///< the optional "__metadata__" object.
};

/// Parses a whole safetensors image; `source` names it in error messages (usually the file path).
SafetensorsFile parseSafetensors(const std::string& bytes, const std::string& source);
/// Reads and parses `path` through readRegularFile (FileRead.h: regular files up to
/// file_limits::kTensors only). Throws DataError (unreadable file or any corruption listed above).
SafetensorsFile readSafetensors(const std::string& path);

/// Serialises tensors in name order, contiguous, header padded with spaces to a multiple of 8 bytes.
/// Throws DataError for a tensor named "__metadata__" or an empty name.
std::string serializeSafetensors(const SafetensorsFile& file);
/// Writes `file` to `path`. Throws DataError when the file cannot be written.
void writeSafetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace dgps
