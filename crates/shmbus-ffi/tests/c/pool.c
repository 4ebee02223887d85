/* The pool through the C API: dispatch with the job handed back when no worker is idle, copy
 * and in-place receives with the job id, done, and a status snapshot. */
#include "check.h"

int main(int argc, char **argv) {
    shmbus_domain *d = test_domain(argc, argv, "cpool");
    shmbus_pool_config *cfg = NULL;
    OK(shmbus_pool_config_new(&cfg));
    OK(shmbus_pool_config_set_max_workers(cfg, 2));
    OK(shmbus_pool_config_set_max_job_len(cfg, 64));
    shmbus_pool *pool = NULL;
    OK(shmbus_pool_create_or_open(d, "work", cfg, &pool));
    shmbus_pool_prefault(pool);
    shmbus_pool_prefault(NULL);
    shmbus_pool_config_free(cfg);

    shmbus_dispatcher *disp = NULL, *second = NULL;
    OK(shmbus_pool_dispatcher(pool, &disp));
    EXPECT(shmbus_pool_dispatcher(pool, &second), SHMBUS_BUSY);
    uint64_t id = 0;
    size_t which = 99;
    EXPECT(shmbus_dispatcher_try_send(disp, "job", 3, &id, &which), SHMBUS_NO_WORKERS);

    shmbus_worker *w = NULL;
    OK(shmbus_pool_worker(pool, &w));
    CHECK(shmbus_worker_dispatcher_alive(w) == 1);
    CHECK(shmbus_worker_dispatcher_finished(w) == 0);
    CHECK(shmbus_worker_dispatcher_finished(NULL) == 0);
    char buf[64];
    size_t len = 0;
    uint64_t got = 0;
    EXPECT(shmbus_worker_try_recv(w, buf, sizeof buf, &len, &got), SHMBUS_EMPTY);
    EXPECT(shmbus_worker_recv_timeout(w, buf, sizeof buf, &len, &got, 1000000), SHMBUS_TIMEOUT);
    /* Wait policies: never sleep, sleep at once; a timeout ends the wait either way. */
    OK(shmbus_worker_set_wait_policy(w, UINT64_MAX));
    EXPECT(shmbus_worker_recv_timeout(w, buf, sizeof buf, &len, &got, 1000000), SHMBUS_TIMEOUT);
    OK(shmbus_worker_set_wait_policy(w, 0));
    EXPECT(shmbus_worker_set_wait_policy(NULL, 0), SHMBUS_INVALID_ARGUMENT);
    /* A worker that timed out is not idle until it says so (or receives again). */
    OK(shmbus_worker_done(w));

    OK(shmbus_dispatcher_try_send(disp, "first job", 9, &id, &which));
    CHECK(which == 0);
    /* The only worker holds a job: the next one is handed back. */
    EXPECT(shmbus_dispatcher_try_send(disp, "second", 6, NULL, NULL), SHMBUS_ALL_BUSY);
    char big[65] = {0};
    EXPECT(shmbus_dispatcher_try_send(disp, big, sizeof big, NULL, NULL), SHMBUS_TOO_LARGE);

    /* Too small a buffer: the job stays in the mailbox for the next receive. */
    EXPECT(shmbus_worker_try_recv(w, buf, 4, &len, &got), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 9);
    const uint8_t *data = NULL;
    OK(shmbus_worker_recv(w, buf, sizeof buf, &len, &got));
    CHECK(len == 9 && memcmp(buf, "first job", 9) == 0 && got == id);
    OK(shmbus_worker_done(w));

    OK(shmbus_dispatcher_try_send_with_id(disp, 4242, "in place", 8, &which));
    OK(shmbus_worker_recv_ref_timeout(w, &data, &len, &got, 1000000000ull));
    CHECK(len == 8 && memcmp(data, "in place", 8) == 0 && got == 4242);
    OK(shmbus_worker_done(w));
    OK(shmbus_dispatcher_try_send(disp, "third", 5, &id, NULL));
    OK(shmbus_worker_try_recv_ref(w, &data, &len, &got));
    CHECK(len == 5 && memcmp(data, "third", 5) == 0 && got == id);

    shmbus_pool_status_info st;
    OK(shmbus_pool_status(d, "work", &st));
    CHECK(st.max_workers == 2 && st.max_job_len == 64 && st.workers == 1 && st.dispatcher_alive == 1);
    CHECK(st.dispatched == 3);

    size_t lost = 99;
    OK(shmbus_dispatcher_reap(disp, NULL, 0, &lost));
    CHECK(lost == 0);
    EXPECT(shmbus_dispatcher_reap(disp, NULL, 4, &lost), SHMBUS_INVALID_ARGUMENT);

    /* The dispatcher finishes normally: the worker is told it is gone, and that it finished
     * (not died). */
    OK(shmbus_worker_done(w));
    shmbus_dispatcher_free(disp);
    EXPECT(shmbus_worker_recv_timeout(w, buf, sizeof buf, &len, &got, 1000000000ull), SHMBUS_DISCONNECTED);
    CHECK(shmbus_worker_dispatcher_finished(w) == 1);
    shmbus_worker_free(w);
    shmbus_pool_free(pool);
    shmbus_domain_free(d);
    printf("pool: ok\n");
    return 0;
}
