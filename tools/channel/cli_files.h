// Paths given on the command line, checked before any work: an input must be a readable
// regular file ("-f: notes is a directory (expects a text file)"), an output must be
// writable where it is asked for, so that a long run never fails only at the end.
#pragma once

#include <string>
#include <string_view>

namespace channel::cli {

// Throws channel::Error unless `path` is a regular file this process can read. `expects`
// names what the flag wants ("a text file").
void check_input_file(std::string_view flag, const std::string& path, std::string_view expects);
// The whole text of `path` after check_input_file(); "-" reads standard input.
std::string read_input_text(std::string_view flag, const std::string& path,
                            std::string_view expects = "a text file");
// Throws channel::Error unless a file can be written at `path`: not a directory, an existing
// file writable, a new one in an existing writable directory. Nothing is created.
void check_output_file(std::string_view flag, const std::string& path);

}  // namespace channel::cli
