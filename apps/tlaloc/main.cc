// The tlaloc command line: one binary, one subcommand per job.
//
// Parse errors are reported here, one way for every command, and always exit kExitUsage: an
// unknown command or option gets the nearest registered name as a suggestion (CLI11 only says
// "not expected"), a missing required option names all its spellings and what it is for.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "blas_core.h"
#include "commands.h"
#include "tlaloc/models/family.h"
#include "tlaloc/pjrt/pjrt_backend.h"

namespace tlaloc::cli {
namespace {

// Optimal string alignment distance: Levenshtein plus adjacent transpositions ("genreate").
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The candidate nearest to `word`, or "" when none is close: a few edits for its length, or a
// candidate that `word` is the only abbreviation of.
std::string Suggest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(1, std::min<size_t>(3, word.size() / 3)) + 1;
  for (const auto& c : candidates) {
    const size_t dist = EditDistance(word, c);
    if (dist < best_distance) best = c, best_distance = dist;
  }
  if (!best.empty()) return best;
  std::vector<std::string> prefixed;
  for (const auto& c : candidates)
    if (word.size() >= 3 && c.rfind(word, 0) == 0) prefixed.push_back(c);
  return prefixed.size() == 1 ? prefixed[0] : "";
}

// "tlaloc kernels lock": the names from the root down.
std::string CommandPath(const CLI::App* app) {
  std::string path;
  for (; app != nullptr; app = app->get_parent())
    path = app->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

std::vector<CLI::App*> Subcommands(CLI::App* app) {
  return app->get_subcommands([](CLI::App* sub) { return !sub->get_name().empty(); });
}

// "--model (-m)", or a positional's name.
std::string Spellings(const CLI::Option* opt) {
  std::vector<std::string> names;
  for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
  for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  if (names.empty()) return opt->get_name();
  std::string text = names[0];
  for (size_t i = 1; i < names.size(); ++i) text += (i == 1 ? " (" : ", ") + names[i];
  return names.size() > 1 ? text + ")" : text;
}

// What argv selects, found again by walking it after CLI11 refused it: the deepest subcommand,
// and the first word that is neither a command of a command-taking level nor an option there.
struct Walk {
  CLI::App* command = nullptr;
  std::string unknown_command;
  std::string unknown_option;
};

bool LooksLikeOption(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  return !(std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.');  // -1, -.5
}

Walk WalkArguments(CLI::App& app, int argc, char** argv) {
  Walk walk;
  walk.command = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (LooksLikeOption(arg)) {
      const bool is_long = arg.rfind("--", 0) == 0;
      const std::string name = is_long ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);
      const bool inline_value = is_long ? arg.find('=') != std::string::npos : arg.size() > 2;
      const CLI::Option* opt = walk.command->get_option_no_throw(name);
      if (opt == nullptr) {
        walk.unknown_option = name;
        return walk;
      }
      // One value follows unless it was given inline; later values of a list option read as
      // positionals, which is harmless below a command-taking level.
      if (!inline_value && opt->get_type_size_max() > 0 && i + 1 < argc &&
          !LooksLikeOption(argv[i + 1]))
        ++i;
      continue;
    }
    CLI::App* next = nullptr;
    for (CLI::App* sub : Subcommands(walk.command))
      if (sub->check_name(arg)) next = sub;
    if (next != nullptr) {
      walk.command = next;
      continue;
    }
    const auto positionals =
        walk.command->get_options([](const CLI::Option* o) { return o->get_positional(); });
    if (!Subcommands(walk.command).empty() && positionals.empty()) {
      walk.unknown_command = arg;
      return walk;
    }
  }
  return walk;
}

// Captured defaults of empty lists read "=[]" in --help; an empty list is no default at all.
void HideEmptyListDefaults(CLI::App* app) {
  for (CLI::Option* opt : app->get_options())
    if (opt->get_default_str() == "[]") opt->default_str("");
  for (CLI::App* sub : Subcommands(app)) HideEmptyListDefaults(sub);
}

void PrintCommandList(CLI::App* app) {
  std::fprintf(stderr, "commands:\n");
  for (CLI::App* sub : Subcommands(app))
    std::fprintf(stderr, "  %-16s %s\n", sub->get_name().c_str(), sub->get_description().c_str());
}

int ReportParseError(CLI::App& app, int argc, char** argv, const CLI::ParseError& error) {
  const Walk walk = WalkArguments(app, argc, argv);
  CLI::App* cmd = walk.command;
  const std::string where = CommandPath(cmd);
  if (!walk.unknown_command.empty()) {
    std::vector<std::string> names;
    for (CLI::App* sub : Subcommands(cmd)) names.push_back(sub->get_name());
    const std::string near = Suggest(walk.unknown_command, names);
    std::fprintf(stderr, "%s: unknown command '%s'%s\n", where.c_str(),
                 walk.unknown_command.c_str(),
                 near.empty() ? "" : (" (did you mean " + near + "?)").c_str());
    PrintCommandList(cmd);
    return kExitUsage;
  }
  if (!walk.unknown_option.empty()) {
    const bool is_long = walk.unknown_option.rfind("--", 0) == 0;
    std::vector<std::string> names;
    for (const CLI::Option* opt : cmd->get_options()) {
      for (const auto& l : opt->get_lnames())
        if (is_long) names.push_back("--" + l);
      for (const auto& s : opt->get_snames())
        if (!is_long) names.push_back("-" + s);
    }
    const std::string near = Suggest(walk.unknown_option, names);
    std::fprintf(stderr, "%s: unknown option '%s'%s\nRun '%s --help' for its options.\n",
                 where.c_str(), walk.unknown_option.c_str(),
                 near.empty() ? "" : (" (did you mean " + near + "?)").c_str(), where.c_str());
    return kExitUsage;
  }
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
    for (const CLI::Option* opt : cmd->get_options()) {
      if (!opt->get_required() || opt->count() > 0) continue;
      std::fprintf(stderr, "%s: %s is required: %s\nRun '%s --help' for its options.\n",
                   where.c_str(), Spellings(opt).c_str(), opt->get_description().c_str(),
                   where.c_str());
      return kExitUsage;
    }
    if (!Subcommands(cmd).empty() && cmd->get_subcommands().empty()) {
      std::fprintf(stderr, "%s: a command is required\n", where.c_str());
      PrintCommandList(cmd);
      return kExitUsage;
    }
  }
  // "--model: 1 required TEXT missing": an option given without its value, at the end of argv.
  const std::string what = error.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr &&
      what.find(" missing") != std::string::npos) {
    if (const CLI::Option* opt = cmd->get_option_no_throw(what.substr(0, what.find(':')))) {
      std::fprintf(stderr, "%s: %s needs a value: %s\n", where.c_str(), Spellings(opt).c_str(),
                   opt->get_description().c_str());
      return kExitUsage;
    }
  }
  std::fprintf(stderr, "%s: %s\nRun '%s --help' for its options.\n", where.c_str(), what.c_str(),
               where.c_str());
  return kExitUsage;
}

}  // namespace
}  // namespace tlaloc::cli

int main(int argc, char** argv) {
  using namespace tlaloc::cli;
  ReexecWithFittingBlasCore();
  // Explicit registrations (static initialisers in static libraries may be dropped): the model
  // families for config.json parsing, the PJRT client for runtime::OpenBackend.
  tlaloc::models::RegisterModelFamilies();
  tlaloc::pjrt::RegisterBackendOpener();
  // Named, so that usage lines and messages say "tlaloc" whatever argv[0] is.
  CLI::App app{"tlaloc: train and serve transformer models on the CPU or any PJRT device",
               "tlaloc"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tlaloc 0.1.0"));
  // Set before any command registers so that every subcommand inherits them: defaults shown in
  // each --help, and a scalar option given twice keeps its last value (lists keep every value).
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
  app.footer(
      "Exit status: 0 success, 1 failure, 2 usage error. 'tlaloc COMMAND --help' lists a "
      "command's options.\n");
  RegisterCommands(app);
  HideEmptyListDefaults(&app);
  if (argc <= 1) {
    std::fputs(app.help().c_str(), stdout);
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version: printed, exit 0
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own exit, not a parse error
  } catch (const CLI::ParseError& e) {
    return ReportParseError(app, argc, argv, e);
  } catch (const std::bad_alloc&) {
    // The last line of defence: commands check sizes before allocating, but a message and exit
    // status 1 beat an abort (exit 134) when one is missed.
    std::fputs("tlaloc: out of memory; the model, batch or context is too large for this machine\n",
               stderr);
    return kExitFailure;
  }
  return ExitCode();
}
