// `channel`: the command-line frontend. Parses flags with CLI11, dispatches to the
// registered subcommand and turns every error into one line on stderr and a non-zero exit.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cli_errors.h"
#include "cli_common.h"
#include "command.h"
#include "util/error.h"

namespace {

// "run", "mem show": the subcommands given, for the "(see 'channel ... --help')" hint.
std::string command_path(const CLI::App& app) {
  std::string path;
  const CLI::App* at = &app;
  while (true) {
    const auto subs = at->get_subcommands();
    if (subs.empty()) break;
    at = subs.front();
    path += (path.empty() ? "" : " ") + at->get_name();
  }
  return path;
}

// The first argument CLI11 could not place, looking from the deepest subcommand given up to
// the program; empty when there is none.
std::string first_extra(const CLI::App& app) {
  std::vector<const CLI::App*> chain{&app};
  while (!chain.back()->get_subcommands().empty())
    chain.push_back(chain.back()->get_subcommands().front());
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    if (!(*it)->remaining().empty()) return (*it)->remaining().front();
  return {};
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
    print_error(std::string("unknown command '") + argv[1] + "' (see 'channel --help')");
    return kExitUsage;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    const std::string command = command_path(app);
    const std::string see =
        command.empty() ? " (see 'channel --help')" : " (see 'channel " + command + " --help')";
    // CLI11 checks required options before unexpected ones; name the unexpected one first.
    const std::string extra = first_extra(app);
    if (!extra.empty()) {
      print_error((extra.size() > 1 && extra[0] == '-' ? extra + ": unknown flag"
                                                       : "unexpected argument '" + extra + "'") +
                  see);
      return kExitUsage;
    }
    print_error(describe_parse_error(e, command));
    return kExitUsage;
  }

  for (const std::string& w : take_deferred_warnings()) print_warning(w);
  try {
    for (auto& [sub, action] : actions) {
      if (sub->parsed()) return action();
    }
  } catch (const UsageError& e) {
    print_error(e.what());
    return kExitUsage;
  } catch (const channel::Error& e) {
    print_error(e.what());
    return kExitRuntime;
  } catch (const std::bad_alloc&) {
    print_error("out of memory");
    return kExitRuntime;
  } catch (const std::exception& e) {
    print_error(e.what());
    return kExitRuntime;
  }
  return 1;
}
