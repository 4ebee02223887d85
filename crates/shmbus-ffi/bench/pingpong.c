/*
 * The C API's topic ping-pong: the same protocol as `shmbus-bench pingpong --transport topic
 * --mode spin`, so that the two figures of one run compare the binding with Rust.
 *
 * Two topics, `ping` and `pong` (history 2 plus 1 spare slot, the largest message = the
 * size), in a scratch domain root on /dev/shm. The ping process creates them, then starts
 * the echo process (this program again, `--echo`), each pinned to one of the first two CPUs
 * this process may use. Each round trip: read CLOCK_MONOTONIC, send `size` bytes whose first
 * and last byte are a tag, receive the echo, read the clock; one-way latency = RTT / 2.
 * Warm-up round trips are not recorded. Both sides busy-poll the non-blocking receive
 * (`shmbus_subscriber_try_recv` / `_try_recv_ref`), as Rust's spin mode does.
 *
 *   --payload copy   publish by copy, receive by copy (shmbus_publisher_send, _try_recv)
 *   --payload touch  loan a slot and write the two tag bytes in place; receive a pinned
 *                    sample and read those two bytes (shmbus_publisher_loan, _try_recv_ref)
 *
 * Usage: pingpong [--size B] [--iters N] [--warmup N] [--payload copy|touch] [--json]
 * Prints one line (or one JSON object) with p50/p90/p99/p99.9/min/max in nanoseconds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <shmbus.h>

/* Polls between two checks that the peer is still there. */
#define CHECK_EVERY (1u << 16)
/* A round trip that waits longer than this fails the run. */
#define TIMEOUT_NS (10ull * 1000 * 1000 * 1000)

struct opts {
    size_t size;
    uint64_t iters, warmup;
    bool touch, json;
};

struct end {
    shmbus_domain *domain;
    shmbus_topic *tx_topic, *rx_topic;
    shmbus_publisher *pub;
    shmbus_subscriber *sub;
    uint8_t *buf;
    size_t size;
    bool touch;
    pid_t peer; /* ping side: the echo's pid; echo side: the ping's (parent) pid */
    bool is_echo;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die_shmbus(const char *what) {
    fprintf(stderr, "pingpong: %s: %s: %s\n", what, shmbus_status_name(shmbus_last_error_code()),
            shmbus_last_error());
    exit(1);
}

static void die(const char *what) {
    fprintf(stderr, "pingpong: %s\n", what);
    exit(1);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        fprintf(stderr, "pingpong: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
        exit(1);
    }
}

/* The first two CPUs this process may use, or -1, -1 with only one. */
static void pick_pair(int *a, int *b) {
    cpu_set_t set;
    *a = *b = -1;
    if (sched_getaffinity(0, sizeof set, &set) != 0) die("cannot read the CPU affinity");
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set)) continue;
        if (*a < 0) {
            *a = c;
        } else {
            *b = c;
            return;
        }
    }
    *a = -1;
}

static void open_end(struct end *e, const char *root, const char *tx, const char *rx, const struct opts *o) {
    shmbus_topic_config *cfg = NULL;
    if (shmbus_domain_with_root("bench", root, &e->domain) != SHMBUS_OK) die_shmbus("domain");
    if (shmbus_topic_config_new(&cfg) != SHMBUS_OK) die_shmbus("topic config");
    if (shmbus_topic_config_set_max_message_len(cfg, o->size) != SHMBUS_OK ||
        shmbus_topic_config_set_history(cfg, 2) != SHMBUS_OK ||
        shmbus_topic_config_set_spare_slots(cfg, 1) != SHMBUS_OK)
        die_shmbus("topic config");
    if (shmbus_topic_create_or_open(e->domain, tx, cfg, &e->tx_topic) != SHMBUS_OK) die_shmbus(tx);
    if (shmbus_topic_create_or_open(e->domain, rx, cfg, &e->rx_topic) != SHMBUS_OK) die_shmbus(rx);
    shmbus_topic_config_free(cfg);
    if (shmbus_topic_publisher(e->tx_topic, &e->pub) != SHMBUS_OK) die_shmbus("publisher");
    if (shmbus_topic_subscriber(e->rx_topic, &e->sub) != SHMBUS_OK) die_shmbus("subscriber");
    /* Both topics are fresh: start at the first message whoever subscribes last. */
    if (shmbus_subscriber_seek(e->sub, 1) != SHMBUS_OK) die_shmbus("seek");
    e->buf = malloc(o->size);
    if (!e->buf) die("out of memory");
    for (size_t i = 0; i < o->size; i++) e->buf[i] = (uint8_t)(i * 31);
    e->size = o->size;
    e->touch = o->touch;
}

static void close_end(struct end *e) {
    shmbus_publisher_free(e->pub);
    shmbus_subscriber_free(e->sub);
    shmbus_topic_free(e->tx_topic);
    shmbus_topic_free(e->rx_topic);
    shmbus_domain_free(e->domain);
    free(e->buf);
}

/* Sends e->buf (copy) or its first and last byte (touch). */
static void send_msg(struct end *e) {
    if (!e->touch) {
        if (shmbus_publisher_send(e->pub, e->buf, e->size, NULL) != SHMBUS_OK) die_shmbus("send");
        return;
    }
    shmbus_loan *loan = NULL;
    uint8_t *data;
    size_t cap;
    if (shmbus_publisher_loan(e->pub, &loan) != SHMBUS_OK) die_shmbus("loan");
    if (shmbus_loan_data(loan, &data, &cap) != SHMBUS_OK) die_shmbus("loan data");
    if (cap < e->size) die("the loan is smaller than the message");
    data[0] = e->buf[0];
    data[e->size - 1] = e->buf[e->size - 1];
    if (shmbus_loan_send(loan, e->size, NULL) != SHMBUS_OK) die_shmbus("loan send");
}

/* Every CHECK_EVERY polls: is the peer alive, has the wait lasted too long? */
static void check_peer(struct end *e, uint64_t *since) {
    uint64_t t = now_ns();
    if (*since == 0) *since = t;
    if (e->is_echo) {
        if (getppid() != e->peer) die("echo: the ping process is gone");
    } else {
        int status;
        if (waitpid(e->peer, &status, WNOHANG) == e->peer) die("the echo process exited without answering");
    }
    if (t - *since > TIMEOUT_NS) die("no answer for 10 s");
}

/* Busy-polls until the next message is in e->buf (copy) or its two tag bytes are (touch). */
static void recv_msg(struct end *e) {
    uint32_t polls = 0;
    uint64_t since = 0;
    for (;;) {
        shmbus_status rc;
        if (!e->touch) {
            size_t len = 0;
            rc = shmbus_subscriber_try_recv(e->sub, e->buf, e->size, &len, NULL, NULL);
            if (rc == SHMBUS_OK) {
                if (len != e->size) die("received a message of the wrong size");
                return;
            }
        } else {
            shmbus_sample *s = NULL;
            rc = shmbus_subscriber_try_recv_ref(e->sub, &s);
            if (rc == SHMBUS_OK) {
                const uint8_t *data;
                size_t len;
                if (shmbus_sample_data(s, &data, &len) != SHMBUS_OK) die_shmbus("sample data");
                if (len != e->size) die("received a sample of the wrong size");
                e->buf[0] = data[0];
                e->buf[e->size - 1] = data[e->size - 1];
                shmbus_sample_release(s);
                return;
            }
        }
        if (rc != SHMBUS_EMPTY) die_shmbus("receive");
        cpu_relax();
        if (++polls % CHECK_EVERY == 0) check_peer(e, &since);
    }
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static uint64_t pct(const uint64_t *v, uint64_t n, double q) {
    uint64_t rank = (uint64_t)(q * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return v[rank - 1];
}

static int echo_main(const char *root, int cpu, pid_t parent, uint64_t count, const struct opts *o) {
    struct end e = {0};
    pin(cpu);
    open_end(&e, root, "pong", "ping", o);
    e.is_echo = true;
    e.peer = parent;
    for (uint64_t i = 0; i < count; i++) {
        recv_msg(&e);
        send_msg(&e);
    }
    close_end(&e);
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: pingpong [--size B] [--iters N] [--warmup N] [--payload copy|touch] [--json]\n");
    exit(2);
}

static uint64_t parse_u64(const char *s) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || end == s) usage();
    return (uint64_t)v;
}

int main(int argc, char **argv) {
    struct opts o = {.size = 8, .iters = 100000, .warmup = 0, .touch = false, .json = false};
    bool warmup_set = false;
    const char *echo_root = NULL;
    int echo_cpu = -1;
    pid_t echo_parent = 0;
    uint64_t echo_count = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            o.json = true;
        } else if (!strcmp(a, "--size") && v) {
            o.size = (size_t)parse_u64(v), i++;
        } else if (!strcmp(a, "--iters") && v) {
            o.iters = parse_u64(v), i++;
        } else if (!strcmp(a, "--warmup") && v) {
            o.warmup = parse_u64(v), warmup_set = true, i++;
        } else if (!strcmp(a, "--payload") && v) {
            if (!strcmp(v, "touch")) o.touch = true;
            else if (strcmp(v, "copy")) usage();
            i++;
        } else if (!strcmp(a, "--echo") && i + 4 < argc) {
            /* Hidden: --echo ROOT CPU PARENT COUNT, started by the ping side. */
            echo_root = argv[i + 1];
            echo_cpu = atoi(argv[i + 2]);
            echo_parent = (pid_t)atoi(argv[i + 3]);
            echo_count = parse_u64(argv[i + 4]);
            i += 4;
        } else {
            usage();
        }
    }
    if (o.size < 1 || o.iters < 1) usage();
    if (echo_root) return echo_main(echo_root, echo_cpu, echo_parent, echo_count, &o);
    if (!warmup_set) {
        o.warmup = o.iters / 10;
        if (o.warmup < 1000) o.warmup = 1000;
        if (o.warmup > 10000) o.warmup = 10000;
    }

    int ping_cpu, pong_cpu;
    pick_pair(&ping_cpu, &pong_cpu);
    if (ping_cpu < 0) fprintf(stderr, "pingpong: note: only one CPU available; the two processes are not pinned\n");
    pin(ping_cpu);

    char root[] = "/dev/shm/shmbus-bench-c-XXXXXX";
    if (!mkdtemp(root)) die("cannot make a scratch directory in /dev/shm");
    struct end e = {0};
    open_end(&e, root, "ping", "pong", &o);

    char cpu_s[16], parent_s[24], count_s[24], size_s[24];
    snprintf(cpu_s, sizeof cpu_s, "%d", pong_cpu);
    snprintf(parent_s, sizeof parent_s, "%d", (int)getpid());
    snprintf(count_s, sizeof count_s, "%" PRIu64, o.warmup + o.iters);
    snprintf(size_s, sizeof size_s, "%zu", o.size);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) die("fork failed");
    if (child == 0) {
        /* Die with the ping process instead of spinning for ever. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        execl("/proc/self/exe", argv[0], "--size", size_s, "--payload", o.touch ? "touch" : "copy", "--echo", root,
              cpu_s, parent_s, count_s, (char *)NULL);
        _exit(127);
    }
    e.peer = child;

    uint64_t *lat = malloc(o.iters * sizeof *lat);
    if (!lat) die("out of memory");
    for (uint64_t i = 0; i < o.warmup + o.iters; i++) {
        uint8_t tag = (uint8_t)i ^ 0x5a;
        e.buf[0] = tag;
        e.buf[o.size - 1] = tag;
        uint64_t t0 = now_ns();
        send_msg(&e);
        recv_msg(&e);
        uint64_t t1 = now_ns();
        if (e.buf[0] != tag || e.buf[o.size - 1] != tag) {
            fprintf(stderr, "pingpong: round trip %" PRIu64 " came back with the wrong bytes\n", i);
            kill(child, SIGKILL);
            return 1;
        }
        if (i >= o.warmup) lat[i - o.warmup] = (t1 - t0) / 2;
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("the echo process failed");
    close_end(&e);
    if (nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "pingpong: note: could not remove %s\n", root);

    qsort(lat, o.iters, sizeof *lat, cmp_u64);
    uint64_t p50 = pct(lat, o.iters, 0.50), p90 = pct(lat, o.iters, 0.90), p99 = pct(lat, o.iters, 0.99),
             p999 = pct(lat, o.iters, 0.999);
    const char *payload = o.touch ? "touch" : "copy";
    if (o.json) {
        printf("{\"transport\":\"topic\",\"binding\":\"c\",\"mode\":\"spin\",\"payload\":\"%s\",\"size\":%zu,"
               "\"iters\":%" PRIu64 ",\"warmup\":%" PRIu64 ",\"pinned\":%s,\"p50_ns\":%" PRIu64 ",\"p90_ns\":%" PRIu64
               ",\"p99_ns\":%" PRIu64 ",\"p999_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"min_ns\":%" PRIu64 "}\n",
               payload, o.size, o.iters, o.warmup, ping_cpu >= 0 ? "true" : "false", p50, p90, p99, p999,
               lat[o.iters - 1], lat[0]);
    } else {
        printf("topic (C) spin %s %zu B  %" PRIu64 " iters  one-way ns: p50 %" PRIu64 "  p90 %" PRIu64 "  p99 %" PRIu64
               "  p99.9 %" PRIu64 "  max %" PRIu64 "\n",
               payload, o.size, o.iters, p50, p90, p99, p999, lat[o.iters - 1]);
    }
    free(lat);
    return 0;
}
