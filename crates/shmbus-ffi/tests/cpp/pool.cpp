// The pool through the C++ API: no worker, all busy (an empty optional), copy and in-place
// receives with ids, done, reap, and a status snapshot.
#include "check.hpp"

#include <chrono>

using namespace std::chrono_literals;

int main(int argc, char **argv) {
    return run_test(argc, argv, "pool", [](const std::string &root) {
        shmbus::domain d("cpppool", root);
        shmbus::pool_config cfg;
        cfg.max_workers = 2;
        cfg.max_job_len = 1024;
        shmbus::pool pool = shmbus::pool::create_or_open(d, "work", cfg);
        pool.prefault();
        shmbus::dispatcher disp = pool.dispatcher();
        EXPECT_ERROR(pool.dispatcher(), SHMBUS_BUSY, {});
        EXPECT_ERROR(disp.try_send(std::string_view("job")), SHMBUS_NO_WORKERS, {});

        shmbus::worker w = pool.worker();
        CHECK(w.dispatcher_alive());
        CHECK(!w.try_recv() && !w.recv(1ms));
        w.done();  // a worker that timed out is idle once it says so

        std::vector<std::uint8_t> big(600, 0xab);  // larger than the first receive buffer
        std::optional<shmbus::dispatched> first = disp.try_send(big);
        CHECK(first && first->worker == 0);
        CHECK(!disp.try_send(std::string_view("second")));  // the only worker is busy
        shmbus::job j = w.recv();
        CHECK(j.data == big && j.id == first->job_id);
        w.done();

        CHECK(disp.try_send(4242, std::string_view("in place")));
        std::optional<shmbus::job_ref> r = w.recv_ref(1s);
        CHECK(r && r->id == 4242 && r->data.str() == "in place");
        w.done();
        std::optional<shmbus::dispatched> third = disp.try_send(std::string_view("third"));
        CHECK(third.has_value());
        std::optional<shmbus::job> t = w.recv(1s);
        CHECK(t && t->id == third->job_id && shmbus::bytes_view(t->data).str() == "third");
        w.done();
        disp.try_send(std::string_view("fourth"));
        CHECK(w.try_recv_ref()->data.str() == "fourth");
        w.done();
        disp.try_send(std::string_view("fifth"));
        CHECK(w.recv_ref().data.str() == "fifth");

        shmbus::pool_status st = shmbus::pool::status(d, "work");
        CHECK(st.max_workers == 2 && st.workers == 1 && st.dispatcher_alive == 1 && st.dispatched == 5);
        CHECK(disp.reap().empty());
    });
}
