/* shmbus C++ API: the wait set (part of shmbus.hpp; include that). */
#ifndef SHMBUS_WAITSET_HPP
#define SHMBUS_WAITSET_HPP

namespace shmbus {

/// Waits on several endpoints at once. add() returns each endpoint's index (from 0); wait()
/// returns the indices of the ready ones, then receive (or send) on them with try_ calls:
/// ready means "may make progress", another process may get there first. The endpoints are
/// not owned: destroy the wait set (or clear() it) before destroying an endpoint in it.
class waitset {
  public:
    /// The most endpoints in one set.
    static constexpr std::size_t max_endpoints = 128;

    waitset() : h_(detail::make<handle>(shmbus_waitset_new)) {}

    /// A subscriber: ready when a message is there to read.
    std::size_t add(const subscriber &e) { return added(shmbus_waitset_add_subscriber(h_.get(), e.get(), &index_)); }
    /// A producer: ready when there is room to send.
    std::size_t add(const producer &e) { return added(shmbus_waitset_add_producer(h_.get(), e.get(), &index_)); }
    /// A consumer: ready when a message is there to read.
    std::size_t add(const consumer &e) { return added(shmbus_waitset_add_consumer(h_.get(), e.get(), &index_)); }
    /// A stream writer: ready when there is room, or the reader is gone.
    std::size_t add(const stream_writer &e) {
        return added(shmbus_waitset_add_stream_writer(h_.get(), e.get(), &index_));
    }
    /// A stream reader: ready when a record is there, or the writer is gone.
    std::size_t add(const stream_reader &e) {
        return added(shmbus_waitset_add_stream_reader(h_.get(), e.get(), &index_));
    }
    /// A dispatcher: ready when a worker is idle.
    std::size_t add(const dispatcher &e) { return added(shmbus_waitset_add_dispatcher(h_.get(), e.get(), &index_)); }
    /// A worker (call done() first): ready when a job is in its mailbox, or its dispatcher is
    /// gone.
    std::size_t add(const worker &e) { return added(shmbus_waitset_add_worker(h_.get(), e.get(), &index_)); }
    /// A tailer or named reader: ready when an entry is there to read.
    std::size_t add(const tailer &e) { return added(shmbus_waitset_add_tailer(h_.get(), e.get(), &index_)); }

    /// Removes every endpoint (the next one added gets index 0).
    void clear() { detail::check(shmbus_waitset_clear(h_.get())); }

    /// Waits until at least one endpoint is ready; returns their indices.
    std::vector<std::size_t> wait() {
        return ready([&](std::size_t *r, std::size_t c, std::size_t *n) { return shmbus_waitset_wait(h_.get(), r, c, n); });
    }
    /// As wait(), or an empty list once `timeout` has passed.
    std::vector<std::size_t> wait(std::chrono::nanoseconds timeout) {
        return ready([&](std::size_t *r, std::size_t c, std::size_t *n) {
            shmbus_status rc = shmbus_waitset_wait_timeout(h_.get(), r, c, n, detail::nanos(timeout));
            if (rc == SHMBUS_TIMEOUT) *n = 0;
            return rc == SHMBUS_TIMEOUT ? SHMBUS_OK : rc;
        });
    }
    /// The endpoints ready now, without sleeping (maybe none).
    std::vector<std::size_t> poll() {
        return ready([&](std::size_t *r, std::size_t c, std::size_t *n) { return shmbus_waitset_poll(h_.get(), r, c, n); });
    }
    shmbus_waitset *get() const noexcept { return h_.get(); }

  private:
    using handle = detail::owned<shmbus_waitset, shmbus_waitset_free>;
    std::size_t added(shmbus_status rc) {
        detail::check(rc);
        return index_;
    }
    template <class F> std::vector<std::size_t> ready(F &&f) {
        std::vector<std::size_t> r(max_endpoints);
        std::size_t n = 0;
        detail::check(f(r.data(), r.size(), &n));
        r.resize(n < r.size() ? n : r.size());
        return r;
    }
    handle h_;
    std::size_t index_ = 0;
};

}  // namespace shmbus

#endif
