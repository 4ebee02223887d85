/* The service through the C API: its request and response schemas (both or neither),
 * requests refused (no server, too large, too many in
 * flight), taken and answered in place, responses matched by id, a stream ended, a failed
 * request, a cancelled one whose late response is dropped, a call, a response kept when the
 * buffer is too small, and a status snapshot. */
#include "check.h"

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
    shmbus_domain_free(d);
    printf("service: ok\n");
    return 0;
}
