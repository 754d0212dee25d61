#include "cli_errors.h"

#include <cstdio>
#include <regex>

namespace channel::cli {
namespace {

std::string hint(const std::string& command) {
  return command.empty() ? " (see 'channel --help')" : " (see 'channel " + command + " --help')";
}

void print_line(const char* kind, std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "channel: %s: %s\n", kind, message.c_str());
}

}  // namespace

std::string describe_parse_error(const CLI::ParseError& e, const std::string& command) {
  const std::string what = e.what();
  std::smatch m;
  if (dynamic_cast<const CLI::RequiredError*>(&e)) {
    if (what.rfind("A subcommand", 0) == 0 || what.rfind("Requires at least", 0) == 0)
      return "a subcommand is required" + hint(command);
    if (std::regex_match(what, m, std::regex(R"((\S+) is required)")))
      return m[1].str() + ": missing (it is required)" + hint(command);
    return what + hint(command);
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
    if (std::regex_match(what, m, std::regex(R"((\S+): At Most (\d+) required but received (\d+))")))
      return fmt::format("{}: given {} times (at most {})", m[1].str(), m[3].str(), m[2].str());
    if (std::regex_match(what, m, std::regex(R"((\S+): At least (\d+) required but received (\d+))")))
      return fmt::format("{}: given {} values (at least {})", m[1].str(), m[3].str(), m[2].str());
    if (std::regex_match(what, m, std::regex(R"((\S+): \d+ required (\S+) missing)")))
      return fmt::format("{}: the value is missing (expects {})", m[1].str(), m[2].str());
    if (std::regex_match(what, m, std::regex(R"(Expected exactly (\d+) arguments to (\S+), got (\d+))")))
      return fmt::format("{}: got {} values (exactly {})", m[2].str(), m[3].str(), m[1].str());
    return what;
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e)) {
    if (std::regex_match(what, m, std::regex(R"(Could not convert: (\S+) = (.*))")))
      return fmt::format("{}: '{}' is not a valid value{}", m[1].str(), m[2].str(), hint(command));
    if (std::regex_match(what, m, std::regex(R"(The value (.*) is not an allowed value for (\S+))")))
      return fmt::format("{}: '{}' is not an allowed value{}", m[2].str(), m[1].str(),
                         hint(command));
    return what;
  }
  if (dynamic_cast<const CLI::ExcludesError*>(&e) &&
      std::regex_match(what, m, std::regex(R"((\S+) excludes (\S+))")))
    return fmt::format("{}: not allowed together with {} (give one of them)", m[1].str(),
                       m[2].str());
  if (dynamic_cast<const CLI::RequiresError*>(&e) &&
      std::regex_match(what, m, std::regex(R"((\S+) requires (\S+))")))
    return fmt::format("{}: needs {} too", m[1].str(), m[2].str());
  // ValidationError: "--flag: message" already (the validators in cli_common.h say what is
  // allowed).
  return what;
}

void print_error(std::string message) {
  print_line("error", std::move(message));
}

void print_warning(std::string message) {
  print_line("warning", std::move(message));
}

}  // namespace channel::cli
