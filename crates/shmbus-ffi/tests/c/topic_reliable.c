/* Lossless topics through the C API: a block topic with a reliable subscriber gets every
 * message in order through a small history (the publisher in a thread waits for it); a fail
 * topic returns SHMBUS_FULL; a stuck reliable subscriber is evicted; the config, status and
 * bad-argument paths. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>

#include "check.h"

enum { COUNT = 2000, HISTORY = 4 };

static void *publish_all(void *arg) {
    shmbus_publisher *p = arg;
    for (uint32_t i = 0; i < COUNT; i++) {
        uint64_t seq = 0;
        OK(shmbus_publisher_send(p, &i, sizeof i, &seq));
        CHECK(seq == (uint64_t)i + 1);
    }
    return NULL;
}

static shmbus_topic *make_topic(shmbus_domain *d, const char *name, uint32_t policy, uint64_t timeout_ms) {
    shmbus_topic_config *cfg = NULL;
    OK(shmbus_topic_config_new(&cfg));
    OK(shmbus_topic_config_set_max_message_len(cfg, 16));
    OK(shmbus_topic_config_set_history(cfg, HISTORY));
    OK(shmbus_topic_config_set_policy(cfg, policy));
    OK(shmbus_topic_config_set_reliable_timeout_ms(cfg, timeout_ms));
    shmbus_topic *t = NULL;
    OK(shmbus_topic_create_or_open(d, name, cfg, &t));
    shmbus_topic_config_free(cfg);
    return t;
}

/* Far more messages than the history: none is lost, none out of order. */
static void block_in_order(shmbus_domain *d) {
    shmbus_topic *t = make_topic(d, "block", SHMBUS_POLICY_BLOCK, 60000);
    CHECK(shmbus_topic_policy(t) == SHMBUS_POLICY_BLOCK);
    shmbus_publisher *p = NULL;
    shmbus_subscriber *s = NULL;
    OK(shmbus_topic_publisher(t, &p));
    OK(shmbus_topic_reliable_subscriber(t, &s));

    shmbus_topic_status_info st;
    OK(shmbus_topic_status(d, "block", &st));
    CHECK(st.policy == SHMBUS_POLICY_BLOCK && st.reliable_subscribers == 1 && st.reliable_timeout_ms == 60000);

    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, publish_all, p) == 0);
    for (uint32_t i = 0; i < COUNT; i++) {
        uint32_t v = 0;
        size_t len = 0;
        uint64_t seq = 0;
        OK(shmbus_subscriber_recv_timeout(s, &v, sizeof v, &len, &seq, NULL, 30ull * 1000 * 1000 * 1000));
        CHECK(len == sizeof v && v == i && seq == (uint64_t)i + 1);
    }
    CHECK(pthread_join(thread, NULL) == 0);

    /* With the subscriber standing still, try_send stops at SHMBUS_FULL (the oldest message
     * still needed as the value) and send_timeout at SHMBUS_TIMEOUT; reading makes room. */
    int sent = 0;
    shmbus_status rc;
    uint32_t x = 7;
    while ((rc = shmbus_publisher_try_send(p, &x, sizeof x, NULL)) == SHMBUS_OK) sent++;
    EXPECT(rc, SHMBUS_FULL);
    CHECK(sent >= HISTORY);
    CHECK(shmbus_last_error_value() == (uint64_t)COUNT + 1);
    EXPECT(shmbus_publisher_send_timeout(p, &x, sizeof x, NULL, 20 * 1000 * 1000), SHMBUS_TIMEOUT);
    uint32_t v = 0;
    size_t len = 0;
    OK(shmbus_subscriber_try_recv(s, &v, sizeof v, &len, NULL, NULL));
    OK(shmbus_publisher_try_send(p, &x, sizeof x, NULL));

    shmbus_subscriber_free(s);
    shmbus_publisher_free(p);
    shmbus_topic_free(t);
}

/* A fail topic: the send that would overwrite an unread message is SHMBUS_FULL at once. */
static void fail_is_full(shmbus_domain *d) {
    shmbus_topic *t = make_topic(d, "fail", SHMBUS_POLICY_FAIL, 60000);
    shmbus_publisher *p = NULL;
    shmbus_subscriber *s = NULL;
    OK(shmbus_topic_publisher(t, &p));
    OK(shmbus_topic_reliable_subscriber(t, &s));
    int sent = 0;
    shmbus_status rc;
    uint32_t x = 1;
    while ((rc = shmbus_publisher_send(p, &x, sizeof x, NULL)) == SHMBUS_OK) {
        CHECK(++sent < 1000);
    }
    EXPECT(rc, SHMBUS_FULL);
    CHECK(strcmp(shmbus_status_name(rc), "SHMBUS_FULL") == 0);
    CHECK(shmbus_last_error_value() == 1);
    CHECK(strlen(shmbus_last_error()) > 0);
    /* Every message sent is still there, in order. */
    for (int i = 0; i < sent; i++) {
        uint32_t v = 0;
        size_t len = 0;
        uint64_t seq = 0;
        OK(shmbus_subscriber_try_recv(s, &v, sizeof v, &len, &seq, NULL));
        CHECK(seq == (uint64_t)i + 1);
    }
    shmbus_subscriber_free(s);
    shmbus_publisher_free(p);
    shmbus_topic_free(t);
}

/* A reliable subscriber that stands still past the reliable timeout is evicted: the blocked
 * send goes on, and its next receive is SHMBUS_EVICTED, once. */
static void stuck_is_evicted(shmbus_domain *d) {
    shmbus_topic *t = make_topic(d, "evict", SHMBUS_POLICY_BLOCK, 50);
    shmbus_publisher *p = NULL;
    shmbus_subscriber *s = NULL;
    OK(shmbus_topic_publisher(t, &p));
    OK(shmbus_topic_reliable_subscriber(t, &s));
    for (uint32_t i = 0; i < 64; i++) OK(shmbus_publisher_send(p, &i, sizeof i, NULL));
    uint32_t v = 0;
    size_t len = 0;
    EXPECT(shmbus_subscriber_try_recv(s, &v, sizeof v, &len, NULL, NULL), SHMBUS_EVICTED);
    CHECK(strcmp(shmbus_status_name(SHMBUS_EVICTED), "SHMBUS_EVICTED") == 0);
    ERROR_MENTIONS("evicted");
    shmbus_status rc = shmbus_subscriber_try_recv(s, &v, sizeof v, &len, NULL, NULL);
    CHECK(rc == SHMBUS_OK || rc == SHMBUS_LAGGED);
    shmbus_topic_status_info st;
    OK(shmbus_topic_status(d, "evict", &st));
    CHECK(st.reliable_subscribers == 0 && st.subscribers == 1);
    shmbus_subscriber_free(s);
    shmbus_publisher_free(p);
    shmbus_topic_free(t);
}

static void bad_arguments(shmbus_domain *d) {
    shmbus_topic_config *cfg = NULL;
    OK(shmbus_topic_config_new(&cfg));
    EXPECT(shmbus_topic_config_set_policy(cfg, 3), SHMBUS_INVALID_ARGUMENT);
    ERROR_MENTIONS("delivery policy");
    EXPECT(shmbus_topic_config_set_policy(NULL, SHMBUS_POLICY_BLOCK), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_topic_config_set_reliable_timeout_ms(NULL, 1), SHMBUS_INVALID_ARGUMENT);
    shmbus_topic_config_free(cfg);

    /* An overwrite topic keeps nothing for a reliable subscriber: refused. */
    shmbus_topic *t = make_topic(d, "lossy", SHMBUS_POLICY_OVERWRITE, 1000);
    CHECK(shmbus_topic_policy(t) == SHMBUS_POLICY_OVERWRITE);
    shmbus_subscriber *s = NULL;
    EXPECT(shmbus_topic_reliable_subscriber(t, &s), SHMBUS_INVALID_CONFIG);
    CHECK(s == NULL);
    ERROR_MENTIONS("overwrite");
    EXPECT(shmbus_topic_reliable_subscriber(NULL, &s), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_publisher_try_send(NULL, "x", 1, NULL), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_publisher_send_timeout(NULL, "x", 1, NULL, 0), SHMBUS_INVALID_ARGUMENT);
    CHECK(shmbus_topic_policy(NULL) == SHMBUS_POLICY_OVERWRITE);
    shmbus_topic_free(t);
}

int main(int argc, char **argv) {
    shmbus_domain *d = test_domain(argc, argv, "creliable");
    block_in_order(d);
    fail_is_full(d);
    stuck_is_evicted(d);
    bad_arguments(d);
    shmbus_domain_free(d);
    printf("topic_reliable: ok\n");
    return 0;
}
