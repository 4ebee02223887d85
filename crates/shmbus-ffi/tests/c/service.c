/* The service through the C API: its request and response schemas (both or neither),
 * requests refused (no server, too large, too many in
 * flight), taken and answered in place, responses matched by id, a stream ended, a failed
 * request, a cancelled one whose late response is dropped, a call, a response kept when the
 * buffer is too small, and a status snapshot. Then the zero-copy forms: a camera frame
 * written in a request loan, read in place by the server, answered in a response loan and
 * read in place by the client; the endpoints busy while an item is out; a discarded loan and
 * a too-long send that send nothing; a stream longer than the response depth that flows as
 * the responses read in place are freed; a response left unread; a loan outliving its
 * request. */
#include "check.h"

#include <stdint.h>

#define SEC 1000000000ull
/* One 1920x1080 RGB frame. */
#define FRAME ((size_t)6220800)

static int aligned64(const void *p) { return ((uintptr_t)p % 64) == 0; }

/* Sends part `k` of a stream through a response loan: 100 + k bytes of 'a' + k. */
static void send_part(shmbus_request *req, int k, int last) {
    shmbus_response_loan *loan = NULL;
    uint8_t *room = NULL;
    size_t cap = 0;
    OK(shmbus_request_loan_response(req, &loan, 0));
    OK(shmbus_response_loan_data(loan, &room, &cap));
    memset(room, 'a' + k, 100 + (size_t)k);
    OK(shmbus_response_loan_send(loan, 100 + (size_t)k, (uint32_t)last));
}

/* Checks that `v` is part `k` of a stream of 5 to request `id`; returns its data pointer. */
static const uint8_t *check_part(shmbus_response *v, uint64_t id, int k) {
    const uint8_t *data = NULL;
    size_t len = 0;
    OK(shmbus_response_data(v, &data, &len));
    CHECK(len == 100 + (size_t)k && aligned64(data));
    for (size_t i = 0; i < len; i++) CHECK(data[i] == 'a' + k);
    CHECK(shmbus_response_request_id(v) == id);
    CHECK(shmbus_response_is_last(v) == (k == 4 ? 1u : 0u));
    return data;
}

static void loans_in_place(shmbus_domain *d) {
    shmbus_service_config *cfg = NULL;
    OK(shmbus_service_config_new(&cfg));
    OK(shmbus_service_config_set_max_clients(cfg, 1));
    OK(shmbus_service_config_set_max_servers(cfg, 1));
    OK(shmbus_service_config_set_max_in_flight(cfg, 2));
    OK(shmbus_service_config_set_max_request_len(cfg, FRAME));
    OK(shmbus_service_config_set_max_response_len(cfg, FRAME));
    OK(shmbus_service_config_set_response_depth(cfg, 2));
    shmbus_service *svc = NULL;
    OK(shmbus_service_create_or_open(d, "frames", cfg, &svc));
    shmbus_service_config_free(cfg);
    shmbus_client *c = NULL;
    shmbus_server *s = NULL;
    OK(shmbus_service_client(svc, &c));
    OK(shmbus_service_server(svc, &s));
    char buf[16];
    size_t len = 0;
    uint64_t got = 0;
    uint32_t last = 0;

    /* A frame written in a request loan: FRAME bytes of room, 64-byte aligned; the client is
     * busy until the loan is sent. */
    shmbus_request_loan *rl = NULL, *other = NULL;
    uint8_t *room = NULL;
    size_t cap = 0;
    OK(shmbus_client_loan_request(c, &rl));
    OK(shmbus_request_loan_data(rl, &room, &cap));
    CHECK(cap == FRAME && aligned64(room));
    for (size_t i = 0; i < FRAME; i++) room[i] = (uint8_t)(i * 7 + 1);
    EXPECT(shmbus_client_try_send_request(c, "x", 1, NULL), SHMBUS_BUSY);
    EXPECT(shmbus_client_loan_request(c, &other), SHMBUS_BUSY);
    EXPECT(shmbus_client_recv_response(c, buf, sizeof buf, &len, &got, &last, 0), SHMBUS_BUSY);
    EXPECT(shmbus_request_loan_data(NULL, &room, &cap), SHMBUS_INVALID_ARGUMENT);
    uint64_t id = 0;
    OK(shmbus_request_loan_send(rl, FRAME, &id));
    CHECK(shmbus_client_in_flight(c) == 1);

    /* Read in place by the server, answered in place from it. */
    shmbus_request *req = NULL;
    OK(shmbus_server_recv(s, &req, SEC));
    const uint8_t *rd = NULL;
    size_t rlen = 0;
    OK(shmbus_request_data(req, &rd, &rlen));
    CHECK(rlen == FRAME && aligned64(rd) && shmbus_request_id(req) == id);
    for (size_t i = 0; i < FRAME; i++) CHECK(rd[i] == (uint8_t)(i * 7 + 1));
    shmbus_response_loan *wl = NULL, *wl2 = NULL;
    uint8_t *cell = NULL;
    OK(shmbus_request_loan_response(req, &wl, 0));
    OK(shmbus_response_loan_data(wl, &cell, &cap));
    CHECK(cap == FRAME && aligned64(cell));
    /* The request is busy while its response loan is out. */
    EXPECT(shmbus_request_respond(req, "x", 1, 0, 0), SHMBUS_BUSY);
    EXPECT(shmbus_request_fail(req), SHMBUS_BUSY);
    EXPECT(shmbus_request_loan_response(req, &wl2, 0), SHMBUS_BUSY);
    EXPECT(shmbus_request_data(req, &rd, &rlen), SHMBUS_BUSY);
    /* Longer than the cell: refused, the loan freed, nothing sent. */
    EXPECT(shmbus_response_loan_send(wl, FRAME + 1, 1), SHMBUS_TOO_LARGE);
    CHECK(shmbus_last_error_value() == FRAME);
    shmbus_response *v = NULL;
    EXPECT(shmbus_client_recv_response_ref(c, &v, 0), SHMBUS_EMPTY);
    CHECK(v == NULL && shmbus_client_in_flight(c) == 1);
    /* Discarded: nothing sent either, and the request is its own again. */
    OK(shmbus_request_loan_response(req, &wl, 0));
    shmbus_response_loan_discard(wl);
    EXPECT(shmbus_client_recv_response_ref(c, &v, 0), SHMBUS_EMPTY);
    CHECK(shmbus_request_id(req) == id);
    OK(shmbus_request_loan_response(req, &wl, UINT64_MAX));
    OK(shmbus_response_loan_data(wl, &cell, &cap));
    for (size_t i = 0; i < FRAME; i++) cell[i] = (uint8_t)~rd[i];
    OK(shmbus_response_loan_send(wl, FRAME, 1));
    EXPECT(shmbus_request_loan_response(req, &wl, 0), SHMBUS_INVALID_ARGUMENT); /* finished */
    shmbus_request_free(req);

    /* Read in place by the client; the client is busy until the response is freed. */
    OK(shmbus_client_recv_response_ref(c, &v, SEC));
    const uint8_t *pd = NULL;
    size_t plen = 0;
    OK(shmbus_response_data(v, &pd, &plen));
    CHECK(plen == FRAME && aligned64(pd));
    CHECK(shmbus_response_request_id(v) == id && shmbus_response_is_last(v) == 1);
    for (size_t i = 0; i < FRAME; i++) CHECK(pd[i] == (uint8_t)~(uint8_t)(i * 7 + 1));
    EXPECT(shmbus_client_try_send_request(c, "x", 1, NULL), SHMBUS_BUSY);
    EXPECT(shmbus_client_loan_request(c, &other), SHMBUS_BUSY);
    shmbus_response *v2 = NULL;
    EXPECT(shmbus_client_recv_response_ref(c, &v2, 0), SHMBUS_BUSY);
    EXPECT(shmbus_client_cancel(c, id), SHMBUS_BUSY);
    shmbus_response_free(v);
    CHECK(shmbus_client_in_flight(c) == 0);
    CHECK(shmbus_response_request_id(NULL) == 0 && shmbus_response_is_last(NULL) == 0);
    shmbus_response_free(NULL);
    shmbus_response_unread(NULL);

    /* A discarded request loan sends nothing; one sent too long is refused and frees it. */
    OK(shmbus_client_loan_request(c, &rl));
    OK(shmbus_request_loan_data(rl, &room, &cap));
    memcpy(room, "nothing", 7);
    shmbus_request_loan_discard(rl);
    shmbus_request_loan_discard(NULL);
    CHECK(shmbus_client_in_flight(c) == 0);
    EXPECT(shmbus_server_recv(s, &req, 0), SHMBUS_EMPTY);
    OK(shmbus_client_loan_request(c, &rl));
    uint64_t never = 7;
    EXPECT(shmbus_request_loan_send(rl, FRAME + 1, &never), SHMBUS_TOO_LARGE);
    CHECK(never == 7 && shmbus_client_in_flight(c) == 0);
    EXPECT(shmbus_server_recv(s, &req, 0), SHMBUS_EMPTY);

    /* A stream of 5 responses with a response depth of 2: the third waits for a cell, which a
     * response read in place gives back when it is freed (not before). */
    uint64_t sid = 0;
    OK(shmbus_client_loan_request(c, &rl));
    OK(shmbus_request_loan_data(rl, &room, &cap));
    memcpy(room, "stream", 6);
    OK(shmbus_request_loan_send(rl, 6, &sid));
    OK(shmbus_server_recv(s, &req, SEC));
    OK(shmbus_request_data(req, &rd, &rlen));
    CHECK(rlen == 6 && memcmp(rd, "stream", 6) == 0);
    send_part(req, 0, 0);
    send_part(req, 1, 0);
    EXPECT(shmbus_request_loan_response(req, &wl, 0), SHMBUS_FULL);
    EXPECT(shmbus_request_loan_response(req, &wl, 1000000ull), SHMBUS_FULL);
    for (int k = 0; k < 5; k++) {
        OK(shmbus_client_recv_response_ref_for(c, sid, &v, SEC));
        const uint8_t *at = check_part(v, sid, k);
        if (k == 0) {
            /* Left unread: the next receive returns it again, in the same cell. */
            shmbus_response_unread(v);
            OK(shmbus_client_recv_response_ref(c, &v, 0));
            CHECK(check_part(v, sid, 0) == at);
        }
        if (k + 2 < 5) EXPECT(shmbus_request_loan_response(req, &wl, 0), SHMBUS_FULL);
        shmbus_response_free(v);
        if (k + 2 < 5) send_part(req, k + 2, k + 2 == 4);
    }
    shmbus_request_free(req);
    CHECK(shmbus_client_in_flight(c) == 0);
    EXPECT(shmbus_client_recv_response_ref_for(c, sid, &v, SEC), SHMBUS_EMPTY); /* not in flight */

    /* A response loan whose client gave the request up: SHMBUS_DISCONNECTED, and the request
     * is finished. */
    OK(shmbus_client_try_send_request(c, "late", 4, &id));
    OK(shmbus_server_recv(s, &req, SEC));
    OK(shmbus_client_cancel(c, id));
    EXPECT(shmbus_request_loan_response(req, &wl, 0), SHMBUS_DISCONNECTED);
    EXPECT(shmbus_request_loan_response(req, &wl, 0), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_request_data(req, &rd, &rlen), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_request_fail(req), SHMBUS_INVALID_ARGUMENT);
    CHECK(shmbus_request_id(req) == 0);
    shmbus_request_free(req);

    /* A response loan outlives its request's handle: sent after the free, it still arrives. */
    OK(shmbus_client_try_send_request(c, "orphan", 6, &id));
    OK(shmbus_server_recv(s, &req, SEC));
    OK(shmbus_request_loan_response(req, &wl, 0));
    shmbus_request_free(req);
    OK(shmbus_response_loan_data(wl, &cell, &cap));
    memcpy(cell, "kept", 4);
    OK(shmbus_response_loan_send(wl, 4, 1));
    OK(shmbus_client_recv_response(c, buf, sizeof buf, &len, &got, &last, SEC));
    CHECK(got == id && len == 4 && memcmp(buf, "kept", 4) == 0 && last == 1);

    /* A response read in place outlives its client's handle. */
    OK(shmbus_client_try_send_request(c, "last", 4, &id));
    OK(shmbus_server_recv(s, &req, SEC));
    OK(shmbus_request_respond(req, "bye", 3, 1, 0));
    shmbus_request_free(req);
    OK(shmbus_client_recv_response_ref(c, &v, SEC));
    shmbus_client_free(c);
    OK(shmbus_response_data(v, &pd, &plen));
    CHECK(plen == 3 && memcmp(pd, "bye", 3) == 0);
    shmbus_response_free(v);

    shmbus_server_free(s);
    shmbus_service_free(svc);
}

int main(int argc, char **argv) {
    shmbus_domain *d = test_domain(argc, argv, "csvc");
    shmbus_service_config *cfg = NULL;
    OK(shmbus_service_config_new(&cfg));
    OK(shmbus_service_config_set_max_in_flight(cfg, 2));
    OK(shmbus_service_config_set_max_request_len(cfg, 64));
    OK(shmbus_service_config_set_max_response_len(cfg, 64));
    OK(shmbus_service_config_set_response_depth(cfg, 2));
    EXPECT(shmbus_service_config_set_max_servers(NULL, 1), SHMBUS_INVALID_ARGUMENT);
    shmbus_service *svc = NULL;
    /* One schema of the pair is refused; both are stored and read back. */
    OK(shmbus_service_config_set_request_schema(cfg, "cdr", "example/Add_Request", "ros2msg", "int64 a\nint64 b\n", 16));
    EXPECT(shmbus_service_create_or_open(d, "svc", cfg, &svc), SHMBUS_INVALID_CONFIG);
    OK(shmbus_service_config_set_response_schema(cfg, "cdr", "example/Add_Response", "ros2msg", "int64 sum\n", 10));
    EXPECT(shmbus_service_config_set_response_schema(cfg, "", NULL, NULL, NULL, 0), SHMBUS_INVALID_CONFIG);
    OK(shmbus_service_create_or_open(d, "svc", cfg, &svc));
    shmbus_service_config_free(cfg);
    shmbus_schema sc;
    OK(shmbus_service_request_schema(svc, &sc));
    CHECK(sc.name_len == 19 && memcmp(sc.name, "example/Add_Request", 19) == 0 && sc.data_len == 16);
    OK(shmbus_service_response_schema(svc, &sc));
    CHECK(sc.name_len == 20 && memcmp(sc.name, "example/Add_Response", 20) == 0 && sc.data_len == 10);

    shmbus_client *c = NULL;
    OK(shmbus_service_client(svc, &c));
    uint64_t id = 0;
    EXPECT(shmbus_client_try_send_request(c, "x", 1, &id), SHMBUS_NO_WORKERS);
    shmbus_server *s = NULL;
    OK(shmbus_service_server(svc, &s));
    char big[65] = {0};
    EXPECT(shmbus_client_try_send_request(c, big, sizeof big, &id), SHMBUS_TOO_LARGE);

    /* Two in flight, a third handed back. */
    uint64_t a = 0, b = 0;
    OK(shmbus_client_try_send_request(c, "first", 5, &a));
    OK(shmbus_client_try_send_request(c, "second", 6, &b));
    EXPECT(shmbus_client_try_send_request(c, "third", 5, NULL), SHMBUS_FULL);
    CHECK(shmbus_client_in_flight(c) == 2);

    shmbus_request *r1 = NULL, *r2 = NULL, *none = NULL;
    OK(shmbus_server_recv(s, &r1, 0));
    OK(shmbus_server_recv(s, &r2, 1000000000ull));
    EXPECT(shmbus_server_recv(s, &none, 0), SHMBUS_EMPTY);
    EXPECT(shmbus_server_recv(s, &none, 1000000ull), SHMBUS_TIMEOUT);
    const uint8_t *data = NULL;
    size_t len = 0;
    OK(shmbus_request_data(r1, &data, &len));
    CHECK(len == 5 && memcmp(data, "first", 5) == 0 && shmbus_request_id(r1) == a);
    CHECK(shmbus_request_id(r2) == b && shmbus_request_id(NULL) == 0);

    /* The second answered first, with a stream: a part, then the end. */
    OK(shmbus_request_respond(r2, "part", 4, 0, UINT64_MAX));
    shmbus_request_free(r2); /* ends it: an empty last response */
    OK(shmbus_request_respond(r1, "done", 4, 1, UINT64_MAX));
    EXPECT(shmbus_request_respond(r1, "again", 5, 0, 0), SHMBUS_INVALID_ARGUMENT);
    shmbus_request_free(r1);

    char buf[64];
    uint64_t got = 0;
    uint32_t last = 9;
    int seen_part = 0, seen_end = 0, seen_done = 0;
    for (int i = 0; i < 3; i++) {
        OK(shmbus_client_recv_response(c, buf, sizeof buf, &len, &got, &last, 1000000000ull));
        if (got == b && len == 4 && memcmp(buf, "part", 4) == 0 && last == 0) seen_part++;
        else if (got == b && len == 0 && last == 1) seen_end++;
        else if (got == a && len == 4 && memcmp(buf, "done", 4) == 0 && last == 1) seen_done++;
    }
    CHECK(seen_part == 1 && seen_end == 1 && seen_done == 1);
    EXPECT(shmbus_client_recv_response(c, buf, sizeof buf, &len, &got, &last, 0), SHMBUS_EMPTY);

    /* A failed request. */
    OK(shmbus_client_try_send_request(c, "fail me", 7, &id));
    OK(shmbus_server_recv(s, &r1, 1000000000ull));
    OK(shmbus_request_fail(r1));
    EXPECT(shmbus_request_fail(r1), SHMBUS_INVALID_ARGUMENT);
    shmbus_request_free(r1);
    EXPECT(shmbus_client_recv_response(c, buf, sizeof buf, &len, &got, &last, 1000000000ull), SHMBUS_FAILED);

    /* A response larger than the buffer is kept for the next receive. */
    OK(shmbus_client_try_send_request(c, "big answer", 10, &id));
    OK(shmbus_server_recv(s, &r1, 1000000000ull));
    OK(shmbus_request_respond(r1, "0123456789", 10, 1, UINT64_MAX));
    shmbus_request_free(r1);
    EXPECT(shmbus_client_recv_response(c, buf, 4, &len, &got, &last, 1000000000ull), SHMBUS_BUFFER_TOO_SMALL);
    CHECK(len == 10);
    OK(shmbus_client_recv_response(c, buf, sizeof buf, &len, &got, &last, 0));
    CHECK(len == 10 && got == id && last == 1 && memcmp(buf, "0123456789", 10) == 0);

    /* A response to one request read while another's waits. */
    uint64_t x = 0, y = 0;
    OK(shmbus_client_try_send_request(c, "x", 1, &x));
    OK(shmbus_client_try_send_request(c, "y", 1, &y));
    OK(shmbus_server_recv(s, &r1, 1000000000ull));
    OK(shmbus_server_recv(s, &r2, 1000000000ull));
    /* Each answered with "r" and its own byte, in whichever order the server took them. */
    char ans[2] = {'r', 0};
    OK(shmbus_request_data(r1, &data, &len));
    ans[1] = (char)data[0];
    OK(shmbus_request_respond(r1, ans, 2, 1, UINT64_MAX));
    OK(shmbus_request_data(r2, &data, &len));
    ans[1] = (char)data[0];
    OK(shmbus_request_respond(r2, ans, 2, 1, UINT64_MAX));
    shmbus_request_free(r1);
    shmbus_request_free(r2);
    OK(shmbus_client_recv_response_for(c, y, buf, sizeof buf, &len, &last, 1000000000ull));
    CHECK(len == 2 && memcmp(buf, "ry", 2) == 0 && last == 1);
    EXPECT(shmbus_client_recv_response_for(c, y, buf, sizeof buf, &len, &last, 0), SHMBUS_EMPTY);
    OK(shmbus_client_recv_response(c, buf, sizeof buf, &len, &got, &last, 0));
    CHECK(got == x && len == 2 && memcmp(buf, "rx", 2) == 0);

    /* Cancelled after a server took it: its late response is dropped. */
    OK(shmbus_client_try_send_request(c, "late", 4, &id));
    OK(shmbus_server_recv(s, &r1, 1000000000ull));
    OK(shmbus_client_cancel(c, id));
    EXPECT(shmbus_client_cancel(c, id), SHMBUS_NOT_FOUND);
    EXPECT(shmbus_request_respond(r1, "too late", 8, 0, 0), SHMBUS_DISCONNECTED);
    shmbus_request_free(r1);
    CHECK(shmbus_client_in_flight(c) == 0);

    /* A call with no server taking it times out and gives the request up. */
    EXPECT(shmbus_client_call(c, "call", 4, buf, sizeof buf, &len, 1000000ull), SHMBUS_TIMEOUT);
    EXPECT(shmbus_server_recv(s, &none, 0), SHMBUS_EMPTY);

    shmbus_service_status_info st;
    OK(shmbus_service_status(d, "svc", &st));
    CHECK(st.max_in_flight == 2 && st.servers == 1 && st.clients == 1 && st.pending == 0);
    CHECK(st.requests == 8 && st.failed == 1 && st.timeouts == 2);

    shmbus_server_free(s);
    shmbus_client_free(c);
    shmbus_service_free(svc);

    loans_in_place(d);
    shmbus_domain_free(d);
    printf("service: ok\n");
    return 0;
}
