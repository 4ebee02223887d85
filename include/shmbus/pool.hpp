/* shmbus C++ API: the pool (part of shmbus.hpp; include that). */
#ifndef SHMBUS_POOL_HPP
#define SHMBUS_POOL_HPP

namespace shmbus {

/// Settings for pool::create_or_open (unset: as the existing pool, or the defaults).
struct pool_config {
    std::optional<std::size_t> max_workers, max_job_len;
    std::optional<std::uint32_t> mode, group;
    /// The schema of the pool's messages (docs/schemas.md): a created pool stores it; an
    /// existing one must carry the same (SHMBUS_SCHEMA_MISMATCH). Unset: any is accepted.
    std::optional<shmbus::schema> schema{};
};

/// A snapshot of a pool (pool::status).
using pool_status = shmbus_pool_status_info;

/// Where dispatcher::try_send put a job.
struct dispatched {
    std::uint64_t job_id = 0;
    std::size_t worker = 0;
};

/// A job received by copy.
struct job {
    std::vector<std::uint8_t> data;
    std::uint64_t id = 0;
};

/// A job read in place: its bytes are valid until the next call on the worker.
/// What `worker::try_recv_into` put into the caller's buffer.
struct job_received {
    std::size_t len = 0;  ///< bytes written at the start of the buffer
    std::uint64_t id = 0;
};

struct job_ref {
    bytes_view data;
    std::uint64_t id = 0;
};

/// The pool's dispatcher (exclusive): hands each job to an idle worker, never waiting.
class dispatcher {
  public:
    /// Hands `data` to an idle worker: nothing when every worker is busy (the job was not
    /// sent). SHMBUS_NO_WORKERS (no worker attached) is thrown.
    std::optional<dispatched> try_send(bytes_view data) {
        dispatched d;
        if (!detail::check_soft(shmbus_dispatcher_try_send(h_.get(), data.data(), data.size(), &d.job_id, &d.worker),
                                SHMBUS_ALL_BUSY))
            return std::nullopt;
        return d;
    }
    /// try_send with the caller's job id.
    std::optional<dispatched> try_send(std::uint64_t job_id, bytes_view data) {
        dispatched d;
        d.job_id = job_id;
        if (!detail::check_soft(
                shmbus_dispatcher_try_send_with_id(h_.get(), job_id, data.data(), data.size(), &d.worker),
                SHMBUS_ALL_BUSY))
            return std::nullopt;
        return d;
    }
    /// Frees the mailboxes of dead workers; returns the ids of the jobs they held (lost).
    std::vector<std::uint64_t> reap() {
        std::vector<std::uint64_t> ids(1024);
        std::size_t n = 0;
        detail::check(shmbus_dispatcher_reap(h_.get(), ids.data(), ids.size(), &n));
        ids.resize(n < ids.size() ? n : ids.size());
        return ids;
    }
    shmbus_dispatcher *get() const noexcept { return h_.get(); }

  private:
    friend class pool;
    using handle = detail::owned<shmbus_dispatcher, shmbus_dispatcher_free>;
    explicit dispatcher(shmbus_dispatcher *h) : h_(h) {}
    handle h_;
};

/// A pool worker: one job at a time; a receive declares the previous one done.
class worker {
  public:
    std::optional<job> try_recv() {
        return recv_with(SHMBUS_EMPTY, [&](void *b, std::size_t c, std::size_t *l, std::uint64_t *id) {
            return shmbus_worker_try_recv(h_.get(), b, c, l, id);
        });
    }
    job recv() {
        return *recv_with(SHMBUS_OK, [&](void *b, std::size_t c, std::size_t *l, std::uint64_t *id) {
            return shmbus_worker_recv(h_.get(), b, c, l, id);
        });
    }
    std::optional<job> recv(std::chrono::nanoseconds timeout) {
        return recv_with(SHMBUS_TIMEOUT, [&](void *b, std::size_t c, std::size_t *l, std::uint64_t *id) {
            return shmbus_worker_recv_timeout(h_.get(), b, c, l, id, detail::nanos(timeout));
        });
    }
    std::optional<job_ref> try_recv_ref() {
        return ref_with(SHMBUS_EMPTY, [&](const std::uint8_t **d, std::size_t *l, std::uint64_t *id) {
            return shmbus_worker_try_recv_ref(h_.get(), d, l, id);
        });
    }
    job_ref recv_ref() {
        return *ref_with(SHMBUS_OK, [&](const std::uint8_t **d, std::size_t *l, std::uint64_t *id) {
            return shmbus_worker_recv_ref(h_.get(), d, l, id);
        });
    }
    std::optional<job_ref> recv_ref(std::chrono::nanoseconds timeout) {
        return ref_with(SHMBUS_TIMEOUT, [&](const std::uint8_t **d, std::size_t *l, std::uint64_t *id) {
            return shmbus_worker_recv_ref_timeout(h_.get(), d, l, id, detail::nanos(timeout));
        });
    }
    /// The next job copied into `buf` (one copy, out of shared memory; allocates nothing),
    /// if there is one now: its length and id. A job longer than `buf` throws SHMBUS_BUFFER_TOO_SMALL
    /// (`value()`: its length) and is kept for the next receive.
    std::optional<job_received> try_recv_into(mutable_bytes_view buf) {
        job_received r;
        if (!detail::check_soft(shmbus_worker_try_recv(h_.get(), buf.data(), buf.size(), &r.len, &r.id), SHMBUS_EMPTY))
            return std::nullopt;
        return r;
    }
    /// `try_recv_into`, waiting as long as it takes.
    job_received recv_into(mutable_bytes_view buf) {
        job_received r;
        detail::check(shmbus_worker_recv(h_.get(), buf.data(), buf.size(), &r.len, &r.id));
        return r;
    }
    /// `try_recv_into`, or nothing once `timeout` has passed.
    std::optional<job_received> recv_into(mutable_bytes_view buf, std::chrono::nanoseconds timeout) {
        job_received r;
        if (!detail::check_soft(
                shmbus_worker_recv_timeout(h_.get(), buf.data(), buf.size(), &r.len, &r.id, detail::nanos(timeout)),
                SHMBUS_TIMEOUT))
            return std::nullopt;
        return r;
    }
    /// Declares the current job finished and the worker idle.
    void done() { detail::check(shmbus_worker_done(h_.get())); }
    bool dispatcher_alive() const noexcept { return shmbus_worker_dispatcher_alive(h_.get()) == 1; }
    shmbus_worker *get() const noexcept { return h_.get(); }

  private:
    friend class pool;
    using handle = detail::owned<shmbus_worker, shmbus_worker_free>;
    explicit worker(shmbus_worker *h) : h_(h) {}
    template <class F> std::optional<job> recv_with(shmbus_status soft, F &&f) {
        job j;
        if (!detail::recv_vec(j.data, hint_, soft,
                              [&](void *b, std::size_t c, std::size_t *l) { return f(b, c, l, &j.id); }))
            return std::nullopt;
        return j;
    }
    template <class F> static std::optional<job_ref> ref_with(shmbus_status soft, F &&f) {
        const std::uint8_t *d = nullptr;
        std::size_t len = 0;
        job_ref j;
        if (!detail::check_soft(f(&d, &len, &j.id), soft)) return std::nullopt;
        j.data = bytes_view(d, len);
        return j;
    }
    handle h_;
    std::size_t hint_ = 256;
};

/// An open pool: a dispatcher and workers in other processes.
class pool {
  public:
    static pool create_or_open(const domain &d, const std::string &name, const pool_config &config = {}) {
        using cfg_handle = detail::owned<shmbus_pool_config, shmbus_pool_config_free>;
        auto cfg = detail::make<cfg_handle>(shmbus_pool_config_new);
        if (config.max_workers) detail::check(shmbus_pool_config_set_max_workers(cfg.get(), *config.max_workers));
        if (config.max_job_len) detail::check(shmbus_pool_config_set_max_job_len(cfg.get(), *config.max_job_len));
        if (config.mode) detail::check(shmbus_pool_config_set_mode(cfg.get(), *config.mode));
        if (config.group) detail::check(shmbus_pool_config_set_group(cfg.get(), *config.group));
        detail::set_schema(cfg.get(), config.schema, shmbus_pool_config_set_schema);
        return pool(detail::make<handle>(
            [&](shmbus_pool **o) { return shmbus_pool_create_or_open(d.get(), name.c_str(), cfg.get(), o); }));
    }
    static pool open(const domain &d, const std::string &name) {
        return pool(detail::make<handle>([&](shmbus_pool **o) { return shmbus_pool_open(d.get(), name.c_str(), o); }));
    }
    static pool_status status(const domain &d, const std::string &name) {
        pool_status s{};
        detail::check(shmbus_pool_status(d.get(), name.c_str(), &s));
        return s;
    }
    shmbus::dispatcher dispatcher() const {
        shmbus_dispatcher *p = nullptr;
        detail::check(shmbus_pool_dispatcher(h_.get(), &p));
        return shmbus::dispatcher(p);
    }
    shmbus::worker worker() const {
        shmbus_worker *w = nullptr;
        detail::check(shmbus_pool_worker(h_.get(), &w));
        return shmbus::worker(w);
    }
    /// Maps every page of the pool into this process now: no page fault at its first touch
    /// of a page (docs/topic.md, "Sizing"). Advice only.
    void prefault() const noexcept { shmbus_pool_prefault(h_.get()); }
    /// The pool's schema, set by its creator (none: it has none).
    std::optional<shmbus::schema> schema() const {
        return detail::schema_of([&](shmbus_schema *o) { return shmbus_pool_schema(h_.get(), o); });
    }
    const shmbus_pool *get() const noexcept { return h_.get(); }

  private:
    using handle = detail::owned<shmbus_pool, shmbus_pool_free>;
    explicit pool(handle h) : h_(std::move(h)) {}
    handle h_;
};

}  // namespace shmbus

#endif
