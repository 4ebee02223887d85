/* shmbus C++ API: the queue (part of shmbus.hpp; include that). */
#ifndef SHMBUS_QUEUE_HPP
#define SHMBUS_QUEUE_HPP

namespace shmbus {

/// Settings for queue::create_or_open (unset: as the existing queue, or the defaults).
struct queue_config {
    std::optional<std::uint64_t> capacity;
    std::optional<std::size_t> max_message_len;
    std::optional<std::uint32_t> mode, group;
    /// The schema of the queue's messages (docs/schemas.md): a created queue stores it; an
    /// existing one must carry the same (SHMBUS_SCHEMA_MISMATCH). Unset: any is accepted.
    std::optional<shmbus::schema> schema{};
};

/// A snapshot of a queue (queue::status).
using queue_status = shmbus_queue_status_info;

/// A queue's producer. Sends copy; a full queue makes send wait.
class producer {
  public:
    /// Sends now if there is room: false if the queue is full.
    bool try_send(bytes_view data) {
        return detail::check_soft(shmbus_producer_try_send(h_.get(), data.data(), data.size()), SHMBUS_FULL);
    }
    /// Sends, waiting as long as it takes for room.
    void send(bytes_view data) { detail::check(shmbus_producer_send(h_.get(), data.data(), data.size())); }
    /// Sends, or returns false once `timeout` has passed without room.
    bool send(bytes_view data, std::chrono::nanoseconds timeout) {
        return detail::check_soft(
            shmbus_producer_send_timeout(h_.get(), data.data(), data.size(), detail::nanos(timeout)), SHMBUS_TIMEOUT);
    }
    shmbus_producer *get() const noexcept { return h_.get(); }

  private:
    friend class queue;
    using handle = detail::owned<shmbus_producer, shmbus_producer_free>;
    explicit producer(shmbus_producer *h) : h_(h) {}
    handle h_;
};

/// A queue's consumer: each message goes to one consumer.
class consumer {
  public:
    /// The next message if there is one now.
    std::optional<std::vector<std::uint8_t>> try_recv() {
        return recv_with(SHMBUS_EMPTY, [&](void *b, std::size_t c, std::size_t *l) {
            return shmbus_consumer_try_recv(h_.get(), b, c, l);
        });
    }
    /// The next message, waiting as long as it takes.
    std::vector<std::uint8_t> recv() {
        return *recv_with(SHMBUS_OK, [&](void *b, std::size_t c, std::size_t *l) {
            return shmbus_consumer_recv(h_.get(), b, c, l);
        });
    }
    /// The next message, or nothing once `timeout` has passed.
    std::optional<std::vector<std::uint8_t>> recv(std::chrono::nanoseconds timeout) {
        return recv_with(SHMBUS_TIMEOUT, [&](void *b, std::size_t c, std::size_t *l) {
            return shmbus_consumer_recv_timeout(h_.get(), b, c, l, detail::nanos(timeout));
        });
    }
    /// The next message copied into `buf` (one copy, out of shared memory; allocates nothing),
    /// if there is one now: its length. A message longer than `buf` throws SHMBUS_BUFFER_TOO_SMALL
    /// (`value()`: its length) and is kept for the next receive.
    std::optional<std::size_t> try_recv_into(mutable_bytes_view buf) {
        std::size_t len = 0;
        if (!detail::check_soft(shmbus_consumer_try_recv(h_.get(), buf.data(), buf.size(), &len), SHMBUS_EMPTY))
            return std::nullopt;
        return len;
    }
    /// `try_recv_into`, waiting as long as it takes.
    std::size_t recv_into(mutable_bytes_view buf) {
        std::size_t len = 0;
        detail::check(shmbus_consumer_recv(h_.get(), buf.data(), buf.size(), &len));
        return len;
    }
    /// `try_recv_into`, or nothing once `timeout` has passed.
    std::optional<std::size_t> recv_into(mutable_bytes_view buf, std::chrono::nanoseconds timeout) {
        std::size_t len = 0;
        if (!detail::check_soft(
                shmbus_consumer_recv_timeout(h_.get(), buf.data(), buf.size(), &len, detail::nanos(timeout)),
                SHMBUS_TIMEOUT))
            return std::nullopt;
        return len;
    }
    shmbus_consumer *get() const noexcept { return h_.get(); }

  private:
    friend class queue;
    using handle = detail::owned<shmbus_consumer, shmbus_consumer_free>;
    explicit consumer(shmbus_consumer *h) : h_(h) {}
    template <class F> std::optional<std::vector<std::uint8_t>> recv_with(shmbus_status soft, F &&f) {
        std::vector<std::uint8_t> v;
        if (!detail::recv_vec(v, hint_, soft, f)) return std::nullopt;
        return v;
    }
    handle h_;
    std::size_t hint_ = 256;
};

/// A typed producer: sends the bytes of a trivially copyable T.
template <class T> class producer_of {
    static_assert(std::is_trivially_copyable_v<T>, "shmbus typed messages need a trivially copyable T");

  public:
    explicit producer_of(producer p) : p_(std::move(p)) {}
    bool try_send(const T &v) { return p_.try_send(detail::bytes_of(v)); }
    void send(const T &v) { p_.send(detail::bytes_of(v)); }
    bool send(const T &v, std::chrono::nanoseconds timeout) { return p_.send(detail::bytes_of(v), timeout); }
    producer &untyped() noexcept { return p_; }

  private:
    producer p_;
};

/// A typed consumer: copies of T (a message of another size is SHMBUS_TYPE_MISMATCH).
template <class T> class consumer_of {
    static_assert(std::is_trivially_copyable_v<T>, "shmbus typed messages need a trivially copyable T");

  public:
    explicit consumer_of(consumer c) : c_(std::move(c)) {}
    std::optional<T> try_recv() { return value(c_.try_recv()); }
    T recv() { return detail::copy_of<T>(c_.recv()); }
    std::optional<T> recv(std::chrono::nanoseconds timeout) { return value(c_.recv(timeout)); }
    consumer &untyped() noexcept { return c_; }

  private:
    static std::optional<T> value(const std::optional<std::vector<std::uint8_t>> &m) {
        if (!m) return std::nullopt;
        return detail::copy_of<T>(*m);
    }
    consumer c_;
};

/// An open queue. Endpoints made from it do not borrow it.
class queue {
  public:
    static queue create_or_open(const domain &d, const std::string &name, const queue_config &config = {}) {
        using cfg_handle = detail::owned<shmbus_queue_config, shmbus_queue_config_free>;
        auto cfg = detail::make<cfg_handle>(shmbus_queue_config_new);
        if (config.capacity) detail::check(shmbus_queue_config_set_capacity(cfg.get(), *config.capacity));
        if (config.max_message_len)
            detail::check(shmbus_queue_config_set_max_message_len(cfg.get(), *config.max_message_len));
        if (config.mode) detail::check(shmbus_queue_config_set_mode(cfg.get(), *config.mode));
        if (config.group) detail::check(shmbus_queue_config_set_group(cfg.get(), *config.group));
        detail::set_schema(cfg.get(), config.schema, shmbus_queue_config_set_schema);
        return queue(detail::make<handle>(
            [&](shmbus_queue **o) { return shmbus_queue_create_or_open(d.get(), name.c_str(), cfg.get(), o); }));
    }
    static queue open(const domain &d, const std::string &name) {
        return queue(
            detail::make<handle>([&](shmbus_queue **o) { return shmbus_queue_open(d.get(), name.c_str(), o); }));
    }
    static queue_status status(const domain &d, const std::string &name) {
        queue_status s{};
        detail::check(shmbus_queue_status(d.get(), name.c_str(), &s));
        return s;
    }
    shmbus::producer producer() const {
        shmbus_producer *p = nullptr;
        detail::check(shmbus_queue_producer(h_.get(), &p));
        return shmbus::producer(p);
    }
    shmbus::consumer consumer() const {
        shmbus_consumer *c = nullptr;
        detail::check(shmbus_queue_consumer(h_.get(), &c));
        return shmbus::consumer(c);
    }
    template <class T> shmbus::producer_of<T> producer_of() const { return shmbus::producer_of<T>(producer()); }
    template <class T> shmbus::consumer_of<T> consumer_of() const { return shmbus::consumer_of<T>(consumer()); }
    /// Maps every page of the queue into this process now: no page fault at its first touch
    /// of a page (docs/topic.md, "Sizing"). Advice only.
    void prefault() const noexcept { shmbus_queue_prefault(h_.get()); }
    /// The queue's schema, set by its creator (none: it has none).
    std::optional<shmbus::schema> schema() const {
        return detail::schema_of([&](shmbus_schema *o) { return shmbus_queue_schema(h_.get(), o); });
    }
    const shmbus_queue *get() const noexcept { return h_.get(); }

  private:
    using handle = detail::owned<shmbus_queue, shmbus_queue_free>;
    explicit queue(handle h) : h_(std::move(h)) {}
    handle h_;
};

}  // namespace shmbus

#endif
