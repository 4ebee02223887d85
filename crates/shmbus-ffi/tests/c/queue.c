/* The queue through the C API: FIFO round trip, full and empty, the buffer and timeout
 * paths, and a status snapshot. */
#include "check.h"

int main(int argc, char **argv) {
    shmbus_domain *d = test_domain(argc, argv, "cqueue");
    shmbus_queue_config *cfg = NULL;
    OK(shmbus_queue_config_new(&cfg));
    OK(shmbus_queue_config_set_capacity(cfg, 4));
    OK(shmbus_queue_config_set_max_message_len(cfg, 16));
    shmbus_queue *q = NULL;
    OK(shmbus_queue_create_or_open(d, "jobs", cfg, &q));
    shmbus_queue_prefault(q);
    shmbus_queue_prefault(NULL);
    shmbus_queue_config_free(cfg);

    shmbus_producer *p = NULL;
    shmbus_consumer *c = NULL;
    OK(shmbus_queue_producer(q, &p));
    OK(shmbus_queue_consumer(q, &c));

    char buf[16];
    size_t len = 0;
    EXPECT(shmbus_consumer_try_recv(c, buf, sizeof buf, &len), SHMBUS_EMPTY);
    EXPECT(shmbus_consumer_recv_timeout(c, buf, sizeof buf, &len, 1000000), SHMBUS_TIMEOUT);
    /* Wait policies: never sleep, sleep at once; a timeout ends the wait either way. */
    OK(shmbus_consumer_set_wait_policy(c, UINT64_MAX));
    EXPECT(shmbus_consumer_recv_timeout(c, buf, sizeof buf, &len, 1000000), SHMBUS_TIMEOUT);
    OK(shmbus_consumer_set_wait_policy(c, 0));
    EXPECT(shmbus_consumer_set_wait_policy(NULL, 0), SHMBUS_INVALID_ARGUMENT);

    for (int i = 0; i < 4; i++) OK(shmbus_producer_try_send(p, &i, sizeof i));
    int five = 5;
    EXPECT(shmbus_producer_try_send(p, &five, sizeof five), SHMBUS_FULL);
    EXPECT(shmbus_producer_send_timeout(p, &five, sizeof five, 1000000), SHMBUS_TIMEOUT);
    OK(shmbus_producer_set_wait_policy(p, 0));
    EXPECT(shmbus_producer_send_timeout(p, &five, sizeof five, 1000000), SHMBUS_TIMEOUT);
    EXPECT(shmbus_producer_set_wait_policy(NULL, 0), SHMBUS_INVALID_ARGUMENT);
    char big[17] = {0};
    EXPECT(shmbus_producer_try_send(p, big, sizeof big), SHMBUS_TOO_LARGE);
    CHECK(shmbus_last_error_value() == 16);

    shmbus_queue_status_info st;
    OK(shmbus_queue_status(d, "jobs", &st));
    CHECK(st.capacity == 4 && st.max_message_len == 16 && st.producers == 1 && st.consumers == 1);

    /* A buffer too small: the length is reported and the message kept for the next call. */
    char tiny[2];
    EXPECT(shmbus_consumer_try_recv(c, tiny, sizeof tiny, &len), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == sizeof(int));
    for (int i = 0; i < 4; i++) {
        int v = -1;
        OK(shmbus_consumer_recv(c, &v, sizeof v, &len));
        CHECK(len == sizeof v && v == i);
    }
    OK(shmbus_producer_send(p, "after", 5));
    OK(shmbus_consumer_recv_timeout(c, buf, sizeof buf, &len, 1000000000ull));
    CHECK(len == 5 && memcmp(buf, "after", 5) == 0);

    EXPECT(shmbus_producer_try_send(p, NULL, 3), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_consumer_try_recv(c, NULL, 4, &len), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_consumer_try_recv(c, buf, sizeof buf, NULL), SHMBUS_INVALID_ARGUMENT);
    shmbus_queue *missing = NULL;
    EXPECT(shmbus_queue_open(d, "nope", &missing), SHMBUS_NOT_FOUND);

    shmbus_producer_free(p);
    shmbus_consumer_free(c);
    shmbus_queue_free(q);
    shmbus_domain_free(d);
    printf("queue: ok\n");
    return 0;
}
