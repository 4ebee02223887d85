// The service through the C++ API: its schemas (both, read back; one alone refused), refusals, requests answered in place, responses matched
// by id, a stream, a failed request, a call (with a response larger than the first buffer),
// a cancelled request whose late response is dropped, a status snapshot, and the typed
// client and server (values in place, a stream's end, a wrong-size request refused).
#include "check.hpp"

#include <chrono>
#include <thread>

using namespace std::chrono_literals;

int main(int argc, char **argv) {
    return run_test(argc, argv, "service", [](const std::string &root) {
        shmbus::domain d("cppsvc", root);
        shmbus::service_config cfg;
        cfg.max_in_flight = 2;
        cfg.max_request_len = 1024;
        cfg.max_response_len = 1024;
        cfg.request_schema = shmbus::schema{"json"};
        EXPECT_ERROR(shmbus::service::create_or_open(d, "svc", cfg), SHMBUS_INVALID_CONFIG, {});
        cfg.response_schema = shmbus::schema{"cdr", "example/Sum", "ros2msg", std::string("int64 sum\n")};
        shmbus::service svc = shmbus::service::create_or_open(d, "svc", cfg);
        CHECK(svc.request_schema() == cfg.request_schema && svc.response_schema() == cfg.response_schema);
        shmbus::client c = svc.client();
        EXPECT_ERROR(c.try_send_request(std::string_view("x")), SHMBUS_NO_WORKERS, {});
        shmbus::server s = svc.server();

        std::optional<std::uint64_t> a = c.try_send_request(std::string_view("first"));
        std::optional<std::uint64_t> b = c.try_send_request(std::string_view("second"));
        CHECK(a && b && !c.try_send_request(std::string_view("third")));
        CHECK(c.in_flight() == 2);
        std::optional<shmbus::request> r1 = s.try_recv();
        std::optional<shmbus::request> r2 = s.recv(1s);
        CHECK(r1 && r2 && !s.try_recv() && !s.recv(1ms));
        CHECK(r1->id() == *a && r1->data().str() == "first" && r2->id() == *b);
        r2->respond(std::string_view("part"));
        r2.reset();  // ends the stream: an empty last response
        r1->respond_last(std::string_view("done"));
        r1.reset();
        int part = 0, end = 0, done = 0;
        for (int i = 0; i < 3; i++) {
            shmbus::response r = c.recv_response();
            std::string text(r.data.begin(), r.data.end());
            if (r.request_id == *b && text == "part" && !r.last) part++;
            if (r.request_id == *b && text.empty() && r.last) end++;
            if (r.request_id == *a && text == "done" && r.last) done++;
        }
        CHECK(part == 1 && end == 1 && done == 1 && !c.try_recv_response());

        // A failed request.
        std::optional<std::uint64_t> f = c.try_send_request(std::string_view("fail me"));
        s.recv().fail();
        EXPECT_ERROR(c.recv_response(1s), SHMBUS_FAILED, {});

        // A call answered by a thread, its response larger than the first buffer.
        std::thread t([&] {
            shmbus::request req = s.recv();
            std::vector<std::uint8_t> big(700, 0x5a);
            req.respond_last(big);
        });
        std::optional<std::vector<std::uint8_t>> out = c.call(std::string_view("big"), 10s);
        t.join();
        CHECK(out && out->size() == 700 && (*out)[699] == 0x5a);

        // Cancelled after a server took it: the late response is dropped.
        std::optional<std::uint64_t> late = c.try_send_request(std::string_view("late"));
        shmbus::request held = s.recv();
        CHECK(c.cancel(*late) && !c.cancel(*late));
        EXPECT_ERROR(held.respond(std::string_view("too late")), SHMBUS_DISCONNECTED, {});
        CHECK(!c.call(std::string_view("nobody"), 1ms));

        shmbus::service_status st = shmbus::service::status(d, "svc");
        CHECK(st.max_in_flight == 2 && st.servers == 1 && st.failed == 1 && f.has_value());

        // Typed: a service sized for two trivially copyable types, values in place.
        struct add {
            std::int64_t a, b;
        };
        struct sum {
            std::int64_t value;
        };
        shmbus::service typed_svc =
            shmbus::service::create_or_open(d, "add", shmbus::service_config::for_types<add, sum>());
        shmbus::client_of<add, sum> tc = typed_svc.client_of<add, sum>();
        shmbus::server_of<add, sum> ts = typed_svc.server_of<add, sum>();
        std::thread adder([&] {
            for (int i = 0; i < 3; i++) {
                shmbus::request_of<add, sum> req = ts.recv();
                bool wrong_size = false;
                try {
                    (void)req.value();
                } catch (const shmbus::error &e) {
                    wrong_size = e.code() == SHMBUS_TYPE_MISMATCH;
                }
                if (wrong_size) {
                    req.fail();
                } else if (req->a < 0) {
                    req.respond(sum{req->a});  // a one-response stream; destroyed: its empty end
                } else {
                    req.respond_last(sum{req.value().a + req.value().b});
                }
            }
        });
        std::optional<sum> s42 = tc.call(add{40, 2}, 10s);
        CHECK(s42 && s42->value == 42);
        std::optional<std::uint64_t> stream_id = tc.try_send_request(add{-7, 0});
        shmbus::response_of<sum> first = tc.recv_response(10s).value();
        shmbus::response_of<sum> stream_end = tc.recv_response(10s).value();
        CHECK(stream_id && first.request_id == *stream_id && first.value && first.value->value == -7 && !first.last);
        CHECK(stream_end.request_id == *stream_id && !stream_end.value && stream_end.last);
        // A request of the wrong size, sent untyped: the typed server's value() refuses it.
        std::optional<std::uint64_t> odd = tc.untyped().try_send_request(std::string_view("odd"));
        CHECK(odd.has_value());
        EXPECT_ERROR(tc.recv_response(10s), SHMBUS_FAILED, {});
        adder.join();
        CHECK(tc.in_flight() == 0);
    });
}
