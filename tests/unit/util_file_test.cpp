// util/file.h and util/bytes.h: the atomic file replacement leaves the old file or the new
// one and never a temporary; transfers and the byte reader report one-line errors.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "util/bytes.h"
#include "util/error.h"
#include "util/file.h"

namespace channel {
namespace {

namespace fs = std::filesystem;

class UtilFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("channel_util_file_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Names in the directory, so a test sees any temporary file left behind.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename());
    return out;
  }
  std::string message_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

std::vector<uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
}

TEST_F(UtilFile, AtomicWriteCreatesAndReplaces) {
  const std::string path = dir_ / "f.bin";
  atomic_write(path, bytes_of("first"));
  EXPECT_EQ(read_file(path), bytes_of("first"));
  atomic_write(path, bytes_of("second, longer"));
  EXPECT_EQ(read_file(path), bytes_of("second, longer"));
  EXPECT_EQ(entries(), std::vector<std::string>{"f.bin"});
}

TEST_F(UtilFile, AFailingFillKeepsThePreviousFileAndLeavesNoTemporary) {
  const std::string path = dir_ / "f.bin";
  atomic_write(path, bytes_of("kept"));
  EXPECT_THROW(atomic_write(
                   path, [](int fd) { throw_error("fill failed after {}", fd >= 0); }, {}),
               Error);
  EXPECT_EQ(read_file(path), bytes_of("kept"));
  EXPECT_EQ(entries(), std::vector<std::string>{"f.bin"});
}

TEST_F(UtilFile, AWriteErrorIsOneLineAndLeavesNoTemporary) {
  const std::string path = dir_ / "f.bin";
  atomic_write(path, bytes_of("kept"));
  // A file size limit makes write() fail (EFBIG) whoever runs the test, root included.
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 16;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string msg = message_of(
      [&] { atomic_write(path, std::vector<uint8_t>(4096, 7), {.what = "test writer"}); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(msg.find("test writer: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot write"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_EQ(read_file(path), bytes_of("kept"));
  EXPECT_EQ(entries(), std::vector<std::string>{"f.bin"});
}

TEST_F(UtilFile, WithoutReplaceAnExistingFileIsNeverReplaced) {
  const std::string path = dir_ / "f.bin";
  atomic_write(path, bytes_of("old"));
  const std::string msg =
      message_of([&] { atomic_write(path, bytes_of("new"), {.what = {}, .replace = false}); });
  EXPECT_NE(msg.find("cannot create"), std::string::npos) << msg;
  EXPECT_EQ(read_file(path), bytes_of("old"));
  EXPECT_EQ(entries(), std::vector<std::string>{"f.bin"});
  atomic_write((dir_ / "g.bin").string(), bytes_of("g"),
               {.what = {}, .replace = false, .durable = false});
  EXPECT_EQ(read_file(dir_ / "g.bin"), bytes_of("g"));
}

TEST_F(UtilFile, AMissingDirectoryIsAnError) {
  const std::string msg = message_of([&] { atomic_write(dir_ / "no" / "f.bin", bytes_of("x")); });
  EXPECT_NE(msg.find("cannot create"), std::string::npos) << msg;
}

TEST_F(UtilFile, ReadFileRefusesWhatIsNotARegularFile) {
  EXPECT_NE(message_of([&] { read_file(dir_); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(message_of([&] { read_file(dir_ / "absent", "reader"); }).find("reader: "),
            std::string::npos);
}

TEST_F(UtilFile, PositionalTransfersGoOnAfterShortOnes) {
  const std::string path = dir_ / "p.bin";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd);
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(pwrite_all(fd.get(), data.data(), data.size(), 10));
  std::vector<uint8_t> a(50000), b(50010);
  iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  EXPECT_EQ(preadv_full(fd.get(), iov, 2, 0), 100010);  // the whole file, then its end
  EXPECT_EQ(std::vector<uint8_t>(a.begin() + 10, a.end()),
            std::vector<uint8_t>(data.begin(), data.begin() + 49990));
  std::vector<uint8_t> c(20);
  EXPECT_EQ(pread_full(fd.get(), c.data(), c.size(), 100000), 10);  // short at the end
  EXPECT_EQ(fd.close(), 0);
  EXPECT_FALSE(fd);
}

TEST(ByteReader, ReadsWhatTheWriterWroteAndNamesTheOffsetOfAFailure) {
  ByteWriter w;
  w.put<uint32_t>(0x01020304u);
  const size_t at = w.begin_section(0x54534554u);
  w.put<uint64_t>(42);
  w.end_section(at);
  w.string("hi");
  EXPECT_EQ(w.out.size(), 4u + 16u + 8u + 8u + 2u);
  EXPECT_EQ(w.out[0], 0x04);  // little-endian

  ByteReader r{w.out, "test.bin: test"};
  EXPECT_EQ(r.get<uint32_t>("magic"), 0x01020304u);
  ByteReader s = r.section(0x54534554u, "TEST");
  EXPECT_EQ(s.get<uint64_t>("value"), 42u);
  s.expect_end("TEST");
  EXPECT_EQ(r.get<uint64_t>("length"), 2u);
  try {
    r.get<uint32_t>("text");
    FAIL() << "read past the end";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "test.bin: test: truncated reading text at offset 36");
  }
}

}  // namespace
}  // namespace channel
