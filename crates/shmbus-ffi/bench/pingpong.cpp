/*
 * The C++ API's topic ping-pong: the program of pingpong.c written with shmbus.hpp, the same
 * protocol as `shmbus-bench pingpong --transport topic --mode spin`, so that the figures of
 * one run compare C++, C and Rust.
 *
 * Two topics, `ping` and `pong` (history 2 plus 1 spare slot, the largest message = the
 * size), in a scratch domain root on /dev/shm. The ping process creates them, then starts
 * the echo process (this program again, `--echo`), each pinned to one of the first two CPUs
 * this process may use. Each round trip: read the monotonic clock, send `size` bytes whose
 * first and last byte are a tag, receive the echo, read the clock; one-way latency = RTT / 2.
 * Warm-up round trips are not recorded. Both sides busy-poll the non-blocking receive
 * (`try_recv_into` / `try_recv_ref`), as Rust's spin mode does.
 *
 *   --payload copy   publish by copy (publisher::send); receive by copy into the program's
 *                    buffer (subscriber::try_recv_into: no allocation per poll)
 *   --payload touch  loan a slot and write the two tag bytes in place; receive a pinned
 *                    sample and read those two bytes (publisher::loan, try_recv_ref)
 *
 * Usage: pingpong-cpp [--size B] [--iters N] [--warmup N] [--payload copy|touch] [--json]
 * Prints one line (or one JSON object) with p50/p90/p99/p99.9/min/max in nanoseconds.
 */
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <shmbus.hpp>

namespace {

/// Polls between two checks that the peer is still there.
constexpr std::uint32_t check_every = 1u << 16;
/// A round trip that waits longer than this fails the run.
constexpr std::chrono::seconds timeout{10};

/// A bad command line: main prints the usage and exits with 2.
struct usage_error {};

struct options {
    std::size_t size = 8;
    std::uint64_t iters = 100000;
    std::uint64_t warmup = 0;
    bool touch = false;
    bool json = false;
};

std::chrono::steady_clock::time_point now() noexcept { return std::chrono::steady_clock::now(); }

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        throw std::system_error(errno, std::generic_category(), "cannot pin to CPU " + std::to_string(cpu));
}

/// The first two CPUs this process may use, or {-1, -1} with only one.
std::pair<int, int> pick_pair() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        throw std::system_error(errno, std::generic_category(), "cannot read the CPU affinity");
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        if (first < 0)
            first = c;
        else
            return {first, c};
    }
    return {-1, -1};
}

/// A fresh directory on /dev/shm for the domain, removed with everything in it.
class scratch_dir {
  public:
    scratch_dir() {
        char name[] = "/dev/shm/shmbus-bench-cpp-XXXXXX";
        if (!mkdtemp(name))
            throw std::system_error(errno, std::generic_category(), "cannot make a scratch directory in /dev/shm");
        path_ = name;
    }
    scratch_dir(const scratch_dir &) = delete;
    scratch_dir &operator=(const scratch_dir &) = delete;
    ~scratch_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
        if (ec) std::fprintf(stderr, "pingpong: note: could not remove %s: %s\n", path_.c_str(), ec.message().c_str());
    }
    const std::string &path() const noexcept { return path_; }

  private:
    std::string path_;
};

/// The echo process, killed and reaped if it is still there when this is destroyed.
class child_process {
  public:
    child_process() = default;
    child_process(const child_process &) = delete;
    child_process &operator=(const child_process &) = delete;
    ~child_process() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    void set(pid_t pid) noexcept { pid_ = pid; }
    pid_t pid() const noexcept { return pid_; }
    /// True once it has exited (it is then reaped).
    bool exited() noexcept {
        int status = 0;
        if (pid_ <= 0 || waitpid(pid_, &status, WNOHANG) != pid_) return false;
        pid_ = 0;
        return true;
    }
    /// Waits for it; true if it exited with status 0.
    bool wait_success() noexcept {
        int status = 0;
        pid_t pid = std::exchange(pid_, 0);
        return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }

  private:
    pid_t pid_ = 0;
};

/// One side: a publisher on its own topic, a subscriber on the other's, and the message buffer.
class side {
  public:
    /// The side that sends on topic `tx` and receives on topic `rx` of the domain under `root`.
    side(const std::string &root, const std::string &tx, const std::string &rx, const options &o)
        : side(shmbus::domain("bench", root), tx, rx, o) {}

    std::uint8_t &first() noexcept { return buf_.front(); }
    std::uint8_t &last() noexcept { return buf_.back(); }

    /// Sends the buffer (copy) or its first and last byte (touch).
    void send() {
        if (!touch_) {
            pub_.send(buf_);
            return;
        }
        shmbus::loan l = pub_.loan();
        if (l.size() < buf_.size()) throw std::runtime_error("the loan is smaller than the message");
        l.data()[0] = buf_.front();
        l.data()[buf_.size() - 1] = buf_.back();
        l.send(buf_.size());
    }

    /// Busy-polls until the next message is in the buffer (copy) or its two tag bytes are
    /// (touch). `peer_gone()` is asked every check_every polls.
    template <class PeerGone> void recv(PeerGone &&peer_gone) {
        std::uint32_t polls = 0;
        std::optional<std::chrono::steady_clock::time_point> since;
        for (;;) {
            if (!touch_) {
                if (std::optional<shmbus::received> r = sub_.try_recv_into(buf_)) {
                    if (r->len != buf_.size()) throw std::runtime_error("received a message of the wrong size");
                    return;
                }
            } else if (std::optional<shmbus::sample> s = sub_.try_recv_ref()) {
                if (s->size() != buf_.size()) throw std::runtime_error("received a sample of the wrong size");
                buf_.front() = s->data()[0];
                buf_.back() = s->data()[buf_.size() - 1];
                return;
            }
            cpu_relax();
            if (++polls % check_every == 0) {
                auto t = now();
                if (!since) since = t;
                peer_gone();
                if (t - *since > timeout) throw std::runtime_error("no answer for 10 s");
            }
        }
    }

  private:
    side(const shmbus::domain &d, const std::string &tx, const std::string &rx, const options &o)
        : pub_(open(d, tx, o).publisher()), sub_(open(d, rx, o).subscriber()), buf_(o.size), touch_(o.touch) {
        // Both topics are fresh: start at the first message whoever subscribes last.
        sub_.seek(1);
        for (std::size_t i = 0; i < buf_.size(); i++) buf_[i] = static_cast<std::uint8_t>(i * 31);
    }

    /// Topic `name`: history 2 plus 1 spare slot, the largest message = the size.
    static shmbus::topic open(const shmbus::domain &d, const std::string &name, const options &o) {
        shmbus::topic_config cfg;
        cfg.max_message_len = o.size;
        cfg.history = 2;
        cfg.spare_slots = 1;
        return shmbus::topic::create_or_open(d, name, cfg);
    }

    shmbus::publisher pub_;
    shmbus::subscriber sub_;
    std::vector<std::uint8_t> buf_;
    bool touch_;
};

/// Nearest-rank percentile of a sorted vector.
std::uint64_t pct(const std::vector<std::uint64_t> &v, double q) {
    auto n = static_cast<std::uint64_t>(v.size());
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(n) + 0.999999);
    rank = std::clamp<std::uint64_t>(rank, 1, n);
    return v[rank - 1];
}

std::uint64_t parse_u64(const char *s) {
    char *stop = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(s, &stop, 10);
    if (errno || *stop || stop == s) throw usage_error{};
    return static_cast<std::uint64_t>(v);
}

int echo_main(const std::string &root, int cpu, pid_t parent, std::uint64_t count, const options &o) {
    pin(cpu);
    side e(root, "pong", "ping", o);
    auto ping_gone = [parent] {
        if (getppid() != parent) throw std::runtime_error("echo: the ping process is gone");
    };
    for (std::uint64_t i = 0; i < count; i++) {
        e.recv(ping_gone);
        e.send();
    }
    return 0;
}

int ping_main(const char *argv0, const options &o) {
    auto [ping_cpu, pong_cpu] = pick_pair();
    if (ping_cpu < 0)
        std::fprintf(stderr, "pingpong: note: only one CPU available; the two processes are not pinned\n");
    pin(ping_cpu);

    // Destroyed in reverse: the echo process first, then the endpoints, then the directory.
    scratch_dir root;
    side e(root.path(), "ping", "pong", o);
    child_process echo;

    const std::string size_s = std::to_string(o.size), cpu_s = std::to_string(pong_cpu),
                      parent_s = std::to_string(getpid()), count_s = std::to_string(o.warmup + o.iters);
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) throw std::system_error(errno, std::generic_category(), "fork failed");
    if (child == 0) {
        // Die with the ping process instead of spinning for ever.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        execl("/proc/self/exe", argv0, "--size", size_s.c_str(), "--payload", o.touch ? "touch" : "copy", "--echo",
              root.path().c_str(), cpu_s.c_str(), parent_s.c_str(), count_s.c_str(), static_cast<char *>(nullptr));
        _exit(127);
    }
    echo.set(child);
    auto echo_gone = [&echo] {
        if (echo.exited()) throw std::runtime_error("the echo process exited without answering");
    };

    std::vector<std::uint64_t> lat(o.iters);
    for (std::uint64_t i = 0; i < o.warmup + o.iters; i++) {
        const auto tag = static_cast<std::uint8_t>(static_cast<std::uint8_t>(i) ^ 0x5a);
        e.first() = tag;
        e.last() = tag;
        const auto t0 = now();
        e.send();
        e.recv(echo_gone);
        const auto t1 = now();
        if (e.first() != tag || e.last() != tag)
            throw std::runtime_error("round trip " + std::to_string(i) + " came back with the wrong bytes");
        if (i >= o.warmup)
            lat[i - o.warmup] =
                static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) / 2;
    }
    if (!echo.wait_success()) throw std::runtime_error("the echo process failed");

    std::sort(lat.begin(), lat.end());
    const std::uint64_t p50 = pct(lat, 0.50), p90 = pct(lat, 0.90), p99 = pct(lat, 0.99), p999 = pct(lat, 0.999);
    const char *payload = o.touch ? "touch" : "copy";
    if (o.json) {
        std::printf("{\"transport\":\"topic\",\"binding\":\"cpp\",\"mode\":\"spin\",\"payload\":\"%s\",\"size\":%zu,"
                    "\"iters\":%" PRIu64 ",\"warmup\":%" PRIu64 ",\"pinned\":%s,\"p50_ns\":%" PRIu64
                    ",\"p90_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64 ",\"p999_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64
                    ",\"min_ns\":%" PRIu64 "}\n",
                    payload, o.size, o.iters, o.warmup, ping_cpu >= 0 ? "true" : "false", p50, p90, p99, p999,
                    lat.back(), lat.front());
    } else {
        std::printf("topic (C++) spin %s %zu B  %" PRIu64 " iters  one-way ns: p50 %" PRIu64 "  p90 %" PRIu64
                    "  p99 %" PRIu64 "  p99.9 %" PRIu64 "  max %" PRIu64 "\n",
                    payload, o.size, o.iters, p50, p90, p99, p999, lat.back());
    }
    return 0;
}

int run(int argc, char **argv) {
    options o;
    bool warmup_set = false;
    std::optional<std::string> echo_root;
    int echo_cpu = -1;
    pid_t echo_parent = 0;
    std::uint64_t echo_count = 0;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--json") {
            o.json = true;
        } else if (a == "--size" && v) {
            o.size = static_cast<std::size_t>(parse_u64(v)), i++;
        } else if (a == "--iters" && v) {
            o.iters = parse_u64(v), i++;
        } else if (a == "--warmup" && v) {
            o.warmup = parse_u64(v), warmup_set = true, i++;
        } else if (a == "--payload" && v) {
            const std::string p = v;
            if (p != "copy" && p != "touch") throw usage_error{};
            o.touch = p == "touch", i++;
        } else if (a == "--echo" && i + 4 < argc) {
            // Hidden: --echo ROOT CPU PARENT COUNT, started by the ping side.
            echo_root = argv[i + 1];
            echo_cpu = std::atoi(argv[i + 2]);
            echo_parent = static_cast<pid_t>(std::atoi(argv[i + 3]));
            echo_count = parse_u64(argv[i + 4]);
            i += 4;
        } else {
            throw usage_error{};
        }
    }
    if (o.size < 1 || o.iters < 1) throw usage_error{};
    if (echo_root) return echo_main(*echo_root, echo_cpu, echo_parent, echo_count, o);
    if (!warmup_set) o.warmup = std::clamp<std::uint64_t>(o.iters / 10, 1000, 10000);
    return ping_main(argv[0], o);
}

}  // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const usage_error &) {
        std::fprintf(stderr, "usage: pingpong [--size B] [--iters N] [--warmup N] [--payload copy|touch] [--json]\n");
        return 2;
    } catch (const shmbus::error &e) {
        std::fprintf(stderr, "pingpong: %s: %s\n", e.name(), e.what());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "pingpong: %s\n", e.what());
    }
    return 1;
}
