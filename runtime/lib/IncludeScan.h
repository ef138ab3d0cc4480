// The #include directives of a package's kernel source, found without a preprocessor. NVRTC resolves
// an #include it has no in-memory header for on the file system (an absolute path, the working
// folder, -I folders) and echoes what it read into its log, so a package could make the runtime read
// and show any file. A package's source may include only the device library the runtime embeds.
//
// The scan is deliberately conservative: it looks at every logical line (backslash-newline splices
// joined) and at the text after every "*/", skips blanks and /* */ comments, and treats '#', "%:"
// (digraph) and "??=" (trigraph) as a directive start. An #include the preprocessor would skip (in a
// comment, a raw string or #if 0) is still checked: refusing a harmless line is acceptable, missing a
// real one is not. `__has_include` anywhere is refused as well (it probes other files' existence).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace dgps {
namespace detail {

struct IncludeViolation {
  int line = 0;          ///< 1-based physical line where the directive starts
  std::string directive; ///< the directive as written (cut for messages)
  std::string why;       ///< e.g. "includes \"/etc/passwd\", which is not a header of the device library"
};

/// The first include directive whose target `allowed` rejects, or one that is not a plain "name" /
/// <name> (a computed #include MACRO), or a use of __has_include. nullopt when there is none.
std::optional<IncludeViolation> findDisallowedInclude(std::string_view source,
                                                      const std::function<bool(const std::string&)>& allowed);

}  // namespace detail
}  // namespace dgps
