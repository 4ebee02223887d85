/* shmbus C++ API: the topic (part of shmbus.hpp; include that). */
#ifndef SHMBUS_TOPIC_HPP
#define SHMBUS_TOPIC_HPP

namespace shmbus {

/// Settings for topic::create_or_open; an unset value accepts what an existing topic has and
/// takes the default when the topic is created.
struct topic_config {
    std::optional<std::size_t> max_message_len, history, spare_slots;
    std::optional<std::uint32_t> mode, group;
    // The members below have initializers, so that the positional `{len, history, spare,
    // mode, group}` form stays warning-free under -Wmissing-field-initializers.
    /// The delivery policy: SHMBUS_POLICY_OVERWRITE (the default), SHMBUS_POLICY_BLOCK or
    /// SHMBUS_POLICY_FAIL (see publisher and topic::reliable_subscriber).
    std::optional<std::uint32_t> policy{};
    /// How long a live reliable subscriber may hold publishers back without reading before it
    /// is evicted.
    std::optional<std::chrono::milliseconds> reliable_timeout{};
    /// The schema of the topic's messages (docs/schemas.md): a created topic stores it; an
    /// existing one must carry the same (SHMBUS_SCHEMA_MISMATCH). Unset: any is accepted.
    std::optional<shmbus::schema> schema{};
};

/// A snapshot of a topic (topic::status).
using topic_status = shmbus_topic_status_info;

/// A message received by copy.
struct message {
    std::vector<std::uint8_t> data;
    std::uint64_t seq = 0;
    std::uint64_t ts_ns = 0;  ///< publish time, CLOCK_MONOTONIC nanoseconds
    bytes_view bytes() const noexcept { return data; }
};

/// What `subscriber::try_recv_into` put into the caller's buffer.
struct received {
    std::size_t len = 0;      ///< bytes written at the start of the buffer
    std::uint64_t seq = 0;
    std::uint64_t ts_ns = 0;  ///< publish time, CLOCK_MONOTONIC nanoseconds
};

/// A slot loaned from a publisher, written in place: fill data() (up to size() bytes), then
/// send(len). Destroyed unsent, it is discarded. The publisher is busy while it is out.
class loan : public detail::loan_room<shmbus_loan, shmbus_loan_discard> {
  public:
    /// Publishes the first `len` bytes; returns the sequence number. The loan is used up.
    std::uint64_t send(std::size_t len) {
        std::uint64_t seq = 0;
        detail::check(shmbus_loan_send(take(), len, &seq));
        return seq;
    }

  private:
    friend class publisher;
    explicit loan(shmbus_loan *h) : loan_room(h, shmbus_loan_data) {}
};

/// A message read in place, pinned in shared memory until the sample is destroyed (or
/// release()d). Several may be out at once (the subscriber's pin budget, 2 by default).
class sample {
  public:
    const std::uint8_t *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return len_; }
    bytes_view bytes() const noexcept { return {data_, len_}; }
    std::uint64_t seq() const noexcept { return shmbus_sample_seq(h_.get()); }
    std::uint64_t ts_ns() const noexcept { return shmbus_sample_ts_ns(h_.get()); }
    /// Unpins it now; the data is invalid afterwards.
    void release() noexcept {
        h_.reset();
        data_ = nullptr;
        len_ = 0;
    }

  private:
    friend class subscriber;
    using handle = detail::owned<shmbus_sample, shmbus_sample_release>;
    explicit sample(shmbus_sample *h) : h_(h) { detail::check(shmbus_sample_data(h, &data_, &len_)); }
    handle h_;
    const std::uint8_t *data_ = nullptr;
    std::size_t len_ = 0;
};

/// A topic's publisher. On an overwrite topic it never waits (the oldest message beyond the
/// history is overwritten); on a block or fail topic it does not overwrite what a reliable
/// subscriber has not read (send waits on a block topic and throws SHMBUS_FULL on a fail one).
class publisher {
  public:
    /// Publishes a copy of `data`; returns its sequence number.
    std::uint64_t send(bytes_view data) {
        std::uint64_t seq = 0;
        detail::check(shmbus_publisher_send(h_.get(), data.data(), data.size(), &seq));
        return seq;
    }
    /// Publishes without waiting: nothing where send would wait for a reliable subscriber.
    std::optional<std::uint64_t> try_send(bytes_view data) {
        std::uint64_t seq = 0;
        if (!detail::check_soft(shmbus_publisher_try_send(h_.get(), data.data(), data.size(), &seq), SHMBUS_FULL))
            return std::nullopt;
        return seq;
    }
    /// Publishes, or returns nothing once `timeout` has passed waiting for reliable subscribers.
    std::optional<std::uint64_t> send(bytes_view data, std::chrono::nanoseconds timeout) {
        std::uint64_t seq = 0;
        if (!detail::check_soft(
                shmbus_publisher_send_timeout(h_.get(), data.data(), data.size(), &seq, detail::nanos(timeout)),
                SHMBUS_TIMEOUT))
            return std::nullopt;
        return seq;
    }
    /// Loans a slot to write the next message in place (zero-copy).
    shmbus::loan loan() {
        shmbus_loan *l = nullptr;
        detail::check(shmbus_publisher_loan(h_.get(), &l));
        return shmbus::loan(l);
    }
    shmbus_publisher *get() const noexcept { return h_.get(); }

  private:
    friend class topic;
    using handle = detail::owned<shmbus_publisher, shmbus_publisher_free>;
    explicit publisher(shmbus_publisher *h) : h_(h) {}
    handle h_;
};

/// A topic's subscriber: every message in order from where it joined. A receive that finds
/// it fell behind throws SHMBUS_LAGGED (value(): messages skipped); the next one goes on. A
/// reliable subscriber that was evicted throws SHMBUS_EVICTED once and reads on, lossy.
class subscriber {
  public:
    /// The next message if there is one now.
    std::optional<message> try_recv() {
        return recv_with(SHMBUS_EMPTY, [&](void *b, std::size_t c, std::size_t *l, std::uint64_t *s, std::uint64_t *t) {
            return shmbus_subscriber_try_recv(h_.get(), b, c, l, s, t);
        });
    }
    /// The next message, waiting as long as it takes.
    message recv() {
        return *recv_with(SHMBUS_OK, [&](void *b, std::size_t c, std::size_t *l, std::uint64_t *s, std::uint64_t *t) {
            return shmbus_subscriber_recv(h_.get(), b, c, l, s, t);
        });
    }
    /// The next message, or nothing once `timeout` has passed.
    std::optional<message> recv(std::chrono::nanoseconds timeout) {
        return recv_with(SHMBUS_TIMEOUT, [&](void *b, std::size_t c, std::size_t *l, std::uint64_t *s, std::uint64_t *t) {
            return shmbus_subscriber_recv_timeout(h_.get(), b, c, l, s, t, detail::nanos(timeout));
        });
    }
    /// The next message copied into `buf`, if there is one now: its length, sequence number
    /// and timestamp. Allocates nothing (the receive for a polling loop). A message longer
    /// than `buf` throws SHMBUS_BUFFER_TOO_SMALL (`value()`: its length) and stays unread.
    std::optional<received> try_recv_into(mutable_bytes_view buf) {
        return into_with(SHMBUS_EMPTY, [&](std::size_t *l, std::uint64_t *s, std::uint64_t *t) {
            return shmbus_subscriber_try_recv(h_.get(), buf.data(), buf.size(), l, s, t);
        });
    }
    /// `try_recv_into`, waiting as long as it takes.
    received recv_into(mutable_bytes_view buf) {
        return *into_with(SHMBUS_OK, [&](std::size_t *l, std::uint64_t *s, std::uint64_t *t) {
            return shmbus_subscriber_recv(h_.get(), buf.data(), buf.size(), l, s, t);
        });
    }
    /// `try_recv_into`, or nothing once `timeout` has passed.
    std::optional<received> recv_into(mutable_bytes_view buf, std::chrono::nanoseconds timeout) {
        return into_with(SHMBUS_TIMEOUT, [&](std::size_t *l, std::uint64_t *s, std::uint64_t *t) {
            return shmbus_subscriber_recv_timeout(h_.get(), buf.data(), buf.size(), l, s, t, detail::nanos(timeout));
        });
    }
    /// The next message in place, if there is one now.
    std::optional<sample> try_recv_ref() { return ref_with(SHMBUS_EMPTY, shmbus_subscriber_try_recv_ref); }
    /// The next message in place, waiting as long as it takes.
    sample recv_ref() { return *ref_with(SHMBUS_OK, shmbus_subscriber_recv_ref); }
    /// The next message in place, or nothing once `timeout` has passed.
    std::optional<sample> recv_ref(std::chrono::nanoseconds timeout) {
        shmbus_sample *s = nullptr;
        if (!detail::check_soft(shmbus_subscriber_recv_ref_timeout(h_.get(), &s, detail::nanos(timeout)), SHMBUS_TIMEOUT))
            return std::nullopt;
        return sample(s);
    }
    /// How many messages it is behind the newest.
    std::uint64_t lag() const noexcept { return shmbus_subscriber_lag(h_.get()); }
    /// The sequence number the next receive asks for.
    std::uint64_t next_seq() const noexcept { return shmbus_subscriber_next_seq(h_.get()); }
    void seek(std::uint64_t seq) { detail::check(shmbus_subscriber_seek(h_.get(), seq)); }
    void seek_oldest() { detail::check(shmbus_subscriber_seek_oldest(h_.get())); }
    void seek_latest() { detail::check(shmbus_subscriber_seek_latest(h_.get())); }
    /// How many samples may be pinned at once.
    void set_pin_budget(std::size_t n) { detail::check(shmbus_subscriber_set_pin_budget(h_.get(), n)); }
    shmbus_subscriber *get() const noexcept { return h_.get(); }

  private:
    friend class topic;
    using handle = detail::owned<shmbus_subscriber, shmbus_subscriber_free>;
    explicit subscriber(shmbus_subscriber *h) : h_(h) {}
    template <class F> std::optional<message> recv_with(shmbus_status soft, F &&f) {
        message m;
        if (!detail::recv_vec(m.data, hint_, soft, [&](void *b, std::size_t c, std::size_t *l) {
                return f(b, c, l, &m.seq, &m.ts_ns);
            }))
            return std::nullopt;
        return m;
    }
    template <class F> static std::optional<received> into_with(shmbus_status soft, F &&f) {
        received r;
        if (!detail::check_soft(f(&r.len, &r.seq, &r.ts_ns), soft)) return std::nullopt;
        return r;
    }
    std::optional<sample> ref_with(shmbus_status soft, shmbus_status (*f)(shmbus_subscriber *, shmbus_sample **)) {
        shmbus_sample *s = nullptr;
        if (!detail::check_soft(f(h_.get(), &s), soft)) return std::nullopt;
        return sample(s);
    }
    handle h_;
    std::size_t hint_ = 256;
};

/// A zero-copy typed sample: the T in shared memory, pinned while this lives.
template <class T> class sample_of {
  public:
    const T &operator*() const noexcept { return *value_; }
    const T *operator->() const noexcept { return value_; }
    const T &get() const noexcept { return *value_; }
    std::uint64_t seq() const noexcept { return sample_.seq(); }
    std::uint64_t ts_ns() const noexcept { return sample_.ts_ns(); }
    /// Checks the size and alignment (SHMBUS_TYPE_MISMATCH when they do not fit T).
    explicit sample_of(sample s) : sample_(std::move(s)), value_(&detail::as<T>(sample_.bytes())) {}

  private:
    sample sample_;
    const T *value_;
};

/// A typed publisher: sends the bytes of a trivially copyable T.
template <class T> class publisher_of {
    static_assert(std::is_trivially_copyable_v<T>, "shmbus typed messages need a trivially copyable T");

  public:
    explicit publisher_of(publisher p) : p_(std::move(p)) {}
    std::uint64_t send(const T &v) { return p_.send(detail::bytes_of(v)); }
    std::optional<std::uint64_t> try_send(const T &v) { return p_.try_send(detail::bytes_of(v)); }
    std::optional<std::uint64_t> send(const T &v, std::chrono::nanoseconds timeout) {
        return p_.send(detail::bytes_of(v), timeout);
    }
    publisher &untyped() noexcept { return p_; }

  private:
    publisher p_;
};

/// A typed subscriber: copies of T, or `const T&` in place (sample_of). A message of another
/// size (or, in place, misaligned) is SHMBUS_TYPE_MISMATCH.
template <class T> class subscriber_of {
    static_assert(std::is_trivially_copyable_v<T>, "shmbus typed messages need a trivially copyable T");

  public:
    explicit subscriber_of(subscriber s) : s_(std::move(s)) {}
    std::optional<T> try_recv() { return value(s_.try_recv()); }
    T recv() { return detail::copy_of<T>(s_.recv().bytes()); }
    std::optional<T> recv(std::chrono::nanoseconds timeout) { return value(s_.recv(timeout)); }
    std::optional<sample_of<T>> try_recv_ref() { return ref(s_.try_recv_ref()); }
    sample_of<T> recv_ref() { return sample_of<T>(s_.recv_ref()); }
    std::optional<sample_of<T>> recv_ref(std::chrono::nanoseconds timeout) { return ref(s_.recv_ref(timeout)); }
    subscriber &untyped() noexcept { return s_; }

  private:
    static std::optional<T> value(std::optional<message> m) {
        if (!m) return std::nullopt;
        return detail::copy_of<T>(m->bytes());
    }
    static std::optional<sample_of<T>> ref(std::optional<sample> s) {
        if (!s) return std::nullopt;
        return sample_of<T>(std::move(*s));
    }
    subscriber s_;
};

/// An open topic (maps its file). Endpoints made from it do not borrow it.
class topic {
  public:
    /// Opens topic `name`, creating it if missing (an existing one must match `config`).
    static topic create_or_open(const domain &d, const std::string &name, const topic_config &config = {}) {
        using cfg_handle = detail::owned<shmbus_topic_config, shmbus_topic_config_free>;
        auto cfg = detail::make<cfg_handle>(shmbus_topic_config_new);
        if (config.max_message_len)
            detail::check(shmbus_topic_config_set_max_message_len(cfg.get(), *config.max_message_len));
        if (config.history) detail::check(shmbus_topic_config_set_history(cfg.get(), *config.history));
        if (config.spare_slots) detail::check(shmbus_topic_config_set_spare_slots(cfg.get(), *config.spare_slots));
        if (config.mode) detail::check(shmbus_topic_config_set_mode(cfg.get(), *config.mode));
        if (config.group) detail::check(shmbus_topic_config_set_group(cfg.get(), *config.group));
        if (config.policy) detail::check(shmbus_topic_config_set_policy(cfg.get(), *config.policy));
        if (config.reliable_timeout) {
            auto ms = config.reliable_timeout->count();
            detail::check(shmbus_topic_config_set_reliable_timeout_ms(cfg.get(), ms < 0 ? 0 : static_cast<std::uint64_t>(ms)));
        }
        detail::set_schema(cfg.get(), config.schema, shmbus_topic_config_set_schema);
        return topic(detail::make<handle>(
            [&](shmbus_topic **o) { return shmbus_topic_create_or_open(d.get(), name.c_str(), cfg.get(), o); }));
    }
    /// Opens the existing topic `name` (SHMBUS_NOT_FOUND if there is none).
    static topic open(const domain &d, const std::string &name) {
        return topic(
            detail::make<handle>([&](shmbus_topic **o) { return shmbus_topic_open(d.get(), name.c_str(), o); }));
    }
    /// Reads the state of topic `name` (read permission suffices).
    static topic_status status(const domain &d, const std::string &name) {
        topic_status s{};
        detail::check(shmbus_topic_status(d.get(), name.c_str(), &s));
        return s;
    }
    std::size_t max_message_len() const noexcept { return shmbus_topic_max_message_len(h_.get()); }
    shmbus::publisher publisher() const {
        shmbus_publisher *p = nullptr;
        detail::check(shmbus_topic_publisher(h_.get(), &p));
        return shmbus::publisher(p);
    }
    /// A subscriber reading the messages published from now on.
    shmbus::subscriber subscriber() const {
        shmbus_subscriber *s = nullptr;
        detail::check(shmbus_topic_subscriber(h_.get(), &s));
        return shmbus::subscriber(s);
    }
    /// A reliable subscriber (block or fail topics; SHMBUS_INVALID_CONFIG on an overwrite one):
    /// publishers do not overwrite what it has not read, unless it stands still for the
    /// topic's reliable timeout (then it is evicted).
    shmbus::subscriber reliable_subscriber() const {
        shmbus_subscriber *s = nullptr;
        detail::check(shmbus_topic_reliable_subscriber(h_.get(), &s));
        return shmbus::subscriber(s);
    }
    /// The delivery policy (SHMBUS_POLICY_*).
    std::uint32_t policy() const noexcept { return shmbus_topic_policy(h_.get()); }
    template <class T> shmbus::publisher_of<T> publisher_of() const { return shmbus::publisher_of<T>(publisher()); }
    template <class T> shmbus::subscriber_of<T> subscriber_of() const { return shmbus::subscriber_of<T>(subscriber()); }
    template <class T> shmbus::subscriber_of<T> reliable_subscriber_of() const {
        return shmbus::subscriber_of<T>(reliable_subscriber());
    }
    /// Maps every page of the topic into this process now: no page fault at its first touch
    /// of a page (docs/topic.md, "Sizing"). Advice only.
    void prefault() const noexcept { shmbus_topic_prefault(h_.get()); }
    /// The topic's schema, set by its creator (none: it has none).
    std::optional<shmbus::schema> schema() const {
        return detail::schema_of([&](shmbus_schema *o) { return shmbus_topic_schema(h_.get(), o); });
    }
    const shmbus_topic *get() const noexcept { return h_.get(); }

  private:
    using handle = detail::owned<shmbus_topic, shmbus_topic_free>;
    explicit topic(handle h) : h_(std::move(h)) {}
    handle h_;
};

}  // namespace shmbus

#endif
