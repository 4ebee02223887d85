// The wait set through the C++ API: endpoints of every kind, their indices, wait with and
// without a timeout, poll, and clear.
#include "check.hpp"

#include <algorithm>
#include <chrono>

using namespace std::chrono_literals;

namespace {
bool has(const std::vector<std::size_t> &v, std::size_t i) { return std::find(v.begin(), v.end(), i) != v.end(); }
}  // namespace

int main(int argc, char **argv) {
    return run_test(argc, argv, "waitset", [](const std::string &root) {
        shmbus::domain d("cppwaitset", root);
        shmbus::topic topic = shmbus::topic::create_or_open(d, "t");
        shmbus::publisher pub = topic.publisher();
        shmbus::subscriber sub = topic.subscriber();
        shmbus::queue_config qc;
        qc.capacity = 1;
        shmbus::queue queue = shmbus::queue::create_or_open(d, "q", qc);
        shmbus::producer prod = queue.producer();
        shmbus::consumer cons = queue.consumer();
        shmbus::stream stream = shmbus::stream::create_or_open(d, "s");
        shmbus::stream_writer writer = stream.writer();
        shmbus::stream_reader reader = stream.reader();
        shmbus::pool pool = shmbus::pool::create_or_open(d, "p");
        shmbus::dispatcher disp = pool.dispatcher();
        shmbus::worker worker = pool.worker();
        worker.done();
        shmbus::journal journal = shmbus::journal::create_or_open(root + "/j");
        shmbus::appender app = journal.appender();
        shmbus::tailer tail = journal.tailer();

        {
            shmbus::waitset ws;
            std::size_t is = ws.add(sub), ic = ws.add(cons), ir = ws.add(reader), iw = ws.add(worker),
                        it = ws.add(tail);
            CHECK(is == 0 && ic == 1 && ir == 2 && iw == 3 && it == 4);
            CHECK(ws.poll().empty());
            CHECK(ws.wait(1ms).empty());
            pub.send(std::string_view("m"));
            prod.send(std::string_view("m"));
            writer.send(std::string_view("m"));
            app.send(std::string_view("m"));
            disp.try_send(std::string_view("m"));
            std::vector<std::size_t> ready = ws.wait();
            CHECK(ready.size() == 5 && has(ready, is) && has(ready, ic) && has(ready, ir) && has(ready, iw) &&
                  has(ready, it));
            CHECK(sub.try_recv() && cons.try_recv() && reader.try_recv() && worker.try_recv() && tail.try_recv());
            worker.done();
            CHECK(ws.wait(1ms).empty());

            ws.clear();
            CHECK(ws.add(prod) == 0 && ws.add(writer) == 1 && ws.add(disp) == 2);
            std::vector<std::size_t> room = ws.wait(1s);
            CHECK(room.size() == 3);
            prod.send(std::string_view("fills the queue"));
            disp.try_send(std::string_view("busies the only worker"));
            CHECK(ws.poll() == std::vector<std::size_t>{1});
        }
        shmbus::waitset empty;
        EXPECT_ERROR(empty.wait(), SHMBUS_INVALID_ARGUMENT, {});
    });
}
