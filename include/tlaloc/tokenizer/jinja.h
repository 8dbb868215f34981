// A Jinja template engine for chat templates (the `chat_template` of a checkpoint's
// tokenizer_config.json), written here because Debian 12 packages no C++ Jinja library.
//
// It renders the way transformers' apply_chat_template does with jinja2: an
// ImmutableSandboxedEnvironment with trim_blocks=True, lstrip_blocks=True and the loopcontrols
// extension (break/continue), a `tojson` filter that is json.dumps(ensure_ascii=False), and the
// globals raise_exception(msg), strftime_now(fmt), namespace(...), dict(...) and range(...).
// The language covered is what published chat templates use (expressions, filters, tests, if,
// for, set, namespace, macro, whitespace control, comments, raw); anything else is an error that
// names the template line and column. Undefined names behave as jinja2's default Undefined:
// falsy, empty when printed or iterated, an error when an attribute of them is read.
//
// Rendering is bounded (loop iterations, call depth, output size; see JinjaLimits) so an
// untrusted template cannot hang or exhaust memory: reaching a limit is an error naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tlaloc/support/status.h"

namespace tlaloc::jinja {

struct Program;  // the parsed template (src/tokenizer/jinja_internal.h)

struct JinjaLimits {
  int64_t max_output_bytes = 64 << 20;     // the rendered text, and any one string built
  int64_t max_loop_iterations = 10000000;  // summed over every for loop and range()
  int max_call_depth = 200;                // nested macro calls
};

class Template {
 public:
  // Parses `source`; an error names the line and column and what was found.
  static StatusOr<Template> Parse(std::string_view source);

  // Renders with `context` (a JSON object; insertion order of keys is kept, as in Python) as the
  // template's variables. Errors (raise_exception, a type error, a limit) name the line.
  StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                               const JinjaLimits& limits = {}) const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace tlaloc::jinja
