/* The topic through the C API in one process: copy and zero-copy, the buffer and timeout
 * paths, lagging, loans, and the errors of bad arguments. */
#include "check.h"

static void copy_round_trip(shmbus_domain *d) {
    shmbus_topic_config *cfg = NULL;
    OK(shmbus_topic_config_new(&cfg));
    OK(shmbus_topic_config_set_max_message_len(cfg, 32));
    OK(shmbus_topic_config_set_history(cfg, 4));
    shmbus_topic *t = NULL;
    OK(shmbus_topic_create_or_open(d, "copy", cfg, &t));
    shmbus_topic_config_free(cfg);
    CHECK(shmbus_topic_max_message_len(t) == 32);
    shmbus_topic_prefault(t); /* changes nothing it maps: the round trip below still holds */
    shmbus_topic_prefault(NULL);

    shmbus_publisher *p = NULL;
    shmbus_subscriber *s = NULL;
    OK(shmbus_topic_publisher(t, &p));
    OK(shmbus_topic_subscriber(t, &s));

    char buf[64];
    size_t len = 99;
    EXPECT(shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, NULL, NULL), SHMBUS_EMPTY);
    EXPECT(shmbus_subscriber_recv_timeout(s, buf, sizeof buf, &len, NULL, NULL, 1000000), SHMBUS_TIMEOUT);
    CHECK(strlen(shmbus_last_error()) > 0);

    uint64_t seq = 0;
    OK(shmbus_publisher_send(p, "hello, world", 12, &seq));
    CHECK(seq == 1);

    /* Too small a buffer: the needed length, and the message is kept. */
    char small[4];
    EXPECT(shmbus_subscriber_try_recv(s, small, sizeof small, &len, NULL, NULL), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 12);
    CHECK(shmbus_last_error_value() == 12);
    uint64_t got_seq = 0, ts = 0;
    OK(shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, &got_seq, &ts));
    CHECK(len == 12 && memcmp(buf, "hello, world", 12) == 0);
    CHECK(got_seq == 1 && ts > 0);

    /* Too large a message. */
    char big[33] = {0};
    EXPECT(shmbus_publisher_send(p, big, sizeof big, NULL), SHMBUS_TOO_LARGE);
    CHECK(shmbus_last_error_value() == 32);

    /* The subscriber falls behind: 10 messages over a history of 4 (+ spare slots). */
    for (int i = 0; i < 10; i++) OK(shmbus_publisher_send(p, &i, sizeof i, NULL));
    EXPECT(shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, NULL, NULL), SHMBUS_LAGGED);
    CHECK(shmbus_last_error_value() > 0);
    OK(shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, &got_seq, NULL));
    CHECK(got_seq > 2 && len == sizeof(int));

    /* Seeking: back to the oldest kept, to the newest, to a sequence number. */
    OK(shmbus_subscriber_seek_oldest(s));
    CHECK(shmbus_subscriber_lag(s) > 1);
    OK(shmbus_subscriber_seek_latest(s));
    OK(shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, &got_seq, NULL));
    CHECK(got_seq == 11);
    EXPECT(shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, NULL, NULL), SHMBUS_EMPTY);
    OK(shmbus_subscriber_seek(s, 10));
    CHECK(shmbus_subscriber_next_seq(s) == 10);
    OK(shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, &got_seq, NULL));
    CHECK(got_seq == 10);
    /* A negative code is a parenthesized expression. */
    CHECK(1 - SHMBUS_EMPTY == 2);

    shmbus_topic_status_info status;
    OK(shmbus_topic_status(d, "copy", &status));
    CHECK(status.max_message_len == 32 && status.history == 4 && status.last_seq == 11);
    CHECK(status.publishers == 1 && status.subscribers == 1);

    shmbus_subscriber_free(s);
    shmbus_publisher_free(p);
    shmbus_topic_free(t);
}

static void zero_copy(shmbus_domain *d) {
    shmbus_topic *t = NULL;
    OK(shmbus_topic_create_or_open(d, "zero", NULL, &t));
    shmbus_publisher *p = NULL;
    shmbus_subscriber *s = NULL;
    OK(shmbus_topic_publisher(t, &p));
    OK(shmbus_topic_subscriber(t, &s));

    shmbus_loan *loan = NULL;
    OK(shmbus_publisher_loan(p, &loan));
    uint8_t *data = NULL;
    size_t cap = 0;
    OK(shmbus_loan_data(loan, &data, &cap));
    CHECK(cap == shmbus_topic_max_message_len(t));
    /* The publisher is lent out until the loan is sent. */
    EXPECT(shmbus_publisher_send(p, "x", 1, NULL), SHMBUS_BUSY);
    memcpy(data, "in place", 8);
    uint64_t seq = 0;
    OK(shmbus_loan_send(loan, 8, &seq));
    CHECK(seq == 1);

    /* A discarded loan publishes nothing. */
    OK(shmbus_publisher_loan(p, &loan));
    shmbus_loan_discard(loan);
    /* A loan that claims more than its capacity is refused (and freed). */
    OK(shmbus_publisher_loan(p, &loan));
    EXPECT(shmbus_loan_send(loan, cap + 1, NULL), SHMBUS_TOO_LARGE);
    OK(shmbus_publisher_send(p, "second", 6, NULL));

    shmbus_sample *a = NULL, *b = NULL, *c = NULL;
    OK(shmbus_subscriber_try_recv_ref(s, &a));
    const uint8_t *bytes = NULL;
    size_t len = 0;
    OK(shmbus_sample_data(a, &bytes, &len));
    CHECK(len == 8 && memcmp(bytes, "in place", 8) == 0 && shmbus_sample_seq(a) == 1);
    CHECK(shmbus_sample_ts_ns(a) > 0);
    OK(shmbus_subscriber_recv_ref(s, &b));
    OK(shmbus_sample_data(b, &bytes, &len));
    CHECK(len == 6 && memcmp(bytes, "second", 6) == 0);
    /* Both samples are pinned at once; a third is over the default budget of 2. */
    OK(shmbus_publisher_send(p, "third", 5, NULL));
    EXPECT(shmbus_subscriber_try_recv_ref(s, &c), SHMBUS_PINNED);
    shmbus_sample_release(a);
    OK(shmbus_subscriber_recv_ref_timeout(s, &c, 1000000000ull));
    EXPECT(shmbus_subscriber_recv_ref_timeout(s, &a, 1000000), SHMBUS_TIMEOUT);

    /* Freeing the subscriber with samples out: the last release frees it. */
    shmbus_subscriber_free(s);
    OK(shmbus_sample_data(c, &bytes, &len));
    CHECK(len == 5 && memcmp(bytes, "third", 5) == 0);
    shmbus_sample_release(b);
    shmbus_sample_release(c);

    /* A publisher freed with its loan out: sending the loan still works, then frees it. */
    OK(shmbus_publisher_loan(p, &loan));
    shmbus_publisher_free(p);
    OK(shmbus_loan_data(loan, &data, &cap));
    OK(shmbus_loan_send(loan, 0, NULL));
    shmbus_topic_free(t);
}

/* Random access: get(seq) and latest copy without moving the cursor, get_ref pins; and the
 * wait policy. */
static void random_access(shmbus_domain *d) {
    shmbus_topic_config *cfg = NULL;
    OK(shmbus_topic_config_new(&cfg));
    OK(shmbus_topic_config_set_history(cfg, 4));
    OK(shmbus_topic_config_set_spare_slots(cfg, 2));
    shmbus_topic *t = NULL;
    OK(shmbus_topic_create_or_open(d, "random", cfg, &t));
    shmbus_topic_config_free(cfg);
    shmbus_publisher *p = NULL;
    shmbus_subscriber *s = NULL;
    OK(shmbus_topic_publisher(t, &p));
    OK(shmbus_topic_subscriber(t, &s));

    char buf[16];
    size_t len = 0;
    uint64_t seq = 0, ts = 0;
    EXPECT(shmbus_subscriber_latest(s, buf, sizeof buf, &len, &seq, NULL), SHMBUS_EMPTY);
    EXPECT(shmbus_subscriber_get(s, 1, buf, sizeof buf, &len, NULL), SHMBUS_EMPTY);
    EXPECT(shmbus_subscriber_get(s, 0, buf, sizeof buf, &len, NULL), SHMBUS_INVALID_ARGUMENT);
    const char *words[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"};
    for (int i = 0; i < 10; i++) OK(shmbus_publisher_send(p, words[i], strlen(words[i]), NULL));

    OK(shmbus_subscriber_get(s, 9, buf, sizeof buf, &len, &ts));
    CHECK(len == 4 && memcmp(buf, "nine", 4) == 0 && ts > 0);
    OK(shmbus_subscriber_latest(s, buf, sizeof buf, &len, &seq, &ts));
    CHECK(seq == 10 && len == 3 && memcmp(buf, "ten", 3) == 0);
    /* Too small a buffer: the length, and the message is still there. */
    char small[2];
    EXPECT(shmbus_subscriber_get(s, 7, small, sizeof small, &len, NULL), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 5 && shmbus_last_error_value() == 5);
    OK(shmbus_subscriber_get(s, 7, buf, sizeof buf, &len, NULL));
    CHECK(len == 5 && memcmp(buf, "seven", 5) == 0);
    EXPECT(shmbus_subscriber_latest(s, small, sizeof small, &len, &seq, NULL), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 3 && shmbus_last_error_value() == 3);
    /* Overwritten, and not yet published. */
    EXPECT(shmbus_subscriber_get(s, 1, buf, sizeof buf, &len, NULL), SHMBUS_LAGGED);
    CHECK(shmbus_last_error_value() > 1 && shmbus_last_error_value() <= 7);
    EXPECT(shmbus_subscriber_get(s, 11, buf, sizeof buf, &len, NULL), SHMBUS_EMPTY);
    CHECK(shmbus_last_error_value() == 10);
    /* None of this moved the cursor. */
    CHECK(shmbus_subscriber_next_seq(s) == 1);

    /* Pinned: the bytes stay while pinned; the pin budget counts them. */
    shmbus_sample *a = NULL, *b = NULL, *c = NULL;
    OK(shmbus_subscriber_get_ref(s, 8, &a));
    const uint8_t *data = NULL;
    OK(shmbus_sample_data(a, &data, &len));
    CHECK(len == 5 && memcmp(data, "eight", 5) == 0 && shmbus_sample_seq(a) == 8);
    OK(shmbus_subscriber_get_ref(s, 10, &b));
    EXPECT(shmbus_subscriber_get_ref(s, 9, &c), SHMBUS_PINNED);
    /* The subscriber's other calls work with samples out. */
    OK(shmbus_subscriber_get(s, 9, buf, sizeof buf, &len, NULL));
    shmbus_sample_release(a);
    shmbus_sample_release(b);
    EXPECT(shmbus_subscriber_get_ref(s, 1, &c), SHMBUS_LAGGED);
    EXPECT(shmbus_subscriber_get_ref(NULL, 1, &c), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_subscriber_get(NULL, 1, buf, sizeof buf, &len, NULL), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_subscriber_latest(s, buf, sizeof buf, NULL, NULL, NULL), SHMBUS_INVALID_ARGUMENT);

    /* Wait policies: sleeping at once, and spinning (a timeout still ends the wait). */
    OK(shmbus_subscriber_seek_latest(s));
    OK(shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, NULL, NULL));
    OK(shmbus_subscriber_set_wait_policy(s, 0));
    EXPECT(shmbus_subscriber_recv_timeout(s, buf, sizeof buf, &len, NULL, NULL, 1000000), SHMBUS_TIMEOUT);
    OK(shmbus_subscriber_set_wait_policy(s, UINT64_MAX));
    EXPECT(shmbus_subscriber_recv_timeout(s, buf, sizeof buf, &len, NULL, NULL, 1000000), SHMBUS_TIMEOUT);
    OK(shmbus_publisher_send(p, "more", 4, NULL));
    OK(shmbus_subscriber_recv_timeout(s, buf, sizeof buf, &len, &seq, NULL, 1000000000ull));
    CHECK(seq == 11);
    EXPECT(shmbus_subscriber_set_wait_policy(NULL, 0), SHMBUS_INVALID_ARGUMENT);

    shmbus_subscriber_free(s);
    shmbus_publisher_free(p);
    shmbus_topic_free(t);
}

static void bad_arguments(shmbus_domain *d) {
    shmbus_topic *t = NULL;
    EXPECT(shmbus_topic_open(d, "missing", &t), SHMBUS_NOT_FOUND);
    ERROR_MENTIONS("missing");
    CHECK(shmbus_last_error_code() == SHMBUS_NOT_FOUND);
    EXPECT(shmbus_topic_open(NULL, "x", &t), SHMBUS_INVALID_ARGUMENT);
    ERROR_MENTIONS("shmbus_domain is NULL");
    EXPECT(shmbus_topic_open(d, NULL, &t), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_topic_open(d, "x", NULL), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_topic_open(d, "bad\xff", &t), SHMBUS_INVALID_ARGUMENT);
    ERROR_MENTIONS("UTF-8");
    EXPECT(shmbus_topic_open(d, "no/slash", &t), SHMBUS_INVALID_NAME);
    EXPECT(shmbus_publisher_send(NULL, "x", 1, NULL), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_subscriber_try_recv(NULL, NULL, 0, NULL, NULL, NULL), SHMBUS_INVALID_ARGUMENT);
    shmbus_topic_config *cfg = NULL;
    OK(shmbus_topic_config_new(&cfg));
    OK(shmbus_topic_config_set_history(cfg, 0));
    EXPECT(shmbus_topic_create_or_open(d, "zero-history", cfg, &t), SHMBUS_INVALID_CONFIG);
    OK(shmbus_topic_config_set_history(cfg, 8));
    OK(shmbus_topic_create_or_open(d, "layout", cfg, &t));
    shmbus_topic_free(t);
    OK(shmbus_topic_config_set_history(cfg, 16));
    EXPECT(shmbus_topic_create_or_open(d, "layout", cfg, &t), SHMBUS_LAYOUT_MISMATCH);
    shmbus_topic_config_free(cfg);
    CHECK(strcmp(shmbus_status_name(SHMBUS_LAGGED), "SHMBUS_LAGGED") == 0);
    CHECK(strcmp(shmbus_status_name(12345), "SHMBUS_UNKNOWN") == 0);
    /* Freeing NULL is allowed everywhere. */
    shmbus_topic_free(NULL);
    shmbus_publisher_free(NULL);
    shmbus_subscriber_free(NULL);
    shmbus_sample_release(NULL);
    shmbus_loan_discard(NULL);
    shmbus_domain_free(NULL);
}

int main(int argc, char **argv) {
    shmbus_domain *d = test_domain(argc, argv, "ctopic");
    copy_round_trip(d);
    zero_copy(d);
    random_access(d);
    bad_arguments(d);
    shmbus_domain_free(d);
    printf("topic: ok\n");
    return 0;
}
