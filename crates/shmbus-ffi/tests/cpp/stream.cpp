// The stream through the C++ API: exclusive endpoints, copy and in-place sends and receives,
// records consumed or left for the next read, and the end of the stream (DISCONNECTED).
#include "check.hpp"

#include <chrono>

using namespace std::chrono_literals;

int main(int argc, char **argv) {
    return run_test(argc, argv, "stream", [](const std::string &root) {
        shmbus::domain d("cppstream", root);
        shmbus::stream_config cfg;
        cfg.capacity = 4096;
        shmbus::stream s = shmbus::stream::create_or_open(d, "log", cfg);
        s.prefault();
        CHECK(s.max_record_len() > 0);
        std::optional<shmbus::stream_writer> w = s.writer();
        EXPECT_ERROR(s.writer(), SHMBUS_BUSY, {});
        std::optional<shmbus::stream_reader> r = s.reader();
        CHECK(!r->try_recv() && !r->recv(1ms) && !r->try_recv_ref() && !r->recv_ref(1ms));

        CHECK(w->try_send(std::string_view("first")));
        w->send(std::string_view("second"));
        CHECK(w->send(std::string_view("third"), 1s));
        {
            shmbus::stream_loan l = w->loan(16);
            CHECK(l.size() >= 16);
            EXPECT_ERROR(w->try_send(std::string_view("x")), SHMBUS_BUSY, {});
            std::memcpy(l.data(), "loaned", 6);
            l.send(6);
        }
        { std::optional<shmbus::stream_loan> discarded = w->try_loan(8); CHECK(discarded.has_value()); }
        std::optional<shmbus::stream_loan> l = w->loan(8, 1s);
        CHECK(l.has_value());
        std::memcpy(l->data(), "last", 4);
        l->send(4);

        CHECK(shmbus::bytes_view(*r->try_recv()).str() == "first");
        CHECK(shmbus::bytes_view(r->recv()).str() == "second");
        {
            shmbus::record rec = r->recv_ref();  // released on destruction: read again
            CHECK(rec.bytes().str() == "third");
        }
        shmbus::record rec = *r->try_recv_ref();
        CHECK(rec.bytes().str() == "third");
        EXPECT_ERROR(r->try_recv(), SHMBUS_BUSY, {});  // the record is out
        rec.consume();
        std::optional<shmbus::record> again = r->recv_ref(1s);
        CHECK(again && again->bytes().str() == "loaned");
        again->consume();

        shmbus::stream_status st = shmbus::stream::status(d, "log");
        CHECK(st.capacity == 4096 && st.writer_alive == 1 && st.reader_alive == 1 && st.used > 0);

        w.reset();  // the writer gone: the rest is read, then DISCONNECTED
        CHECK(shmbus::bytes_view(*r->recv(1s)).str() == "last");
        EXPECT_ERROR(r->recv(), SHMBUS_DISCONNECTED, {});
    });
}
