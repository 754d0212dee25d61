// `channel`: the command-line frontend. Parses flags with CLI11, dispatches to the
// registered subcommand and turns every error into one line on stderr and a non-zero exit.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "command.h"
#include "util/error.h"

namespace {

// Every failure is exactly one line on stderr, so that scripts can show or match it.
void print_error(std::string message, const char* hint = "") {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "channel: error: %s%s\n", message.c_str(), hint);
}

}  // namespace

namespace channel::cli {
std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}
}  // namespace channel::cli

int main(int argc, char** argv) {
  using namespace channel::cli;
  CLI::App app{"channel: an inference engine for always-on LLM agents", "channel"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "channel 0.1.0");

  auto& registry = command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const CommandSpec& a, const CommandSpec& b) { return a.name < b.name; });
  std::map<CLI::App*, std::function<int()>> actions;
  for (auto& spec : registry) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.help);
    actions[sub] = spec.setup(*sub);
  }

  // An unknown command would otherwise be reported as "A subcommand is required".
  const bool known =
      argc > 1 && std::any_of(registry.begin(), registry.end(),
                              [&](const CommandSpec& c) { return c.name == argv[1]; });
  if (argc > 1 && argv[1][0] != '-' && !known) {
    print_error(std::string("unknown command '") + argv[1] + "'", " (see 'channel --help')");
    return 2;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // CLI11 checks required options before unexpected ones; name the unexpected one first.
    for (const auto& [sub, action] : actions) {
      if (sub->parsed() && !sub->remaining().empty()) {
        print_error("unexpected argument '" + sub->remaining().front() + "'",
                    " (see 'channel <command> --help')");
        return 2;
      }
    }
    if (!app.remaining().empty()) {
      print_error("unexpected argument '" + app.remaining().front() + "'",
                  " (see 'channel --help')");
      return 2;
    }
    print_error(e.what(), " (see 'channel <command> --help')");
    return 2;
  }

  try {
    for (auto& [sub, action] : actions) {
      if (sub->parsed()) return action();
    }
  } catch (const channel::Error& e) {
    print_error(e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return 1;
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
  return 1;
}
