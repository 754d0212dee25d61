#include "cli_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "util/error.h"

namespace channel::cli {

void check_input_file(std::string_view flag, const std::string& path, std::string_view expects) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw_error("{}: cannot read {}: {} (expects {})", flag, path, std::strerror(errno), expects);
  if (S_ISDIR(st.st_mode)) throw_error("{}: {} is a directory (expects {})", flag, path, expects);
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
    throw_error("{}: {} is not a regular file (expects {})", flag, path, expects);
  if (::access(path.c_str(), R_OK) != 0)
    throw_error("{}: cannot read {}: {}", flag, path, std::strerror(errno));
}

std::string read_input_text(std::string_view flag, const std::string& path,
                            std::string_view expects) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    if (std::cin.bad()) throw_error("{}: error reading standard input", flag);
    return text.str();
  }
  check_input_file(flag, path, expects);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("{}: cannot read {}", flag, path);
  text << in.rdbuf();
  if (in.bad()) throw_error("{}: error reading {}", flag, path);
  return text.str();
}

void check_output_file(std::string_view flag, const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw_error("{}: {} is a directory (expects a file)", flag, path);
    if (::access(path.c_str(), W_OK) != 0)
      throw_error("{}: {} is not writable: {}", flag, path, std::strerror(errno));
  } else if (errno != ENOENT) {
    throw_error("{}: {}: {}", flag, path, std::strerror(errno));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (::stat(dir.c_str(), &st) != 0)
    throw_error("{}: cannot write {}: the directory {} does not exist", flag, path, dir.string());
  if (!S_ISDIR(st.st_mode))
    throw_error("{}: cannot write {}: {} is not a directory", flag, path, dir.string());
  // Files are written under a temporary name beside them and renamed (or linked) into place.
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw_error("{}: cannot write {}: the directory {} is not writable", flag, path,
                dir.string());
}

}  // namespace channel::cli
