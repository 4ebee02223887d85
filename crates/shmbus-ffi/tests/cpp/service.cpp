// The service through the C++ API: its schemas (both, read back; one alone refused), refusals, requests answered in place, responses matched
// by id, a stream, a failed request, a call (with a response larger than the first buffer),
// a cancelled request whose late response is dropped, a status snapshot, and the typed
// client and server (values in place, a stream's end, a wrong-size request refused). Then
// zero copy both ways: a camera frame in a request_loan, read in place by the server,
// answered in a response_loan and read in place by the client as a response_ref; the
// endpoints busy while an item is out; loans destroyed unsent and sends too long that send
// nothing; a stream longer than the response depth that flows as the response_refs go.
#include "check.hpp"

#include <chrono>
#include <cstdint>
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
        struct sum {  // no default constructor: a typed value need not have one
            std::int64_t value;
            explicit sum(std::int64_t v) : value(v) {}
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

        // Zero copy both ways, a 1920x1080 RGB frame each way.
        constexpr std::size_t frame = 6220800;
        shmbus::service_config fcfg;
        fcfg.max_clients = 1;
        fcfg.max_servers = 1;
        fcfg.max_in_flight = 2;
        fcfg.max_request_len = frame;
        fcfg.max_response_len = frame;
        fcfg.response_depth = 2;
        shmbus::service frames = shmbus::service::create_or_open(d, "frames", fcfg);
        shmbus::client fc = frames.client();
        shmbus::server fs = frames.server();
        auto aligned = [](const void *p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; };
        auto pixel = [](std::size_t i) { return static_cast<std::uint8_t>(i * 7 + 1); };
        std::uint64_t frame_id = 0;
        {
            shmbus::request_loan loan = fc.loan_request();
            CHECK(loan.size() == frame && loan.bytes().size() == frame && aligned(loan.data()));
            for (std::size_t i = 0; i < frame; i++) loan.data()[i] = pixel(i);
            EXPECT_ERROR(fc.try_send_request(std::string_view("x")), SHMBUS_BUSY, {});
            EXPECT_ERROR(fc.loan_request(), SHMBUS_BUSY, {});
            EXPECT_ERROR(fc.try_recv_response_ref(), SHMBUS_BUSY, {});
            shmbus::request_loan moved = std::move(loan);
            frame_id = moved.send(frame);
            EXPECT_ERROR(moved.send(1), SHMBUS_INVALID_ARGUMENT, {});  // used up
        }
        CHECK(fc.in_flight() == 1);
        {
            shmbus::request req = fs.recv();
            shmbus::bytes_view in = req.data();
            CHECK(req.id() == frame_id && in.size() == frame && aligned(in.data()));
            for (std::size_t i = 0; i < frame; i++) CHECK(in[i] == pixel(i));
            std::optional<shmbus::response_loan> cell = req.loan(0ns);
            CHECK(cell && cell->size() == frame && aligned(cell->data()));
            EXPECT_ERROR(req.respond(std::string_view("x")), SHMBUS_BUSY, {});
            EXPECT_ERROR(req.loan(0ns), SHMBUS_BUSY, {});
            EXPECT_ERROR(req.fail(), SHMBUS_BUSY, {});
            // Too long: refused, the loan used up, nothing sent.
            EXPECT_ERROR(cell->send(frame + 1), SHMBUS_TOO_LARGE, CHECK(e.value() == frame));
            CHECK(!fc.try_recv_response_ref());
            {
                shmbus::response_loan unsent = req.loan();  // destroyed unsent: nothing sent
                std::memset(unsent.data(), 0, 16);
            }
            CHECK(!fc.try_recv_response_ref() && fc.in_flight() == 1);
            shmbus::response_loan out = req.loan();
            for (std::size_t i = 0; i < frame; i++) out.data()[i] = static_cast<std::uint8_t>(~in[i]);
            out.send_last(frame);
            EXPECT_ERROR(req.loan(0ns), SHMBUS_INVALID_ARGUMENT, {});  // finished
        }
        {
            std::optional<shmbus::response_ref> r = fc.recv_response_ref(10s);
            CHECK(r && r->request_id() == frame_id && r->is_last() && r->size() == frame && aligned(r->data()));
            for (std::size_t i = 0; i < frame; i++) CHECK(r->data()[i] == static_cast<std::uint8_t>(~pixel(i)));
            EXPECT_ERROR(fc.try_send_request(std::string_view("x")), SHMBUS_BUSY, {});
            EXPECT_ERROR(fc.loan_request(), SHMBUS_BUSY, {});
            EXPECT_ERROR(fc.recv_response_ref(1ms), SHMBUS_BUSY, {});
        }
        CHECK(fc.in_flight() == 0);
        {
            shmbus::request_loan unsent = fc.loan_request();  // destroyed unsent: nothing sent
            std::memcpy(unsent.data(), "nothing", 7);
        }
        CHECK(fc.in_flight() == 0 && !fs.try_recv());
        EXPECT_ERROR(fc.loan_request().send(frame + 1), SHMBUS_TOO_LARGE, {});
        CHECK(fc.in_flight() == 0 && !fs.try_recv());

        // A stream of 5 with a response depth of 2: the third response waits for a cell,
        // which a response_ref gives back when it goes (not before).
        shmbus::request_loan sl = fc.loan_request();
        std::memcpy(sl.data(), "stream", 6);
        std::uint64_t sid = sl.send(6);
        shmbus::request sreq = fs.recv();
        CHECK(sreq.data().str() == "stream");
        auto send_part = [&](int k) {
            shmbus::response_loan l = sreq.loan();
            std::size_t len = 100 + static_cast<std::size_t>(k);
            std::memset(l.data(), 'a' + k, len);
            if (k == 4)
                l.send_last(len);
            else
                l.send(len);
        };
        send_part(0);
        send_part(1);
        CHECK(!sreq.loan(0ns) && !sreq.loan(1ms));
        for (int k = 0; k < 5; k++) {
            std::optional<shmbus::response_ref> r = fc.recv_response_ref_for(sid, 10s);
            CHECK(r && r->request_id() == sid && r->size() == 100 + static_cast<std::size_t>(k));
            CHECK(r->is_last() == (k == 4));
            for (std::uint8_t b : r->bytes()) CHECK(b == 'a' + k);
            if (k == 0) {
                // Left unread: the next receive returns it again, in the same cell.
                const std::uint8_t *at = r->data();
                r->unread();
                r = fc.try_recv_response_ref();
                CHECK(r && r->data() == at && r->size() == 100);
            }
            if (k + 2 < 5) CHECK(!sreq.loan(0ns));
            r.reset();
            if (k + 2 < 5) send_part(k + 2);
        }
        CHECK(fc.in_flight() == 0);
        EXPECT_ERROR(fc.recv_response_ref_for(sid, 1ms), SHMBUS_EMPTY, {});  // not in flight
    });
}
