// The queue through the C++ API: try_ sends and receives (false / empty instead of Full /
// Empty), timeouts, a message larger than the first receive buffer, typed endpoints.
#include "check.hpp"

#include <chrono>

using namespace std::chrono_literals;

int main(int argc, char **argv) {
    return run_test(argc, argv, "queue", [](const std::string &root) {
        shmbus::domain d("cppqueue", root);
        shmbus::queue_config cfg;
        cfg.capacity = 2;
        cfg.max_message_len = 1024;
        shmbus::queue q = shmbus::queue::create_or_open(d, "jobs", cfg);
        q.prefault();
        shmbus::producer p = q.producer();
        shmbus::consumer c = q.consumer();
        CHECK(!c.try_recv());
        CHECK(!c.recv(1ms));

        CHECK(p.try_send(std::string_view("one")));
        p.send(std::string_view("two"));
        CHECK(!p.try_send(std::string_view("three")));  // full
        CHECK(!p.send(std::string_view("three"), 1ms));  // still full when the timeout passes
        shmbus::queue_status st = shmbus::queue::status(d, "jobs");
        CHECK(st.depth == 2 && st.capacity == 2 && st.producers == 1 && st.consumers == 1);

        std::optional<std::vector<std::uint8_t>> m = c.try_recv();
        CHECK(m && std::string(m->begin(), m->end()) == "one");
        CHECK(std::string_view(shmbus::bytes_view(c.recv()).str()) == "two");

        // Larger than the first buffer: the receive grows it, nothing is lost.
        std::vector<std::uint8_t> big(1000);
        for (std::size_t i = 0; i < big.size(); i++) big[i] = static_cast<std::uint8_t>(i * 7);
        p.send(big);
        CHECK(*c.recv(1s) == big);
        std::vector<std::uint8_t> too_big(1025);
        EXPECT_ERROR(p.send(too_big), SHMBUS_TOO_LARGE, CHECK(e.value() == 1024));

        shmbus::queue_config small;
        small.max_message_len = 8;
        shmbus::queue tq = shmbus::queue::create_or_open(d, "typed", small);
        shmbus::producer_of<std::uint64_t> tp = tq.producer_of<std::uint64_t>();
        shmbus::consumer_of<std::uint64_t> tc = tq.consumer_of<std::uint64_t>();
        CHECK(tp.try_send(7));
        tp.send(8);
        CHECK(tp.send(9, 1s));
        CHECK(*tc.try_recv() == 7 && tc.recv() == 8 && *tc.recv(1s) == 9);
        tp.untyped().send(std::string_view("abc"));
        EXPECT_ERROR(tc.recv(), SHMBUS_TYPE_MISMATCH, {});

        // Endpoints move; the moved-from one is empty and the handle is freed once.
        shmbus::producer moved = std::move(p);
        CHECK(moved.get() != nullptr && p.get() == nullptr);
        EXPECT_ERROR(p.send(std::string_view("x")), SHMBUS_INVALID_ARGUMENT, {});
    });
}
