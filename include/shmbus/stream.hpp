/* shmbus C++ API: the stream (part of shmbus.hpp; include that). */
#ifndef SHMBUS_STREAM_HPP
#define SHMBUS_STREAM_HPP

namespace shmbus {

/// Settings for stream::create_or_open (unset: as the existing stream, or the defaults).
struct stream_config {
    std::optional<std::size_t> capacity;  ///< ring bytes
    std::optional<std::uint32_t> mode, group;
    /// The schema of the stream's messages (docs/schemas.md): a created stream stores it; an
    /// existing one must carry the same (SHMBUS_SCHEMA_MISMATCH). Unset: any is accepted.
    std::optional<shmbus::schema> schema{};
};

/// A snapshot of a stream (stream::status).
using stream_status = shmbus_stream_status_info;

/// Room for one record loaned from a writer: fill data(), then send(len). Destroyed unsent,
/// it is discarded. The writer is busy while it is out.
class stream_loan : public detail::loan_room<shmbus_stream_loan, shmbus_stream_loan_discard> {
  public:
    /// Commits the first `len` bytes as one record. The loan is used up.
    void send(std::size_t len) { detail::check(shmbus_stream_loan_send(take(), len)); }

  private:
    friend class stream_writer;
    explicit stream_loan(shmbus_stream_loan *h) : loan_room(h, shmbus_stream_loan_data) {}
};

/// A record read in place. consume() takes it off the stream; release() (or destroying it)
/// leaves it there, to be read again (an at-least-once handover).
class record {
  public:
    const std::uint8_t *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return len_; }
    bytes_view bytes() const noexcept { return {data_, len_}; }
    void consume() noexcept {
        shmbus_record_consume(h_.release());
        data_ = nullptr;
        len_ = 0;
    }
    void release() noexcept {
        h_.reset();
        data_ = nullptr;
        len_ = 0;
    }

  private:
    friend class stream_reader;
    using handle = detail::owned<shmbus_record, shmbus_record_release>;
    explicit record(shmbus_record *h) : h_(h) { detail::check(shmbus_record_data(h, &data_, &len_)); }
    handle h_;
    const std::uint8_t *data_ = nullptr;
    std::size_t len_ = 0;
};

/// A stream's writer (exclusive: a second is SHMBUS_BUSY). A full ring makes send wait; a
/// reader gone is SHMBUS_DISCONNECTED.
class stream_writer {
  public:
    bool try_send(bytes_view data) {
        return detail::check_soft(shmbus_stream_writer_try_send(h_.get(), data.data(), data.size()), SHMBUS_FULL);
    }
    void send(bytes_view data) { detail::check(shmbus_stream_writer_send(h_.get(), data.data(), data.size())); }
    bool send(bytes_view data, std::chrono::nanoseconds timeout) {
        return detail::check_soft(
            shmbus_stream_writer_send_timeout(h_.get(), data.data(), data.size(), detail::nanos(timeout)),
            SHMBUS_TIMEOUT);
    }
    /// Room for a record of up to `len` bytes, if there is room now.
    std::optional<stream_loan> try_loan(std::size_t len) {
        shmbus_stream_loan *l = nullptr;
        if (!detail::check_soft(shmbus_stream_writer_try_loan(h_.get(), len, &l), SHMBUS_FULL)) return std::nullopt;
        return stream_loan(l);
    }
    stream_loan loan(std::size_t len) {
        shmbus_stream_loan *l = nullptr;
        detail::check(shmbus_stream_writer_loan(h_.get(), len, &l));
        return stream_loan(l);
    }
    std::optional<stream_loan> loan(std::size_t len, std::chrono::nanoseconds timeout) {
        shmbus_stream_loan *l = nullptr;
        if (!detail::check_soft(shmbus_stream_writer_loan_timeout(h_.get(), len, detail::nanos(timeout), &l),
                                SHMBUS_TIMEOUT))
            return std::nullopt;
        return stream_loan(l);
    }
    shmbus_stream_writer *get() const noexcept { return h_.get(); }

  private:
    friend class stream;
    using handle = detail::owned<shmbus_stream_writer, shmbus_stream_writer_free>;
    explicit stream_writer(shmbus_stream_writer *h) : h_(h) {}
    handle h_;
};

/// A stream's reader (exclusive). Once the writer is gone and the ring read, receives throw
/// SHMBUS_DISCONNECTED.
class stream_reader {
  public:
    std::optional<std::vector<std::uint8_t>> try_recv() {
        return recv_with(SHMBUS_EMPTY, [&](void *b, std::size_t c, std::size_t *l) {
            return shmbus_stream_reader_try_recv(h_.get(), b, c, l);
        });
    }
    std::vector<std::uint8_t> recv() {
        return *recv_with(SHMBUS_OK, [&](void *b, std::size_t c, std::size_t *l) {
            return shmbus_stream_reader_recv(h_.get(), b, c, l);
        });
    }
    std::optional<std::vector<std::uint8_t>> recv(std::chrono::nanoseconds timeout) {
        return recv_with(SHMBUS_TIMEOUT, [&](void *b, std::size_t c, std::size_t *l) {
            return shmbus_stream_reader_recv_timeout(h_.get(), b, c, l, detail::nanos(timeout));
        });
    }
    std::optional<record> try_recv_ref() {
        shmbus_record *r = nullptr;
        if (!detail::check_soft(shmbus_stream_reader_try_recv_ref(h_.get(), &r), SHMBUS_EMPTY)) return std::nullopt;
        return record(r);
    }
    record recv_ref() {
        shmbus_record *r = nullptr;
        detail::check(shmbus_stream_reader_recv_ref(h_.get(), &r));
        return record(r);
    }
    std::optional<record> recv_ref(std::chrono::nanoseconds timeout) {
        shmbus_record *r = nullptr;
        if (!detail::check_soft(shmbus_stream_reader_recv_ref_timeout(h_.get(), &r, detail::nanos(timeout)),
                                SHMBUS_TIMEOUT))
            return std::nullopt;
        return record(r);
    }
    /// The next record copied into `buf` (one copy, out of shared memory; allocates nothing),
    /// if there is one now: its length. A record longer than `buf` throws SHMBUS_BUFFER_TOO_SMALL
    /// (`value()`: its length) and is kept for the next receive.
    std::optional<std::size_t> try_recv_into(mutable_bytes_view buf) {
        std::size_t len = 0;
        if (!detail::check_soft(shmbus_stream_reader_try_recv(h_.get(), buf.data(), buf.size(), &len), SHMBUS_EMPTY))
            return std::nullopt;
        return len;
    }
    /// `try_recv_into`, waiting as long as it takes.
    std::size_t recv_into(mutable_bytes_view buf) {
        std::size_t len = 0;
        detail::check(shmbus_stream_reader_recv(h_.get(), buf.data(), buf.size(), &len));
        return len;
    }
    /// `try_recv_into`, or nothing once `timeout` has passed.
    std::optional<std::size_t> recv_into(mutable_bytes_view buf, std::chrono::nanoseconds timeout) {
        std::size_t len = 0;
        if (!detail::check_soft(
                shmbus_stream_reader_recv_timeout(h_.get(), buf.data(), buf.size(), &len, detail::nanos(timeout)),
                SHMBUS_TIMEOUT))
            return std::nullopt;
        return len;
    }
    shmbus_stream_reader *get() const noexcept { return h_.get(); }

  private:
    friend class stream;
    using handle = detail::owned<shmbus_stream_reader, shmbus_stream_reader_free>;
    explicit stream_reader(shmbus_stream_reader *h) : h_(h) {}
    template <class F> std::optional<std::vector<std::uint8_t>> recv_with(shmbus_status soft, F &&f) {
        std::vector<std::uint8_t> v;
        if (!detail::recv_vec(v, hint_, soft, f)) return std::nullopt;
        return v;
    }
    handle h_;
    std::size_t hint_ = 256;
};

/// An open stream: one writer, one reader, records of any length through a byte ring.
class stream {
  public:
    static stream create_or_open(const domain &d, const std::string &name, const stream_config &config = {}) {
        using cfg_handle = detail::owned<shmbus_stream_config, shmbus_stream_config_free>;
        auto cfg = detail::make<cfg_handle>(shmbus_stream_config_new);
        if (config.capacity) detail::check(shmbus_stream_config_set_capacity(cfg.get(), *config.capacity));
        if (config.mode) detail::check(shmbus_stream_config_set_mode(cfg.get(), *config.mode));
        if (config.group) detail::check(shmbus_stream_config_set_group(cfg.get(), *config.group));
        detail::set_schema(cfg.get(), config.schema, shmbus_stream_config_set_schema);
        return stream(detail::make<handle>(
            [&](shmbus_stream **o) { return shmbus_stream_create_or_open(d.get(), name.c_str(), cfg.get(), o); }));
    }
    static stream open(const domain &d, const std::string &name) {
        return stream(
            detail::make<handle>([&](shmbus_stream **o) { return shmbus_stream_open(d.get(), name.c_str(), o); }));
    }
    static stream_status status(const domain &d, const std::string &name) {
        stream_status s{};
        detail::check(shmbus_stream_status(d.get(), name.c_str(), &s));
        return s;
    }
    std::size_t max_record_len() const noexcept { return shmbus_stream_max_record_len(h_.get()); }
    stream_writer writer() const {
        shmbus_stream_writer *w = nullptr;
        detail::check(shmbus_stream_writer_open(h_.get(), &w));
        return stream_writer(w);
    }
    stream_reader reader() const {
        shmbus_stream_reader *r = nullptr;
        detail::check(shmbus_stream_reader_open(h_.get(), &r));
        return stream_reader(r);
    }
    /// Maps every page of the stream into this process now: no page fault at its first touch
    /// of a page (docs/topic.md, "Sizing"). Advice only.
    void prefault() const noexcept { shmbus_stream_prefault(h_.get()); }
    /// The stream's schema, set by its creator (none: it has none).
    std::optional<shmbus::schema> schema() const {
        return detail::schema_of([&](shmbus_schema *o) { return shmbus_stream_schema(h_.get(), o); });
    }
    const shmbus_stream *get() const noexcept { return h_.get(); }

  private:
    using handle = detail::owned<shmbus_stream, shmbus_stream_free>;
    explicit stream(handle h) : h_(std::move(h)) {}
    handle h_;
};

}  // namespace shmbus

#endif
