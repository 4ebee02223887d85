/* The wait set through the C API over two channels of different kinds (a topic subscriber
 * and a queue consumer): poll, timeout, which one is ready, and a blocking wait woken by
 * another thread's send. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <pthread.h>
#include <time.h>

static shmbus_producer *producer;

static void *send_later(void *arg) {
    (void)arg;
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    OK(shmbus_producer_send(producer, "wake", 4));
    return NULL;
}

int main(int argc, char **argv) {
    shmbus_domain *d = test_domain(argc, argv, "cwait");
    shmbus_topic *t = NULL;
    OK(shmbus_topic_create_or_open(d, "events", NULL, &t));
    shmbus_queue *q = NULL;
    OK(shmbus_queue_create_or_open(d, "tasks", NULL, &q));
    shmbus_publisher *pub = NULL;
    shmbus_subscriber *sub = NULL;
    shmbus_consumer *cons = NULL;
    OK(shmbus_topic_publisher(t, &pub));
    OK(shmbus_topic_subscriber(t, &sub));
    OK(shmbus_queue_producer(q, &producer));
    OK(shmbus_queue_consumer(q, &cons));

    shmbus_waitset *ws = NULL;
    OK(shmbus_waitset_new(&ws));
    size_t ready[4];
    size_t n = 99;
    EXPECT(shmbus_waitset_wait_timeout(ws, ready, 4, &n, 1000), SHMBUS_INVALID_ARGUMENT);
    size_t i_sub = 9, i_cons = 9;
    OK(shmbus_waitset_add_subscriber(ws, sub, &i_sub));
    OK(shmbus_waitset_add_consumer(ws, cons, &i_cons));
    CHECK(i_sub == 0 && i_cons == 1);
    EXPECT(shmbus_waitset_add_consumer(ws, NULL, NULL), SHMBUS_INVALID_ARGUMENT);

    OK(shmbus_waitset_poll(ws, ready, 4, &n));
    CHECK(n == 0);
    EXPECT(shmbus_waitset_wait_timeout(ws, ready, 4, &n, 1000000), SHMBUS_TIMEOUT);

    OK(shmbus_publisher_send(pub, "event", 5, NULL));
    OK(shmbus_waitset_wait(ws, ready, 4, &n));
    CHECK(n == 1 && ready[0] == i_sub);
    char buf[16];
    size_t len = 0;
    OK(shmbus_subscriber_try_recv(sub, buf, sizeof buf, &len, NULL, NULL));

    /* Both ready at once. */
    OK(shmbus_publisher_send(pub, "event", 5, NULL));
    OK(shmbus_producer_send(producer, "task", 4));
    OK(shmbus_waitset_wait_timeout(ws, ready, 4, &n, 1000000000ull));
    CHECK(n == 2 && ready[0] == 0 && ready[1] == 1);
    /* A smaller list: the count is still 2. */
    OK(shmbus_waitset_poll(ws, ready, 1, &n));
    CHECK(n == 2);
    OK(shmbus_subscriber_try_recv(sub, buf, sizeof buf, &len, NULL, NULL));
    OK(shmbus_consumer_try_recv(cons, buf, sizeof buf, &len));

    /* A blocking wait, woken by another thread's send. */
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, send_later, NULL) == 0);
    OK(shmbus_waitset_wait(ws, ready, 4, &n));
    CHECK(n == 1 && ready[0] == i_cons);
    CHECK(pthread_join(thread, NULL) == 0);
    OK(shmbus_consumer_try_recv(cons, buf, sizeof buf, &len));
    CHECK(len == 4 && memcmp(buf, "wake", 4) == 0);

    /* A member with a sample out is still waitable (shared borrow). */
    OK(shmbus_publisher_send(pub, "pinned", 6, NULL));
    shmbus_sample *s = NULL;
    OK(shmbus_subscriber_try_recv_ref(sub, &s));
    OK(shmbus_waitset_poll(ws, ready, 4, &n));
    CHECK(n == 0);
    shmbus_sample_release(s);

    /* A message kept for a larger buffer keeps its consumer ready. */
    OK(shmbus_producer_send(producer, "long message", 12));
    char tiny[2];
    EXPECT(shmbus_consumer_try_recv(cons, tiny, sizeof tiny, &len), SHMBUS_BUFFER_TOO_SMALL);
    OK(shmbus_waitset_wait_timeout(ws, ready, 4, &n, 1000000000ull));
    CHECK(n == 1 && ready[0] == i_cons);
    OK(shmbus_consumer_try_recv(cons, buf, sizeof buf, &len));
    CHECK(len == 12 && memcmp(buf, "long message", 12) == 0);
    OK(shmbus_waitset_poll(ws, ready, 4, &n));
    CHECK(n == 0);

    OK(shmbus_waitset_clear(ws));
    OK(shmbus_waitset_add_consumer(ws, cons, &i_cons));
    CHECK(i_cons == 0);
    shmbus_waitset_free(ws);

    shmbus_publisher_free(pub);
    shmbus_subscriber_free(sub);
    shmbus_producer_free(producer);
    shmbus_consumer_free(cons);
    shmbus_topic_free(t);
    shmbus_queue_free(q);
    shmbus_domain_free(d);
    printf("waitset: ok\n");
    return 0;
}
