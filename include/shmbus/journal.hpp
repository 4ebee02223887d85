/* shmbus C++ API: the journal (part of shmbus.hpp; include that). */
#ifndef SHMBUS_JOURNAL_HPP
#define SHMBUS_JOURNAL_HPP

namespace shmbus {

/// What a journal commit guarantees (journal_config::durability).
enum class durability {
    none,     ///< in the page cache (survives a process crash; the default)
    flush,    ///< flushed before the send returns (survives power loss)
    periodic  ///< synced every journal_config::sync_period in the background
};

/// Settings for journal::create_or_open; they apply only when the journal is created (the
/// schema is also checked when it is opened).
struct journal_config {
    std::optional<std::uint64_t> cycle_bytes, chunk_bytes, max_entry_len;
    std::optional<std::chrono::nanoseconds> abandon_timeout;
    std::optional<std::uint32_t> mode;
    std::optional<std::uint64_t> roll_secs;  ///< a new cycle every N seconds (0: only when full)
    std::optional<shmbus::durability> durability;
    std::chrono::nanoseconds sync_period{0};  ///< for durability::periodic
    /// The schema of the journal's messages (docs/schemas.md): a created journal stores it; an
    /// existing one must carry the same (SHMBUS_SCHEMA_MISMATCH). Unset: any is accepted.
    std::optional<shmbus::schema> schema{};
};

/// A snapshot of a journal (journal::status).
using journal_status = shmbus_journal_status_info;

/// An entry read by copy.
struct entry {
    std::vector<std::uint8_t> data;
    std::uint64_t index = 0;
    std::uint64_t ts_ns = 0;
    bytes_view bytes() const noexcept { return data; }
};

/// An entry read in place: its bytes are valid until the next call on the tailer.
/// What `tailer::try_recv_into` put into the caller's buffer.
struct entry_received {
    std::size_t len = 0;  ///< bytes written at the start of the buffer
    std::uint64_t index = 0;
    std::uint64_t ts_ns = 0;  ///< CLOCK_REALTIME nanoseconds
};

struct entry_ref {
    bytes_view data;
    std::uint64_t index = 0;
    std::uint64_t ts_ns = 0;
};

/// Room for one entry loaned from an appender: fill data(), then send(). Destroyed unsent, it
/// is discarded. The appender is busy while it is out.
class journal_loan : public detail::loan_room<shmbus_journal_loan, shmbus_journal_loan_discard> {
  public:
    /// Commits the entry; returns its index. The loan is used up.
    std::uint64_t send() {
        std::uint64_t index = 0;
        detail::check(shmbus_journal_loan_send(take(), &index));
        return index;
    }

  private:
    friend class appender;
    explicit journal_loan(shmbus_journal_loan *h) : loan_room(h, shmbus_journal_loan_data) {}
};

/// A journal's appender: never waits (the log grows).
class appender {
  public:
    /// Appends a copy of `data`; returns its index.
    std::uint64_t send(bytes_view data) {
        std::uint64_t index = 0;
        detail::check(shmbus_appender_send(h_.get(), data.data(), data.size(), &index));
        return index;
    }
    /// Room for an entry of exactly `len` bytes, written in place.
    journal_loan loan(std::size_t len) {
        shmbus_journal_loan *l = nullptr;
        detail::check(shmbus_appender_loan(h_.get(), len, &l));
        return journal_loan(l);
    }
    shmbus_appender *get() const noexcept { return h_.get(); }

  private:
    friend class journal;
    using handle = detail::owned<shmbus_appender, shmbus_appender_free>;
    explicit appender(shmbus_appender *h) : h_(h) {}
    handle h_;
};

/// A journal reader: an anonymous tailer, or a named reader whose position survives restarts
/// (ack()). Damaged or missing entries throw SHMBUS_DAMAGED; reading goes on after them.
class tailer {
  public:
    std::optional<entry> try_recv() {
        return recv_with(SHMBUS_EMPTY, [&](void *b, std::size_t c, std::size_t *l, std::uint64_t *i, std::uint64_t *t) {
            return shmbus_tailer_try_recv(h_.get(), b, c, l, i, t);
        });
    }
    entry recv() {
        return *recv_with(SHMBUS_OK, [&](void *b, std::size_t c, std::size_t *l, std::uint64_t *i, std::uint64_t *t) {
            return shmbus_tailer_recv(h_.get(), b, c, l, i, t);
        });
    }
    std::optional<entry> recv(std::chrono::nanoseconds timeout) {
        return recv_with(SHMBUS_TIMEOUT, [&](void *b, std::size_t c, std::size_t *l, std::uint64_t *i, std::uint64_t *t) {
            return shmbus_tailer_recv_timeout(h_.get(), b, c, l, i, t, detail::nanos(timeout));
        });
    }
    std::optional<entry_ref> try_recv_ref() {
        return ref_with(SHMBUS_EMPTY, [&](const std::uint8_t **d, std::size_t *l, std::uint64_t *i, std::uint64_t *t) {
            return shmbus_tailer_try_recv_ref(h_.get(), d, l, i, t);
        });
    }
    entry_ref recv_ref() {
        return *ref_with(SHMBUS_OK, [&](const std::uint8_t **d, std::size_t *l, std::uint64_t *i, std::uint64_t *t) {
            return shmbus_tailer_recv_ref(h_.get(), d, l, i, t);
        });
    }
    std::optional<entry_ref> recv_ref(std::chrono::nanoseconds timeout) {
        return ref_with(SHMBUS_TIMEOUT, [&](const std::uint8_t **d, std::size_t *l, std::uint64_t *i, std::uint64_t *t) {
            return shmbus_tailer_recv_ref_timeout(h_.get(), d, l, i, t, detail::nanos(timeout));
        });
    }
    /// The next entry copied into `buf` (one copy, out of shared memory; allocates nothing),
    /// if there is one now: its length, index and time stamp. A entry longer than `buf` throws SHMBUS_BUFFER_TOO_SMALL
    /// (`value()`: its length) and is kept for the next receive.
    std::optional<entry_received> try_recv_into(mutable_bytes_view buf) {
        entry_received r;
        if (!detail::check_soft(
                shmbus_tailer_try_recv(h_.get(), buf.data(), buf.size(), &r.len, &r.index, &r.ts_ns), SHMBUS_EMPTY))
            return std::nullopt;
        return r;
    }
    /// `try_recv_into`, waiting as long as it takes.
    entry_received recv_into(mutable_bytes_view buf) {
        entry_received r;
        detail::check(shmbus_tailer_recv(h_.get(), buf.data(), buf.size(), &r.len, &r.index, &r.ts_ns));
        return r;
    }
    /// `try_recv_into`, or nothing once `timeout` has passed.
    std::optional<entry_received> recv_into(mutable_bytes_view buf, std::chrono::nanoseconds timeout) {
        entry_received r;
        if (!detail::check_soft(shmbus_tailer_recv_timeout(h_.get(), buf.data(), buf.size(), &r.len, &r.index,
                                                           &r.ts_ns, detail::nanos(timeout)),
                                SHMBUS_TIMEOUT))
            return std::nullopt;
        return r;
    }
    /// A named reader: stores its position (the next read after a restart goes on from here).
    void ack() { detail::check(shmbus_tailer_ack(h_.get())); }
    /// The index the next read returns.
    std::uint64_t position() const noexcept { return shmbus_tailer_position(h_.get()); }
    shmbus_tailer *get() const noexcept { return h_.get(); }

  private:
    friend class journal;
    using handle = detail::owned<shmbus_tailer, shmbus_tailer_free>;
    explicit tailer(shmbus_tailer *h) : h_(h) {}
    template <class F> std::optional<entry> recv_with(shmbus_status soft, F &&f) {
        entry e;
        if (!detail::recv_vec(e.data, hint_, soft,
                              [&](void *b, std::size_t c, std::size_t *l) { return f(b, c, l, &e.index, &e.ts_ns); }))
            return std::nullopt;
        return e;
    }
    template <class F> static std::optional<entry_ref> ref_with(shmbus_status soft, F &&f) {
        const std::uint8_t *d = nullptr;
        std::size_t len = 0;
        entry_ref e;
        if (!detail::check_soft(f(&d, &len, &e.index, &e.ts_ns), soft)) return std::nullopt;
        e.data = bytes_view(d, len);
        return e;
    }
    handle h_;
    std::size_t hint_ = 256;
};

/// An open journal (a directory of cycle files). Appenders and tailers do not borrow it.
class journal {
  public:
    static journal create_or_open(const std::string &dir, const journal_config &config = {}) {
        using cfg_handle = detail::owned<shmbus_journal_config, shmbus_journal_config_free>;
        auto cfg = detail::make<cfg_handle>(shmbus_journal_config_new);
        auto *c = cfg.get();
        if (config.cycle_bytes) detail::check(shmbus_journal_config_set_cycle_bytes(c, *config.cycle_bytes));
        if (config.chunk_bytes) detail::check(shmbus_journal_config_set_chunk_bytes(c, *config.chunk_bytes));
        if (config.max_entry_len) detail::check(shmbus_journal_config_set_max_entry_len(c, *config.max_entry_len));
        if (config.abandon_timeout)
            detail::check(shmbus_journal_config_set_abandon_timeout(c, detail::nanos(*config.abandon_timeout)));
        if (config.mode) detail::check(shmbus_journal_config_set_mode(c, *config.mode));
        if (config.roll_secs) detail::check(shmbus_journal_config_set_roll_secs(c, *config.roll_secs));
        if (config.durability == durability::none) detail::check(shmbus_journal_config_set_durability_none(c));
        if (config.durability == durability::flush) detail::check(shmbus_journal_config_set_durability_flush(c));
        if (config.durability == durability::periodic)
            detail::check(shmbus_journal_config_set_durability_periodic(c, detail::nanos(config.sync_period)));
        detail::set_schema(cfg.get(), config.schema, shmbus_journal_config_set_schema);
        return journal(detail::make<handle>(
            [&](shmbus_journal **o) { return shmbus_journal_create_or_open(dir.c_str(), c, o); }));
    }
    static journal open(const std::string &dir) {
        return journal(detail::make<handle>([&](shmbus_journal **o) { return shmbus_journal_open(dir.c_str(), o); }));
    }
    static journal_status status(const std::string &dir) {
        journal_status s{};
        detail::check(shmbus_journal_status(dir.c_str(), &s));
        return s;
    }
    shmbus::appender appender() const {
        shmbus_appender *a = nullptr;
        detail::check(shmbus_journal_appender(h_.get(), &a));
        return shmbus::appender(a);
    }
    /// An anonymous tailer from the oldest retained entry.
    shmbus::tailer tailer() const {
        return make_tailer([&](shmbus_tailer **o) { return shmbus_journal_tailer(h_.get(), o); });
    }
    shmbus::tailer tailer_at(std::uint64_t index) const {
        return make_tailer([&](shmbus_tailer **o) { return shmbus_journal_tailer_at(h_.get(), index, o); });
    }
    shmbus::tailer tailer_at_end() const {
        return make_tailer([&](shmbus_tailer **o) { return shmbus_journal_tailer_at_end(h_.get(), o); });
    }
    /// A tailer from the first entry at or after `ts_ns` (wall-clock nanoseconds since the Unix epoch).
    shmbus::tailer tailer_at_time(std::uint64_t ts_ns) const {
        return make_tailer([&](shmbus_tailer **o) { return shmbus_journal_tailer_at_time(h_.get(), ts_ns, o); });
    }
    /// The named reader `name` (exclusive), resuming where it last ack()ed.
    shmbus::tailer reader(const std::string &name) const {
        return make_tailer([&](shmbus_tailer **o) { return shmbus_journal_reader(h_.get(), name.c_str(), o); });
    }
    /// The journal's schema, set by its creator (none: it has none).
    std::optional<shmbus::schema> schema() const {
        return detail::schema_of([&](shmbus_schema *o) { return shmbus_journal_schema(h_.get(), o); });
    }
    const shmbus_journal *get() const noexcept { return h_.get(); }

  private:
    using handle = detail::owned<shmbus_journal, shmbus_journal_free>;
    explicit journal(handle h) : h_(std::move(h)) {}
    template <class F> static shmbus::tailer make_tailer(F &&f) {
        shmbus_tailer *t = nullptr;
        detail::check(f(&t));
        return shmbus::tailer(t);
    }
    handle h_;
};

}  // namespace shmbus

#endif
