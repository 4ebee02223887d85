/* The stream through the C API: copy and loan sends, copy and in-place reads (consumed or
 * left to read again), exclusivity, and a status snapshot. */
#include "check.h"

int main(int argc, char **argv) {
    shmbus_domain *d = test_domain(argc, argv, "cstream");
    shmbus_stream_config *cfg = NULL;
    OK(shmbus_stream_config_new(&cfg));
    OK(shmbus_stream_config_set_capacity(cfg, 4096));
    shmbus_stream *s = NULL;
    OK(shmbus_stream_create_or_open(d, "bytes", cfg, &s));
    shmbus_stream_prefault(s);
    shmbus_stream_prefault(NULL);
    shmbus_stream_config_free(cfg);
    CHECK(shmbus_stream_max_record_len(s) > 0);

    shmbus_stream_writer *w = NULL, *w2 = NULL;
    shmbus_stream_reader *r = NULL;
    OK(shmbus_stream_writer_open(s, &w));
    EXPECT(shmbus_stream_writer_open(s, &w2), SHMBUS_BUSY);
    OK(shmbus_stream_reader_open(s, &r));

    char buf[64];
    size_t len = 0;
    EXPECT(shmbus_stream_reader_try_recv(r, buf, sizeof buf, &len), SHMBUS_EMPTY);
    EXPECT(shmbus_stream_reader_recv_timeout(r, buf, sizeof buf, &len, 1000000), SHMBUS_TIMEOUT);
    /* Wait policies: never sleep, sleep at once; a timeout ends the wait either way. */
    OK(shmbus_stream_reader_set_wait_policy(r, UINT64_MAX));
    EXPECT(shmbus_stream_reader_recv_timeout(r, buf, sizeof buf, &len, 1000000), SHMBUS_TIMEOUT);
    OK(shmbus_stream_reader_set_wait_policy(r, 0));
    EXPECT(shmbus_stream_reader_recv_timeout(r, buf, sizeof buf, &len, 1000000), SHMBUS_TIMEOUT);
    OK(shmbus_stream_writer_set_wait_policy(w, 0));
    EXPECT(shmbus_stream_writer_set_wait_policy(NULL, 0), SHMBUS_INVALID_ARGUMENT);

    OK(shmbus_stream_writer_try_send(w, "one", 3));
    OK(shmbus_stream_writer_send(w, "two!", 4));
    OK(shmbus_stream_writer_send_timeout(w, "three", 5, 1000000000ull));

    /* A loan: written in place, shortened on send. */
    shmbus_stream_loan *loan = NULL;
    OK(shmbus_stream_writer_try_loan(w, 32, &loan));
    EXPECT(shmbus_stream_writer_try_send(w, "x", 1), SHMBUS_BUSY);
    uint8_t *room = NULL;
    size_t cap = 0;
    OK(shmbus_stream_loan_data(loan, &room, &cap));
    CHECK(cap == 32);
    memcpy(room, "four", 4);
    OK(shmbus_stream_loan_send(loan, 4));
    OK(shmbus_stream_writer_loan(w, 8, &loan));
    shmbus_stream_loan_discard(loan);
    OK(shmbus_stream_writer_loan_timeout(w, 8, 1000000000ull, &loan));
    EXPECT(shmbus_stream_loan_send(loan, 9), SHMBUS_TOO_LARGE);

    /* Copy reads; too small a buffer leaves the record on the stream. */
    EXPECT(shmbus_stream_reader_try_recv(r, buf, 2, &len), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 3);
    OK(shmbus_stream_reader_try_recv(r, buf, sizeof buf, &len));
    CHECK(len == 3 && memcmp(buf, "one", 3) == 0);
    OK(shmbus_stream_reader_recv(r, buf, sizeof buf, &len));
    CHECK(len == 4 && memcmp(buf, "two!", 4) == 0);

    /* In place: released records are read again, consumed ones are gone. */
    shmbus_record *rec = NULL;
    OK(shmbus_stream_reader_try_recv_ref(r, &rec));
    const uint8_t *data = NULL;
    OK(shmbus_record_data(rec, &data, &len));
    CHECK(len == 5 && memcmp(data, "three", 5) == 0);
    EXPECT(shmbus_stream_reader_try_recv(r, buf, sizeof buf, &len), SHMBUS_BUSY);
    shmbus_record_release(rec);
    OK(shmbus_stream_reader_recv_ref(r, &rec));
    OK(shmbus_record_data(rec, &data, &len));
    CHECK(len == 5 && memcmp(data, "three", 5) == 0);
    shmbus_record_consume(rec);
    OK(shmbus_stream_reader_recv_ref_timeout(r, &rec, 1000000000ull));
    OK(shmbus_record_data(rec, &data, &len));
    CHECK(len == 4 && memcmp(data, "four", 4) == 0);
    shmbus_record_consume(rec);
    EXPECT(shmbus_stream_reader_recv_ref_timeout(r, &rec, 1000000), SHMBUS_TIMEOUT);

    shmbus_stream_status_info st;
    OK(shmbus_stream_status(d, "bytes", &st));
    CHECK(st.capacity >= 4096 && st.used == 0 && st.writer_pid != 0 && st.writer_alive == 1 && st.reader_alive == 1);

    /* The reader freed with a record out: the record frees it. */
    OK(shmbus_stream_writer_send(w, "last", 4));
    OK(shmbus_stream_reader_recv_ref(r, &rec));
    shmbus_stream_reader_free(r);
    OK(shmbus_record_data(rec, &data, &len));
    CHECK(len == 4);
    shmbus_record_consume(rec);

    shmbus_stream_writer_free(w);
    shmbus_stream_free(s);
    shmbus_domain_free(d);
    printf("stream: ok\n");
    return 0;
}
