// The journal through the C++ API: a config, copy and loaned appends, tailers from the start,
// an index and the end, in-place reads, a named reader that resumes where it acked.
#include "check.hpp"

#include <chrono>

using namespace std::chrono_literals;

int main(int argc, char **argv) {
    return run_test(argc, argv, "journal", [](const std::string &root) {
        std::string dir = root + "/journal";
        shmbus::journal_config cfg;
        cfg.cycle_bytes = 1 << 20;
        cfg.max_entry_len = 4096;
        cfg.roll_secs = 0;
        cfg.durability = shmbus::durability::periodic;
        cfg.sync_period = 100ms;
        shmbus::journal j = shmbus::journal::create_or_open(dir, cfg);
        shmbus::appender a = j.appender();
        std::uint64_t i0 = a.send(std::string_view("zero"));
        CHECK(a.send(std::string_view("one")) == i0 + 1);
        {
            shmbus::journal_loan l = a.loan(3);
            CHECK(l.size() == 3);
            EXPECT_ERROR(a.send(std::string_view("x")), SHMBUS_BUSY, {});
            std::memcpy(l.data(), "two", 3);
            CHECK(l.send() == i0 + 2);
        }
        { shmbus::journal_loan discarded = a.loan(5); }  // abandoned: readers skip it
        std::vector<std::uint8_t> big(2000, 0x5a);       // larger than the first receive buffer
        CHECK(a.send(big) == i0 + 4);

        shmbus::tailer t = j.tailer();
        std::optional<shmbus::entry> e = t.try_recv();
        CHECK(e && e->index == i0 && e->bytes().str() == "zero" && e->ts_ns > 0);
        CHECK(t.recv().bytes().str() == "one");
        std::optional<shmbus::entry_ref> r = t.try_recv_ref();
        CHECK(r && r->index == i0 + 2 && r->data.str() == "two");
        CHECK(t.recv(1s)->data == big);
        CHECK(!t.try_recv() && !t.recv(1ms) && !t.try_recv_ref() && !t.recv_ref(1ms));
        CHECK(t.position() == i0 + 5);

        CHECK(j.tailer_at(i0 + 1).recv_ref().data.str() == "one");
        shmbus::tailer end = j.tailer_at_end();
        CHECK(!end.try_recv());
        CHECK(j.tailer_at_time(0).recv(1s)->index == i0);

        {
            shmbus::tailer named = j.reader("audit");
            EXPECT_ERROR(j.reader("audit"), SHMBUS_BUSY, {});
            CHECK(named.recv().index == i0);
            CHECK(named.recv_ref(1s)->index == i0 + 1);
            named.ack();
        }
        shmbus::tailer resumed = shmbus::journal::open(dir).reader("audit");
        CHECK(resumed.recv().bytes().str() == "two");

        shmbus::journal_status st = shmbus::journal::status(dir);
        CHECK(st.next_index == i0 + 5 && st.readers == 1 && st.appenders >= 1);
        EXPECT_ERROR(shmbus::journal::open(root + "/missing"), SHMBUS_NOT_FOUND, {});
    });
}
