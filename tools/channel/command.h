// Subcommand registry for the `channel` CLI: each cmd_*.cpp registers itself with a
// static CommandRegistrar, so adding a subcommand never touches main.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace channel::cli {

// Declares the subcommand's flags on `sub` and returns the action to run after parsing.
// The action returns the process exit code; it may throw channel::Error.
using CommandSetup = std::function<std::function<int()>(CLI::App& sub)>;

struct CommandSpec {
  std::string name;
  std::string help;
  CommandSetup setup;
};

std::vector<CommandSpec>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string help, CommandSetup setup) {
    command_registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

}  // namespace channel::cli
