// recv_into on every receiver of the C++ API: exact, larger and too-small buffers. Too small
// throws SHMBUS_BUFFER_TOO_SMALL (value(): the length needed) and the message is received
// intact by the next call.
#include "check.hpp"

#include <chrono>

using namespace std::chrono_literals;

namespace {

std::vector<std::uint8_t> message(int m, std::size_t n) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; i++) v[i] = static_cast<std::uint8_t>(m * 31 + i * 7);
    return v;
}

bool holds(const std::vector<std::uint8_t> &buf, const std::vector<std::uint8_t> &m) {
    return buf.size() >= m.size() && std::equal(m.begin(), m.end(), buf.begin());
}

}  // namespace

int main(int argc, char **argv) {
    return run_test(argc, argv, "recv_into", [](const std::string &root) {
        shmbus::domain d("cpprecvinto", root);
        const auto big = message(1, 2000), small = message(2, 100);
        std::vector<std::uint8_t> exact(2000), larger(4096), tiny(10);

        {
            shmbus::topic t = shmbus::topic::create_or_open(d, "t", {2048, 8, {}, {}, {}});
            shmbus::publisher p = t.publisher();
            shmbus::subscriber s = t.subscriber();
            p.send(big);
            p.send(small);
            CHECK(s.try_recv_into(exact)->len == 2000 && holds(exact, big));
            EXPECT_ERROR(s.try_recv_into(tiny), SHMBUS_BUFFER_TOO_SMALL, CHECK(e.value() == 100));
            std::optional<shmbus::received> r = s.recv_into(larger, 1s);
            CHECK(r && r->len == 100 && r->seq == 2 && holds(larger, small));
        }
        {
            shmbus::queue_config cfg;
            cfg.capacity = 4;
            cfg.max_message_len = 2048;
            shmbus::queue q = shmbus::queue::create_or_open(d, "q", cfg);
            shmbus::producer p = q.producer();
            shmbus::consumer c = q.consumer();
            CHECK(!c.try_recv_into(larger) && !c.recv_into(larger, 1ms));
            p.send(big);
            p.send(small);
            CHECK(c.recv_into(exact) == 2000 && holds(exact, big));
            EXPECT_ERROR(c.try_recv_into(tiny), SHMBUS_BUFFER_TOO_SMALL, CHECK(e.value() == 100));
            CHECK(c.recv_into(larger, 1s) == std::optional<std::size_t>(100) && holds(larger, small));
        }
        {
            shmbus::stream_config cfg;
            cfg.capacity = 16384;
            shmbus::stream st = shmbus::stream::create_or_open(d, "s", cfg);
            std::optional<shmbus::stream_writer> w = st.writer();
            std::optional<shmbus::stream_reader> r = st.reader();
            CHECK(!r->try_recv_into(larger));
            w->send(big);
            w->send(small);
            CHECK(r->try_recv_into(exact) == std::optional<std::size_t>(2000) && holds(exact, big));
            EXPECT_ERROR(r->recv_into(tiny), SHMBUS_BUFFER_TOO_SMALL, CHECK(e.value() == 100));
            CHECK(r->recv_into(larger, 1s) == std::optional<std::size_t>(100) && holds(larger, small));
        }
        {
            shmbus::pool_config cfg;
            cfg.max_workers = 1;
            cfg.max_job_len = 2048;
            shmbus::pool pool = shmbus::pool::create_or_open(d, "p", cfg);
            shmbus::dispatcher disp = pool.dispatcher();
            shmbus::worker w = pool.worker();
            CHECK(!w.try_recv_into(larger));  // now idle
            std::optional<shmbus::dispatched> one = disp.try_send(big);
            CHECK(one);
            shmbus::job_received j = w.recv_into(exact);
            CHECK(j.len == 2000 && j.id == one->job_id && holds(exact, big));
            w.done();
            std::optional<shmbus::dispatched> two = disp.try_send(small);
            CHECK(two);
            EXPECT_ERROR(w.try_recv_into(tiny), SHMBUS_BUFFER_TOO_SMALL, CHECK(e.value() == 100));
            std::optional<shmbus::job_received> k = w.recv_into(larger, 1s);
            CHECK(k && k->len == 100 && k->id == two->job_id && holds(larger, small));
        }
        {
            std::string dir = root + "/journal";
            shmbus::journal_config cfg;
            cfg.max_entry_len = 4096;
            shmbus::journal j = shmbus::journal::create_or_open(dir, cfg);
            shmbus::appender a = j.appender();
            std::uint64_t i0 = a.send(big);
            a.send(small);
            shmbus::tailer t = j.tailer();
            std::optional<shmbus::entry_received> e0 = t.try_recv_into(exact);
            CHECK(e0 && e0->len == 2000 && e0->index == i0 && holds(exact, big));
            EXPECT_ERROR(t.recv_into(tiny), SHMBUS_BUFFER_TOO_SMALL, CHECK(e.value() == 100));
            CHECK(t.position() == i0 + 1);
            std::optional<shmbus::entry_received> e1 = t.recv_into(larger, 1s);
            CHECK(e1 && e1->len == 100 && e1->index == i0 + 1 && e1->ts_ns > 0 && holds(larger, small));
        }
    });
}
