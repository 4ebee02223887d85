// The topic through the C++ API in one process: copies and zero-copy, loans, lagging, the
// typed endpoints' size and alignment checks, and errors as exceptions.
#include "check.hpp"

#include <chrono>
#include <string_view>
#include <thread>

using namespace std::chrono_literals;

namespace {

struct imu {
    double accel[3];
    std::uint64_t stamp;
};

void into_a_buffer(const shmbus::domain &d) {
    // Into the caller's buffer: nothing allocated; too small is an error, the message kept.
    shmbus::topic t = shmbus::topic::create_or_open(d, "into", {32, 4, {}, {}, {}});
    shmbus::publisher p = t.publisher();
    shmbus::subscriber s = t.subscriber();
    std::vector<std::uint8_t> small(4), room(32);
    CHECK(!s.try_recv_into(room));
    p.send(std::string_view("into a buffer"));
    EXPECT_ERROR(s.try_recv_into(small), SHMBUS_BUFFER_TOO_SMALL, CHECK(e.value() == 13));
    std::optional<shmbus::received> r = s.recv_into(room, 1s);
    CHECK(r && r->len == 13 && r->seq == 1 && r->ts_ns > 0);
    CHECK(shmbus::bytes_view(room.data(), r->len).str() == "into a buffer");
    CHECK(!s.recv_into(room, 1ms));
}

void copies(const shmbus::domain &d) {
    shmbus::topic t = shmbus::topic::create_or_open(d, "copy", {32, 4, {}, {}, {}});
    t.prefault();
    CHECK(t.max_message_len() == 32);
    shmbus::publisher p = t.publisher();
    shmbus::subscriber s = t.subscriber();
    CHECK(!s.try_recv());
    CHECK(!s.recv(1ms));
    CHECK(p.send(std::string_view("hello, world")) == 1);
    std::optional<shmbus::message> m = s.try_recv();
    CHECK(m && m->seq == 1 && m->ts_ns > 0 && m->bytes().str() == "hello, world");


    // Too large: the error carries the code, the largest size and the library's message.
    std::vector<std::uint8_t> big(33);
    EXPECT_ERROR(p.send(big), SHMBUS_TOO_LARGE, {
        CHECK(e.value() == 32);
        CHECK(std::strlen(e.what()) > 0);
        CHECK(std::string(e.name()) == "SHMBUS_TOO_LARGE");
    });

    // Falling behind is an error once, then reading goes on.
    for (int i = 0; i < 10; i++) p.send(shmbus::bytes_view(&i, sizeof i));
    EXPECT_ERROR(s.try_recv(), SHMBUS_LAGGED, CHECK(e.value() > 0));
    m = s.recv();
    CHECK(m->seq > 2 && m->data.size() == sizeof(int));
    s.seek_latest();
    CHECK(s.recv(1s)->seq == 11);
    s.seek(10);
    CHECK(s.next_seq() == 10);

    shmbus::topic_status st = shmbus::topic::status(d, "copy");
    CHECK(st.last_seq == 11 && st.publishers == 1 && st.subscribers == 1 && st.history == 4);
    EXPECT_ERROR(shmbus::topic::open(d, "missing"), SHMBUS_NOT_FOUND, {});
    EXPECT_ERROR(shmbus::topic::create_or_open(d, "copy", {64, {}, {}, {}, {}}), SHMBUS_LAYOUT_MISMATCH, {});
}

void zero_copy(const shmbus::domain &d) {
    shmbus::topic t = shmbus::topic::create_or_open(d, "zc", {64, 8, {}, {}, {}});
    shmbus::publisher p = t.publisher();
    shmbus::subscriber s = t.subscriber();
    {
        shmbus::loan l = p.loan();
        CHECK(l.size() == 64);
        EXPECT_ERROR(p.send(std::string_view("x")), SHMBUS_BUSY, {});  // the loan is out
        std::memcpy(l.data(), "in place", 8);
        CHECK(l.send(8) == 1);
        EXPECT_ERROR(l.send(8), SHMBUS_INVALID_ARGUMENT, {});  // used up
    }
    {
        shmbus::loan l = p.loan();  // destroyed unsent: discarded
        l.bytes()[0] = 'x';
    }
    p.send(std::string_view("second"));
    std::optional<shmbus::sample> a = s.try_recv_ref();
    CHECK(a && a->seq() == 1 && a->bytes().str() == "in place");
    shmbus::sample b = s.recv_ref();
    CHECK(b.seq() == 2 && std::string_view(reinterpret_cast<const char *>(b.data()), b.size()) == "second");
    CHECK(shmbus::topic::status(d, "zc").pinned_slots == 2);
    p.send(std::string_view("third"));
    EXPECT_ERROR(s.try_recv_ref(), SHMBUS_PINNED, {});  // the pin budget (2) is spent
    a->release();
    shmbus::sample c = *s.recv_ref(1s);
    CHECK(c.bytes().str() == "third");
    shmbus::sample moved = std::move(c);  // ownership moves; the sample is released once
    CHECK(moved.seq() == 3);
    CHECK(!s.recv_ref(1ms));
}

void typed(const shmbus::domain &d) {
    shmbus::topic t = shmbus::topic::create_or_open(d, "imu", {sizeof(imu), 4, {}, {}, {}});
    shmbus::publisher_of<imu> p = t.publisher_of<imu>();
    shmbus::subscriber_of<imu> s = t.subscriber_of<imu>();
    CHECK(!s.try_recv());
    imu v{{1.0, 2.0, 9.81}, 42};
    p.send(v);
    v.stamp = 43;
    p.send(v);
    imu got = s.recv();
    CHECK(got.stamp == 42 && got.accel[2] == 9.81);
    shmbus::sample_of<imu> ref = s.recv_ref();  // a const imu& in shared memory
    CHECK(ref->stamp == 43 && (*ref).accel[0] == 1.0 && ref.seq() == 2);
    CHECK(reinterpret_cast<std::uintptr_t>(&ref.get()) % alignof(imu) == 0);

    // A message of another size is a clear error, by copy and in place.
    p.untyped().send(std::string_view("short"));
    EXPECT_ERROR(s.recv(1s), SHMBUS_TYPE_MISMATCH, CHECK(std::string(e.what()).find("5 bytes") != std::string::npos));
    p.untyped().send(std::string_view("short"));
    EXPECT_ERROR(s.recv_ref(), SHMBUS_TYPE_MISMATCH, {});
}

void reliable(const shmbus::domain &d) {
    // A block topic: every message in order through a history of 4, the publisher in a
    // thread waiting for the reliable subscriber.
    shmbus::topic_config cfg;
    cfg.max_message_len = 8;
    cfg.history = 4;
    cfg.policy = SHMBUS_POLICY_BLOCK;
    cfg.reliable_timeout = std::chrono::milliseconds(60000);
    shmbus::topic t = shmbus::topic::create_or_open(d, "reliable", cfg);
    CHECK(t.policy() == SHMBUS_POLICY_BLOCK);
    shmbus::publisher_of<std::uint32_t> p = t.publisher_of<std::uint32_t>();
    shmbus::subscriber_of<std::uint32_t> s = t.reliable_subscriber_of<std::uint32_t>();
    CHECK(shmbus::topic::status(d, "reliable").reliable_subscribers == 1);
    std::thread writer([&] {
        for (std::uint32_t i = 0; i < 500; i++) p.send(i);
    });
    for (std::uint32_t i = 0; i < 500; i++) {
        std::optional<std::uint32_t> v = s.recv(30s);
        CHECK(v && *v == i);
    }
    writer.join();
    // Standing still: try_send finds no room, a send with a timeout times out.
    std::uint32_t x = 1;
    int room = 0;
    while (p.try_send(x)) room++;
    CHECK(room >= 4);
    CHECK(!p.send(x, 10ms));
    CHECK(s.try_recv() == std::optional<std::uint32_t>(x));
    CHECK(p.untyped().try_send(shmbus::detail::bytes_of(x)).has_value());

    // A fail topic throws SHMBUS_FULL (value(): the oldest message still needed).
    cfg.policy = SHMBUS_POLICY_FAIL;
    shmbus::topic f = shmbus::topic::create_or_open(d, "failing", cfg);
    shmbus::publisher fp = f.publisher();
    shmbus::subscriber fs = f.reliable_subscriber();
    EXPECT_ERROR(for (int i = 0; i < 100; i++) fp.send(shmbus::detail::bytes_of(x)), SHMBUS_FULL,
                 CHECK(e.value() == 1));
    EXPECT_ERROR(shmbus::topic::create_or_open(d, "lossy").reliable_subscriber(), SHMBUS_INVALID_CONFIG, {});
}

}  // namespace

int main(int argc, char **argv) {
    return run_test(argc, argv, "topic", [](const std::string &root) {
        shmbus::domain d("cpptopic", root);
        CHECK(std::strlen(shmbus::version()) > 0);
        copies(d);
        into_a_buffer(d);
        zero_copy(d);
        typed(d);
        reliable(d);
        EXPECT_ERROR(shmbus::domain("bad/name", root), SHMBUS_INVALID_NAME, {});
    });
}
