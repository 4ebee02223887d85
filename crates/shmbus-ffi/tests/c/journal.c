/* The journal through the C API: append (copy and loan), tailers from the start, an index
 * and the end, copy and in-place reads, named readers that go on from their ack. */
#include "check.h"

#include <stdint.h>

static void expect_entry(shmbus_tailer *t, const char *text, uint64_t index) {
    char buf[64];
    size_t len = 0;
    uint64_t got = 0, ts = 0;
    OK(shmbus_tailer_recv_timeout(t, buf, sizeof buf, &len, &got, &ts, 1000000000ull));
    CHECK(len == strlen(text) && memcmp(buf, text, len) == 0);
    CHECK(got == index && ts > 0);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/log", argv[1]);

    shmbus_journal *missing = NULL;
    EXPECT(shmbus_journal_open(dir, &missing), SHMBUS_NOT_FOUND);

    shmbus_journal_config *cfg = NULL;
    OK(shmbus_journal_config_new(&cfg));
    OK(shmbus_journal_config_set_max_entry_len(cfg, 256));
    shmbus_journal *j = NULL;
    OK(shmbus_journal_create_or_open(dir, cfg, &j));
    shmbus_journal_config_free(cfg);

    shmbus_appender *a = NULL;
    OK(shmbus_journal_appender(j, &a));
    uint64_t index = 99;
    OK(shmbus_appender_send(a, "zero", 4, &index));
    uint64_t first = index;
    OK(shmbus_appender_send(a, "one", 3, &index));
    CHECK(index == first + 1);
    char big[257] = {0};
    EXPECT(shmbus_appender_send(a, big, sizeof big, NULL), SHMBUS_TOO_LARGE);
    CHECK(shmbus_last_error_value() == 256);

    shmbus_journal_loan *loan = NULL;
    OK(shmbus_appender_loan(a, 3, &loan));
    EXPECT(shmbus_appender_send(a, "x", 1, NULL), SHMBUS_BUSY);
    uint8_t *room = NULL;
    size_t cap = 0;
    OK(shmbus_journal_loan_data(loan, &room, &cap));
    CHECK(cap == 3);
    memcpy(room, "two", 3);
    OK(shmbus_journal_loan_send(loan, &index));
    CHECK(index == first + 2);

    /* From the start: copy reads, the too-small path, in-place reads. */
    shmbus_tailer *t = NULL;
    OK(shmbus_journal_tailer(j, &t));
    expect_entry(t, "zero", first);
    char tiny[1];
    size_t len = 0;
    EXPECT(shmbus_tailer_try_recv(t, tiny, sizeof tiny, &len, NULL, NULL), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 3);
    const uint8_t *data = NULL;
    expect_entry(t, "one", first + 1);
    uint64_t got = 0;
    OK(shmbus_tailer_recv_ref(t, &data, &len, &got, NULL));
    CHECK(len == 3 && memcmp(data, "two", 3) == 0 && got == first + 2);
    EXPECT(shmbus_tailer_try_recv_ref(t, &data, &len, NULL, NULL), SHMBUS_EMPTY);
    EXPECT(shmbus_tailer_recv_ref_timeout(t, &data, &len, NULL, NULL, 1000000), SHMBUS_TIMEOUT);
    /* Wait policies: never sleep, sleep at once; a timeout ends the wait either way. */
    OK(shmbus_tailer_set_wait_policy(t, UINT64_MAX));
    EXPECT(shmbus_tailer_recv_ref_timeout(t, &data, &len, NULL, NULL, 1000000), SHMBUS_TIMEOUT);
    OK(shmbus_tailer_set_wait_policy(t, 0));
    EXPECT(shmbus_tailer_recv_ref_timeout(t, &data, &len, NULL, NULL, 1000000), SHMBUS_TIMEOUT);
    EXPECT(shmbus_tailer_set_wait_policy(NULL, 0), SHMBUS_INVALID_ARGUMENT);
    CHECK(shmbus_tailer_position(t) == first + 3);
    shmbus_tailer_free(t);

    /* From an index, and from the end. */
    OK(shmbus_journal_tailer_at(j, first + 1, &t));
    expect_entry(t, "one", first + 1);
    shmbus_tailer_free(t);
    OK(shmbus_journal_tailer_at_end(j, &t));
    char buf[64];
    EXPECT(shmbus_tailer_try_recv(t, buf, sizeof buf, &len, NULL, NULL), SHMBUS_EMPTY);
    OK(shmbus_appender_send(a, "three", 5, NULL));
    expect_entry(t, "three", first + 3);
    shmbus_tailer_free(t);
    OK(shmbus_journal_tailer_at_time(j, 0, &t));
    expect_entry(t, "zero", first);
    shmbus_tailer_free(t);

    /* A named reader goes on from its last ack; one holder per name. */
    shmbus_tailer *r = NULL, *r2 = NULL;
    OK(shmbus_journal_reader(j, "audit", &r));
    EXPECT(shmbus_journal_reader(j, "audit", &r2), SHMBUS_BUSY);
    expect_entry(r, "zero", first);
    expect_entry(r, "one", first + 1);
    OK(shmbus_tailer_ack(r));
    shmbus_tailer_free(r);
    OK(shmbus_journal_reader(j, "audit", &r));
    expect_entry(r, "two", first + 2);
    shmbus_tailer_free(r);
    EXPECT(shmbus_journal_reader(j, "bad/name", &r), SHMBUS_INVALID_NAME);

    shmbus_journal_status_info st;
    OK(shmbus_journal_status(dir, &st));
    CHECK(st.first_index == first && st.next_index == first + 4 && st.readers == 1 && st.appenders == 1);

    shmbus_appender_free(a);
    shmbus_journal_free(j);

    /* A second journal with an hourly roll and flushed commits. */
    char dir2[4096];
    snprintf(dir2, sizeof dir2, "%s/flushed", argv[1]);
    OK(shmbus_journal_config_new(&cfg));
    OK(shmbus_journal_config_set_roll_secs(cfg, 3600));
    OK(shmbus_journal_config_set_durability_flush(cfg));
    OK(shmbus_journal_config_set_durability_periodic(cfg, 1000000000ull));
    OK(shmbus_journal_config_set_durability_none(cfg));
    OK(shmbus_journal_config_set_durability_flush(cfg));
    OK(shmbus_journal_create_or_open(dir2, cfg, &j));
    shmbus_journal_config_free(cfg);
    OK(shmbus_journal_appender(j, &a));
    OK(shmbus_appender_send(a, "durable", 7, &index));
    OK(shmbus_journal_tailer_at(j, index, &t));
    expect_entry(t, "durable", index);
    shmbus_tailer_free(t);
    shmbus_appender_free(a);
    shmbus_journal_free(j);
    printf("journal: ok\n");
    return 0;
}
