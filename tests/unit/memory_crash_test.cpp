// Crash safety: a forked writer appends episodes (and updates access counts) in a loop and is
// SIGKILLed at a random moment, 60 times. After every kill the store must open, verify, hold
// every episode the writer reported as published (unless a later append evicted it), and show
// no partial episode.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "memory/episodic_view.h"
#include "memory_test_util.h"

namespace channel {
namespace {

StoreGeometry crash_geometry() {
  StoreGeometry g;
  g.num_layers = 4;
  g.hidden_size = 64;
  g.kv_dim = 256;
  g.max_episodes = 12;
  g.max_tokens = 16;
  // Version 3: the retrieval and lexical entries are part of every append's ordering.
  g.ext_kinds = kRetrievalKeys | kRetrievalProj;
  g.lexical = true;
  g.head_dim = 64;
  g.keys_per_head = 4;
  g.proj_dim = 32;
  return g;
}

size_t tokens_of(uint64_t id) {
  return 1 + id * 7 % 16;
}

// The writer: appends until killed, reporting each published id on `fd`.
// Odd rounds skip the fdatasyncs: the order of the writes is the same, and many more appends
// (and kill points) fit in a round.
[[noreturn]] void writer(const std::string& path, int fd, uint64_t seed, bool durable) {
  try {
    StoreOptions o;
    o.durable = durable;
    EpisodicStore s = EpisodicStore::open(path, o);
    std::mt19937_64 rng(seed);
    std::vector<uint64_t> pinned;  // at most 3, so appends always find a slot
    for (const EpisodeHeader& h : s.list()) {
      if (h.flags & kEpisodePinned) pinned.push_back(h.episode_id);
    }
    for (int i = 0; i < 100000; ++i) {
      const uint64_t id = s.total_episodes();
      test::SyntheticEpisode e(s.layout(), id, tokens_of(id));
      const uint64_t got = s.append(e.record(id * 16, id ? id - 1 : kNoEpisode));
      if (got != id || ::write(fd, &got, sizeof got) != sizeof got) ::_exit(3);
      if (rng() % 4 == 0) s.record_access(got, 1000 + got);
      if (rng() % 8 == 0 && got >= 3 && s.find(got - 3)) {
        if (pinned.size() >= 3) {
          s.set_pinned(pinned.front(), false);
          pinned.erase(pinned.begin());
        }
        s.set_pinned(got - 3, true);
        pinned.push_back(got - 3);
      }
    }
  } catch (...) {
    ::_exit(2);
  }
  ::_exit(0);
}

TEST(MemoryCrash, KilledWriterNeverLeavesAPartialEpisode) {
  test::ScratchDir dir;
  const std::string path = dir.file("crash.episodic.mem");
  { EpisodicStore::create(path, crash_geometry(), 42); }
  std::mt19937_64 rng(2026);
  uint64_t last_total = 0;
  int kills_mid_run = 0;
  for (int round = 0; round < 60; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      writer(path, fds[1], rng(), round % 2 == 0);
    }
    ::close(fds[1]);
    // Wait for 0-2 reported appends before the random delay, so that every run makes progress
    // however slow the writer is (a sanitizer build on a loaded machine), without a timing.
    uint64_t reported = kNoEpisode, id;
    const int wait_for = static_cast<int>(rng() % 3);
    for (int i = 0; i < wait_for && ::read(fds[0], &id, sizeof id) == sizeof id; ++i) reported = id;
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    kills_mid_run += WIFSIGNALED(status);
    ASSERT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << "writer failed, round " << round;
    while (::read(fds[0], &id, sizeof id) == sizeof id) reported = id;
    ::close(fds[0]);

    // Reopen: it must validate, and verify must find nothing wrong.
    const auto bytes = test::read_bytes(path);
    const VerifyReport vr = verify_store(bytes.data(), bytes.size(), path);
    ASSERT_TRUE(vr.ok()) << "round " << round << ": " << vr.problems.front();
    EpisodicStore s = EpisodicStore::open(path);
    const uint64_t total = s.total_episodes();
    ASSERT_GE(total, last_total);
    if (reported != kNoEpisode) {
      ASSERT_LT(reported, total) << "a reported episode is not published";
      ASSERT_LE(total, reported + 2) << "more than one append past the last report";
    }
    last_total = total;
    // Every visible episode is complete and is exactly what the writer wrote for its id.
    for (const EpisodeHeader& h : s.list()) {
      ASSERT_LT(h.episode_id, total);
      const Episode e = s.read(h.episode_id);  // checks the checksum
      const test::SyntheticEpisode want(s.layout(), h.episode_id, tokens_of(h.episode_id));
      ASSERT_EQ(e.tokens, want.tokens) << "episode " << h.episode_id;
      ASSERT_EQ(e.summary, want.summary);
      ASSERT_EQ(e.header.start_clock, h.episode_id * 16);
    }
    // The newest published episodes are all there, save pinned-skip evictions: at least the
    // last one reported.
    if (reported != kNoEpisode) {
      ASSERT_TRUE(s.find(reported)) << "round " << round;
    }
  }
  std::printf("%d writers killed mid-run, %llu episodes published in all\n", kills_mid_run,
              static_cast<unsigned long long>(last_total));
  EXPECT_GE(kills_mid_run, 50);
  EXPECT_GT(last_total, 20u);  // appends did happen: about one per round is awaited
}

}  // namespace
}  // namespace channel
