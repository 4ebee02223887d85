/* Receiving into the caller's buffer on every kind, by both names (`shmbus_<endpoint>_recv_into`
 * and the copy receives): exact, larger and too-small buffers. A message too large is
 * SHMBUS_BUFFER_TOO_SMALL with its length in *len_out (and shmbus_last_error_value()), and is
 * received intact by the next call: nothing is lost. */
#include "check.h"

#include <stdint.h>

#define LEN 3000
#define FILL 0xEE

static uint8_t msg[4][LEN];

static void make_messages(void) {
    for (int m = 0; m < 4; m++)
        for (int i = 0; i < LEN; i++) msg[m][i] = (uint8_t)(m * 31 + i * 7);
}

/* `buf` holds message `m` of `n` bytes, and FILL after it up to `cap`. */
static int holds(const uint8_t *buf, size_t cap, int m, size_t n) {
    if (memcmp(buf, msg[m], n) != 0) return 0;
    for (size_t i = n; i < cap; i++)
        if (buf[i] != FILL) return 0;
    return 1;
}

static void topic(shmbus_domain *d) {
    shmbus_topic_config *cfg = NULL;
    OK(shmbus_topic_config_new(&cfg));
    OK(shmbus_topic_config_set_max_message_len(cfg, LEN));
    OK(shmbus_topic_config_set_history(cfg, 8));
    shmbus_topic *t = NULL;
    OK(shmbus_topic_create_or_open(d, "t", cfg, &t));
    shmbus_topic_config_free(cfg);
    shmbus_publisher *p = NULL;
    shmbus_subscriber *s = NULL;
    OK(shmbus_topic_publisher(t, &p));
    OK(shmbus_topic_subscriber(t, &s));
    static uint8_t buf[LEN + 100];
    size_t len = 0;
    uint64_t seq = 0, ts = 0;
    OK(shmbus_publisher_send(p, msg[0], LEN, NULL));
    OK(shmbus_publisher_send(p, msg[1], 100, NULL));
    /* Exact. */
    OK(shmbus_subscriber_try_recv_into(s, buf, LEN, &len, &seq, &ts));
    CHECK(len == LEN && seq == 1 && ts > 0 && memcmp(buf, msg[0], LEN) == 0);
    /* Too small, twice: the message stays. Then larger. */
    memset(buf, FILL, sizeof buf);
    EXPECT(shmbus_subscriber_try_recv(s, buf, 99, &len, &seq, NULL), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 100 && shmbus_last_error_value() == 100);
    EXPECT(shmbus_subscriber_recv_into(s, buf, 0, &len, NULL, NULL), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 100);
    OK(shmbus_subscriber_recv_into_timeout(s, buf, sizeof buf, &len, &seq, NULL, 1000000000ull));
    CHECK(len == 100 && seq == 2 && holds(buf, sizeof buf, 1, 100));
    EXPECT(shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, NULL, NULL), SHMBUS_EMPTY);
    shmbus_subscriber_free(s);
    shmbus_publisher_free(p);
    shmbus_topic_free(t);
}

static void queue(shmbus_domain *d) {
    shmbus_queue_config *cfg = NULL;
    OK(shmbus_queue_config_new(&cfg));
    OK(shmbus_queue_config_set_capacity(cfg, 4));
    OK(shmbus_queue_config_set_max_message_len(cfg, LEN));
    shmbus_queue *q = NULL;
    OK(shmbus_queue_create_or_open(d, "q", cfg, &q));
    shmbus_queue_config_free(cfg);
    shmbus_producer *p = NULL;
    shmbus_consumer *c = NULL;
    OK(shmbus_queue_producer(q, &p));
    OK(shmbus_queue_consumer(q, &c));
    static uint8_t buf[LEN + 100];
    size_t len = 0;
    for (int m = 0; m < 3; m++) OK(shmbus_producer_try_send(p, msg[m], m == 1 ? 100 : LEN));
    OK(shmbus_consumer_try_recv_into(c, buf, LEN, &len));
    CHECK(len == LEN && memcmp(buf, msg[0], LEN) == 0);
    /* Taken off the queue, kept by the consumer: it comes before the message behind it. */
    memset(buf, FILL, sizeof buf);
    EXPECT(shmbus_consumer_try_recv(c, buf, 50, &len), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 100 && shmbus_last_error_value() == 100);
    EXPECT(shmbus_consumer_recv_into(c, buf, 99, &len), SHMBUS_BUFFER_TOO_SMALL);
    OK(shmbus_consumer_recv_into_timeout(c, buf, sizeof buf, &len, 1000000000ull));
    CHECK(len == 100 && holds(buf, sizeof buf, 1, 100));
    EXPECT(shmbus_consumer_try_recv(c, buf, LEN - 1, &len), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == LEN);
    OK(shmbus_consumer_recv_into(c, buf, LEN, &len));
    CHECK(len == LEN && memcmp(buf, msg[2], LEN) == 0);
    EXPECT(shmbus_consumer_try_recv(c, buf, sizeof buf, &len), SHMBUS_EMPTY);
    shmbus_consumer_free(c);
    shmbus_producer_free(p);
    shmbus_queue_free(q);
}

static void stream(shmbus_domain *d) {
    shmbus_stream_config *cfg = NULL;
    OK(shmbus_stream_config_new(&cfg));
    OK(shmbus_stream_config_set_capacity(cfg, 64 * 1024));
    shmbus_stream *s = NULL;
    OK(shmbus_stream_create_or_open(d, "s", cfg, &s));
    shmbus_stream_config_free(cfg);
    shmbus_stream_writer *w = NULL;
    shmbus_stream_reader *r = NULL;
    OK(shmbus_stream_writer_open(s, &w));
    OK(shmbus_stream_reader_open(s, &r));
    static uint8_t buf[LEN + 100];
    size_t len = 0;
    OK(shmbus_stream_writer_send(w, msg[0], LEN));
    OK(shmbus_stream_writer_send(w, msg[1], 100));
    OK(shmbus_stream_reader_try_recv_into(r, buf, LEN, &len));
    CHECK(len == LEN && memcmp(buf, msg[0], LEN) == 0);
    memset(buf, FILL, sizeof buf);
    EXPECT(shmbus_stream_reader_try_recv(r, buf, 1, &len), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 100 && shmbus_last_error_value() == 100);
    EXPECT(shmbus_stream_reader_recv_into(r, buf, 99, &len), SHMBUS_BUFFER_TOO_SMALL);
    OK(shmbus_stream_reader_recv_into_timeout(r, buf, sizeof buf, &len, 1000000000ull));
    CHECK(len == 100 && holds(buf, sizeof buf, 1, 100));
    EXPECT(shmbus_stream_reader_try_recv(r, buf, sizeof buf, &len), SHMBUS_EMPTY);
    shmbus_stream_reader_free(r);
    shmbus_stream_writer_free(w);
    shmbus_stream_free(s);
}

static void pool(shmbus_domain *d) {
    shmbus_pool_config *cfg = NULL;
    OK(shmbus_pool_config_new(&cfg));
    OK(shmbus_pool_config_set_max_workers(cfg, 2));
    OK(shmbus_pool_config_set_max_job_len(cfg, LEN));
    shmbus_pool *pool = NULL;
    OK(shmbus_pool_create_or_open(d, "p", cfg, &pool));
    shmbus_pool_config_free(cfg);
    shmbus_dispatcher *disp = NULL;
    shmbus_worker *w = NULL;
    OK(shmbus_pool_dispatcher(pool, &disp));
    OK(shmbus_pool_worker(pool, &w));
    static uint8_t buf[LEN + 100];
    size_t len = 0;
    uint64_t id = 0, got = 0;
    OK(shmbus_worker_done(w));
    OK(shmbus_dispatcher_try_send(disp, msg[0], LEN, &id, NULL));
    OK(shmbus_worker_try_recv_into(w, buf, LEN, &len, &got));
    CHECK(len == LEN && got == id && memcmp(buf, msg[0], LEN) == 0);
    OK(shmbus_worker_done(w));
    OK(shmbus_dispatcher_try_send(disp, msg[1], 100, &id, NULL));
    /* The job stays in this worker's mailbox, for the next receive of either form. */
    memset(buf, FILL, sizeof buf);
    EXPECT(shmbus_worker_try_recv(w, buf, 10, &len, &got), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 100 && shmbus_last_error_value() == 100);
    EXPECT(shmbus_worker_recv_into(w, buf, 99, &len, &got), SHMBUS_BUFFER_TOO_SMALL);
    OK(shmbus_worker_recv_into_timeout(w, buf, sizeof buf, &len, &got, 1000000000ull));
    CHECK(len == 100 && got == id && holds(buf, sizeof buf, 1, 100));
    OK(shmbus_worker_done(w));
    OK(shmbus_dispatcher_try_send(disp, msg[2], 200, &id, NULL));
    EXPECT(shmbus_worker_try_recv(w, buf, 10, &len, &got), SHMBUS_BUFFER_TOO_SMALL);
    const uint8_t *data = NULL;
    OK(shmbus_worker_try_recv_ref(w, &data, &len, &got));
    CHECK(len == 200 && got == id && memcmp(data, msg[2], 200) == 0);
    shmbus_worker_free(w);
    shmbus_dispatcher_free(disp);
    shmbus_pool_free(pool);
}

static void journal(const char *root) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/log", root);
    shmbus_journal_config *cfg = NULL;
    OK(shmbus_journal_config_new(&cfg));
    OK(shmbus_journal_config_set_max_entry_len(cfg, LEN));
    shmbus_journal *j = NULL;
    OK(shmbus_journal_create_or_open(dir, cfg, &j));
    shmbus_journal_config_free(cfg);
    shmbus_appender *a = NULL;
    OK(shmbus_journal_appender(j, &a));
    uint64_t first = 0, index = 0, ts = 0;
    OK(shmbus_appender_send(a, msg[0], LEN, &first));
    OK(shmbus_appender_send(a, msg[1], 100, NULL));
    OK(shmbus_appender_send(a, msg[2], 200, NULL));
    shmbus_tailer *t = NULL;
    OK(shmbus_journal_tailer(j, &t));
    static uint8_t buf[LEN + 100];
    size_t len = 0;
    OK(shmbus_tailer_try_recv_into(t, buf, LEN, &len, &index, &ts));
    CHECK(len == LEN && index == first && ts > 0 && memcmp(buf, msg[0], LEN) == 0);
    memset(buf, FILL, sizeof buf);
    EXPECT(shmbus_tailer_try_recv(t, buf, 3, &len, &index, NULL), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 100 && shmbus_last_error_value() == 100);
    CHECK(shmbus_tailer_position(t) == first + 1);
    EXPECT(shmbus_tailer_recv_into(t, buf, 99, &len, NULL, NULL), SHMBUS_BUFFER_TOO_SMALL);
    OK(shmbus_tailer_recv_into_timeout(t, buf, sizeof buf, &len, &index, NULL, 1000000000ull));
    CHECK(len == 100 && index == first + 1 && holds(buf, sizeof buf, 1, 100));
    /* The in-place form returns an entry kept for a larger buffer too. */
    EXPECT(shmbus_tailer_try_recv(t, buf, 3, &len, NULL, NULL), SHMBUS_BUFFER_TOO_SMALL);
    const uint8_t *data = NULL;
    OK(shmbus_tailer_try_recv_ref(t, &data, &len, &index, NULL));
    CHECK(len == 200 && index == first + 2 && memcmp(data, msg[2], 200) == 0);
    shmbus_tailer_free(t);
    shmbus_appender_free(a);
    shmbus_journal_free(j);
}

int main(int argc, char **argv) {
    shmbus_domain *d = test_domain(argc, argv, "crecvinto");
    make_messages();
    topic(d);
    queue(d);
    stream(d);
    pool(d);
    journal(argv[1]);
    shmbus_domain_free(d);
    printf("recv_into: ok\n");
    return 0;
}
