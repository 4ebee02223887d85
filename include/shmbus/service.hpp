/* shmbus C++ API: the service, request/response (part of shmbus.hpp; include that). */
#ifndef SHMBUS_SERVICE_HPP
#define SHMBUS_SERVICE_HPP

namespace shmbus {

/// Settings for service::create_or_open (unset: as the existing service, or the defaults).
struct service_config {
    std::optional<std::size_t> max_servers, max_clients, max_in_flight, max_request_len, max_response_len,
        response_depth;
    std::optional<std::uint32_t> mode;
    /// The schemas of the service's requests and responses (docs/schemas.md): a created
    /// service stores both (one without the other is refused); an existing one must carry
    /// the same pair.
    std::optional<shmbus::schema> request_schema{}, response_schema{};

    /// A service for trivially copyable `Req` and `Resp` (the typed endpoints'): requests and
    /// responses of exactly their size.
    template <class Req, class Resp> static service_config for_types() {
        static_assert(std::is_trivially_copyable_v<Req> && std::is_trivially_copyable_v<Resp>,
                      "shmbus typed messages need a trivially copyable T");
        service_config c;
        c.max_request_len = sizeof(Req);
        c.max_response_len = sizeof(Resp);
        return c;
    }
};

/// A snapshot of a service (service::status).
using service_status = shmbus_service_status_info;

/// A response received by copy: its request's id, and whether it is that request's last.
struct response {
    std::vector<std::uint8_t> data;
    std::uint64_t request_id = 0;
    bool last = false;
};

/// A request slot loaned from a client (client::loan_request), written in place: fill data()
/// (up to size() bytes, 64-byte aligned), then send(len). Destroyed unsent, it is discarded:
/// nothing is sent. The client is busy (SHMBUS_BUSY) while it is out.
class request_loan : public detail::loan_room<shmbus_request_loan, shmbus_request_loan_discard> {
  public:
    /// Sends the first `len` bytes as a request; returns its id. The loan is used up, also
    /// when this throws (SHMBUS_TOO_LARGE for `len` > size(): nothing was sent).
    std::uint64_t send(std::size_t len) {
        std::uint64_t id = 0;
        detail::check(shmbus_request_loan_send(take(), len, &id));
        return id;
    }

  private:
    friend class client;
    explicit request_loan(shmbus_request_loan *h) : loan_room(h, shmbus_request_loan_data) {}
};

/// A response cell loaned from a request (request::loan), written in place: fill data() (up to
/// size() bytes, 64-byte aligned), then send(len) or send_last(len). Destroyed unsent, it is
/// discarded: nothing is sent, and the request stays as it was. The request is busy
/// (SHMBUS_BUSY, also for request::data) while it is out.
class response_loan : public detail::loan_room<shmbus_response_loan, shmbus_response_loan_discard> {
  public:
    /// Sends the first `len` bytes as one response of a stream (more may follow). The loan is
    /// used up, also when this throws (SHMBUS_TOO_LARGE for `len` > size(): nothing was sent).
    void send(std::size_t len) { detail::check(shmbus_response_loan_send(take(), len, 0)); }
    /// Sends the first `len` bytes as the last response, finishing the request.
    void send_last(std::size_t len) { detail::check(shmbus_response_loan_send(take(), len, 1)); }

  private:
    friend class request;
    explicit response_loan(shmbus_response_loan *h) : loan_room(h, shmbus_response_loan_data) {}
};

/// A response read in place, in its cell (client::recv_response_ref): its bytes (64-byte
/// aligned), its request's id, and whether it is that request's last. Destroyed (or
/// release()d), it hands the cell back to the server; unread() leaves it for the next
/// receive instead. The client is busy (SHMBUS_BUSY) while it is out.
class response_ref {
  public:
    const std::uint8_t *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return len_; }
    bytes_view bytes() const noexcept { return {data_, len_}; }
    std::uint64_t request_id() const noexcept { return shmbus_response_request_id(h_.get()); }
    bool is_last() const noexcept { return shmbus_response_is_last(h_.get()) != 0; }
    /// Hands the cell back now; the data is invalid afterwards.
    void release() noexcept {
        h_.reset();
        data_ = nullptr;
        len_ = 0;
    }
    /// Leaves the response unread: the next receive returns it again. The data is invalid
    /// afterwards.
    void unread() noexcept {
        shmbus_response_unread(h_.release());
        data_ = nullptr;
        len_ = 0;
    }

  private:
    friend class client;
    using handle = detail::owned<shmbus_response, shmbus_response_free>;
    explicit response_ref(shmbus_response *h) : h_(h) { detail::check(shmbus_response_data(h, &data_, &len_)); }
    handle h_;
    const std::uint8_t *data_ = nullptr;
    std::size_t len_ = 0;
};

/// A request a server took, owned (move-only; may be answered on another thread). Its bytes
/// are read in place. Destroyed unfinished, it is ended: its client reads an empty last
/// response.
class request {
  public:
    /// The request's id, as its client numbered it.
    std::uint64_t id() const noexcept { return shmbus_request_id(h_.get()); }
    /// The request's bytes, in the client's slot: valid until the request is finished
    /// (its last response, end or fail: the client may post its next request there at once).
    bytes_view data() const {
        const std::uint8_t *d = nullptr;
        std::size_t len = 0;
        detail::check(shmbus_request_data(h_.get(), &d, &len));
        return bytes_view(d, len);
    }
    /// Sends `data` as one response of a stream (more may follow), waiting for room as long
    /// as it takes. SHMBUS_DISCONNECTED: the client gave up or died (the response was
    /// dropped and the request is finished).
    void respond(bytes_view data) { detail::check(shmbus_request_respond(h_.get(), data.data(), data.size(), 0, UINT64_MAX)); }
    /// Sends `data` as the last response, finishing the request.
    void respond_last(bytes_view data) {
        detail::check(shmbus_request_respond(h_.get(), data.data(), data.size(), 1, UINT64_MAX));
    }
    /// Finishes the request as failed: its client gets SHMBUS_FAILED.
    void fail() { detail::check(shmbus_request_fail(h_.get())); }
    /// A response cell to write in place (zero-copy), waiting as long as it takes while the
    /// client has response_depth responses unread. SHMBUS_DISCONNECTED as respond. Take
    /// data() first to answer from the request's bytes: the request is busy while the loan
    /// is out.
    response_loan loan() { return *loan_with(UINT64_MAX); }
    /// A response cell, or nothing once `timeout` has passed (0: at once) with the client's
    /// response_depth responses unread.
    std::optional<response_loan> loan(std::chrono::nanoseconds timeout) { return loan_with(detail::nanos(timeout)); }
    shmbus_request *get() const noexcept { return h_.get(); }

  private:
    friend class server;
    using handle = detail::owned<shmbus_request, shmbus_request_free>;
    explicit request(shmbus_request *h) : h_(h) {}
    std::optional<response_loan> loan_with(std::uint64_t timeout_ns) {
        shmbus_response_loan *l = nullptr;
        if (!detail::check_soft(shmbus_request_loan_response(h_.get(), &l, timeout_ns), SHMBUS_FULL))
            return std::nullopt;
        return response_loan(l);
    }
    handle h_;
};

/// A server of a service: takes requests, competing with the service's other servers.
class server {
  public:
    std::optional<shmbus::request> try_recv() { return recv_with(0, SHMBUS_EMPTY); }
    shmbus::request recv() { return *recv_with(UINT64_MAX, SHMBUS_OK); }
    std::optional<shmbus::request> recv(std::chrono::nanoseconds timeout) {
        return recv_with(nonzero(timeout), SHMBUS_TIMEOUT);
    }
    shmbus_server *get() const noexcept { return h_.get(); }

  private:
    friend class service;
    using handle = detail::owned<shmbus_server, shmbus_server_free>;
    explicit server(shmbus_server *h) : h_(h) {}
    static std::uint64_t nonzero(std::chrono::nanoseconds t) noexcept {
        std::uint64_t ns = detail::nanos(t);
        return ns == 0 ? 1 : ns;
    }
    std::optional<shmbus::request> recv_with(std::uint64_t timeout_ns, shmbus_status soft) {
        shmbus_request *r = nullptr;
        if (!detail::check_soft(shmbus_server_recv(h_.get(), &r, timeout_ns), soft)) return std::nullopt;
        return shmbus::request(r);
    }
    handle h_;
};

/// A client of a service: sends requests (at most max_in_flight unanswered) and reads the
/// responses to them, which reach it alone.
class client {
  public:
    /// Sends `data`; its id, or nothing when max_in_flight requests are unanswered (the
    /// request was not sent). SHMBUS_NO_WORKERS (no server) and SHMBUS_TOO_LARGE throw.
    std::optional<std::uint64_t> try_send_request(bytes_view data) {
        std::uint64_t id = 0;
        if (!detail::check_soft(shmbus_client_try_send_request(h_.get(), data.data(), data.size(), &id), SHMBUS_FULL))
            return std::nullopt;
        return id;
    }
    std::optional<response> try_recv_response() { return recv_with(0, SHMBUS_EMPTY); }
    response recv_response() { return *recv_with(UINT64_MAX, SHMBUS_OK); }
    std::optional<response> recv_response(std::chrono::nanoseconds timeout) {
        std::uint64_t ns = detail::nanos(timeout);
        return recv_with(ns == 0 ? 1 : ns, SHMBUS_TIMEOUT);
    }
    /// A request slot to write the next request in place (zero-copy). Never waits:
    /// SHMBUS_FULL (max_in_flight requests unanswered) and SHMBUS_NO_WORKERS throw.
    request_loan loan_request() {
        shmbus_request_loan *l = nullptr;
        detail::check(shmbus_client_loan_request(h_.get(), &l));
        return request_loan(l);
    }
    /// The next response read in place (zero-copy), if there is one now; errors as
    /// recv_response.
    std::optional<response_ref> try_recv_response_ref() { return ref_with(nullptr, 0, SHMBUS_EMPTY); }
    /// The next response read in place, waiting as long as it takes.
    response_ref recv_response_ref() { return *ref_with(nullptr, UINT64_MAX, SHMBUS_OK); }
    /// The next response read in place, or nothing once `timeout` has passed.
    std::optional<response_ref> recv_response_ref(std::chrono::nanoseconds timeout) {
        std::uint64_t ns = detail::nanos(timeout);
        return ref_with(nullptr, ns == 0 ? 1 : ns, SHMBUS_TIMEOUT);
    }
    /// The next response to request `id` read in place (those to other requests wait for
    /// their turn), or nothing once `timeout` has passed. SHMBUS_EMPTY (`id` not in flight)
    /// throws.
    std::optional<response_ref> recv_response_ref_for(std::uint64_t id, std::chrono::nanoseconds timeout) {
        std::uint64_t ns = detail::nanos(timeout);
        return ref_with(&id, ns == 0 ? 1 : ns, SHMBUS_TIMEOUT);
    }
    /// Sends `data` and waits at most `timeout` for its response: nothing on a timeout (the
    /// request is given up). SHMBUS_DISCONNECTED (the server died) and SHMBUS_FAILED (it
    /// failed the request) throw.
    std::optional<std::vector<std::uint8_t>> call(bytes_view data, std::chrono::nanoseconds timeout) {
        std::uint64_t id = 0;
        detail::check(shmbus_client_try_send_request(h_.get(), data.data(), data.size(), &id));
        std::vector<std::uint8_t> out;
        std::uint32_t last = 0;
        std::uint64_t ns = detail::nanos(timeout);
        bool got = false;
        try {
            got = detail::recv_vec(out, hint_, SHMBUS_TIMEOUT, [&](void *b, std::size_t c, std::size_t *l) {
                return shmbus_client_recv_response_for(h_.get(), id, b, c, l, &last, ns == 0 ? 1 : ns);
            });
        } catch (...) {
            shmbus_client_cancel(h_.get(), id);
            throw;
        }
        if (!got || last == 0) shmbus_client_cancel(h_.get(), id);  // given up, or more to come
        if (!got) return std::nullopt;
        return out;
    }
    /// Gives request `id` up: a response that comes later is dropped. Whether it was in
    /// flight.
    bool cancel(std::uint64_t id) { return detail::check_soft(shmbus_client_cancel(h_.get(), id), SHMBUS_NOT_FOUND); }
    std::size_t in_flight() const noexcept { return shmbus_client_in_flight(h_.get()); }
    shmbus_client *get() const noexcept { return h_.get(); }

  private:
    friend class service;
    using handle = detail::owned<shmbus_client, shmbus_client_free>;
    explicit client(shmbus_client *h) : h_(h) {}
    std::optional<response> recv_with(std::uint64_t timeout_ns, shmbus_status soft) {
        response r;
        std::uint32_t last = 0;
        if (!detail::recv_vec(r.data, hint_, soft, [&](void *b, std::size_t c, std::size_t *l) {
                return shmbus_client_recv_response(h_.get(), b, c, l, &r.request_id, &last, timeout_ns);
            }))
            return std::nullopt;
        r.last = last != 0;
        return r;
    }
    std::optional<response_ref> ref_with(const std::uint64_t *id, std::uint64_t timeout_ns, shmbus_status soft) {
        shmbus_response *r = nullptr;
        shmbus_status rc = id ? shmbus_client_recv_response_ref_for(h_.get(), *id, &r, timeout_ns)
                              : shmbus_client_recv_response_ref(h_.get(), &r, timeout_ns);
        if (!detail::check_soft(rc, soft)) return std::nullopt;
        return response_ref(r);
    }
    handle h_;
    std::size_t hint_ = 256;
};

/// A response to a typed client: its request's id, whether it is that request's last, and
/// its value (none: the empty end of a stream).
template <class Resp> struct response_of {
    std::optional<Resp> value;
    std::uint64_t request_id = 0;
    bool last = false;
};

/// A typed request (server_of): its value read in place, typed responses. A request of
/// another size (or misaligned) is SHMBUS_TYPE_MISMATCH when its value is read.
template <class Req, class Resp> class request_of {
    static_assert(std::is_trivially_copyable_v<Req> && std::is_trivially_copyable_v<Resp>,
                  "shmbus typed messages need a trivially copyable T");

  public:
    explicit request_of(request r) : r_(std::move(r)) {}
    std::uint64_t id() const noexcept { return r_.id(); }
    /// The request's value, in the client's slot: valid until the request is finished (as
    /// request::data).
    const Req &value() const { return detail::as<Req>(r_.data()); }
    const Req *operator->() const { return &value(); }
    void respond(const Resp &v) { r_.respond(detail::bytes_of(v)); }
    void respond_last(const Resp &v) { r_.respond_last(detail::bytes_of(v)); }
    void fail() { r_.fail(); }
    request &untyped() noexcept { return r_; }

  private:
    request r_;
};

/// A typed server: takes request_of<Req, Resp>.
template <class Req, class Resp> class server_of {
  public:
    explicit server_of(server s) : s_(std::move(s)) {}
    std::optional<request_of<Req, Resp>> try_recv() { return typed(s_.try_recv()); }
    request_of<Req, Resp> recv() { return request_of<Req, Resp>(s_.recv()); }
    std::optional<request_of<Req, Resp>> recv(std::chrono::nanoseconds timeout) { return typed(s_.recv(timeout)); }
    server &untyped() noexcept { return s_; }

  private:
    static std::optional<request_of<Req, Resp>> typed(std::optional<request> r) {
        if (!r) return std::nullopt;
        return request_of<Req, Resp>(std::move(*r));
    }
    server s_;
};

/// A typed client: sends the bytes of a Req, receives Resp by copy. A response of another
/// size is SHMBUS_TYPE_MISMATCH; a call its server ended without a response is
/// SHMBUS_FAILED.
template <class Req, class Resp> class client_of {
    static_assert(std::is_trivially_copyable_v<Req> && std::is_trivially_copyable_v<Resp>,
                  "shmbus typed messages need a trivially copyable T");

  public:
    explicit client_of(client c) : c_(std::move(c)) {}
    std::optional<std::uint64_t> try_send_request(const Req &v) { return c_.try_send_request(detail::bytes_of(v)); }
    std::optional<response_of<Resp>> try_recv_response() { return typed(c_.try_recv_response()); }
    response_of<Resp> recv_response() { return *typed(c_.recv_response()); }
    std::optional<response_of<Resp>> recv_response(std::chrono::nanoseconds timeout) {
        return typed(c_.recv_response(timeout));
    }
    /// Sends `v` and waits at most `timeout` for its response's value: nothing on a timeout
    /// (the request is given up).
    std::optional<Resp> call(const Req &v, std::chrono::nanoseconds timeout) {
        std::optional<std::vector<std::uint8_t>> out = c_.call(detail::bytes_of(v), timeout);
        if (!out) return std::nullopt;
        if (out->empty()) throw error(SHMBUS_FAILED, "the server ended the call without a response");
        return detail::copy_of<Resp>(bytes_view(out->data(), out->size()));
    }
    bool cancel(std::uint64_t id) { return c_.cancel(id); }
    std::size_t in_flight() const noexcept { return c_.in_flight(); }
    client &untyped() noexcept { return c_; }

  private:
    static std::optional<response_of<Resp>> typed(std::optional<response> r) {
        if (!r) return std::nullopt;
        response_of<Resp> t;
        t.request_id = r->request_id;
        t.last = r->last;
        // An empty last response is a stream's end, not a value.
        if (!(r->last && r->data.empty())) t.value = detail::copy_of<Resp>(bytes_view(r->data.data(), r->data.size()));
        return t;
    }
    client c_;
};

/// An open service: servers and clients in any processes.
class service {
  public:
    static service create_or_open(const domain &d, const std::string &name, const service_config &config = {}) {
        using cfg_handle = detail::owned<shmbus_service_config, shmbus_service_config_free>;
        auto cfg = detail::make<cfg_handle>(shmbus_service_config_new);
        shmbus_service_config *c = cfg.get();
        if (config.max_servers) detail::check(shmbus_service_config_set_max_servers(c, *config.max_servers));
        if (config.max_clients) detail::check(shmbus_service_config_set_max_clients(c, *config.max_clients));
        if (config.max_in_flight) detail::check(shmbus_service_config_set_max_in_flight(c, *config.max_in_flight));
        if (config.max_request_len) detail::check(shmbus_service_config_set_max_request_len(c, *config.max_request_len));
        if (config.max_response_len)
            detail::check(shmbus_service_config_set_max_response_len(c, *config.max_response_len));
        if (config.response_depth) detail::check(shmbus_service_config_set_response_depth(c, *config.response_depth));
        if (config.mode) detail::check(shmbus_service_config_set_mode(c, *config.mode));
        detail::set_schema(c, config.request_schema, shmbus_service_config_set_request_schema);
        detail::set_schema(c, config.response_schema, shmbus_service_config_set_response_schema);
        return service(detail::make<handle>(
            [&](shmbus_service **o) { return shmbus_service_create_or_open(d.get(), name.c_str(), c, o); }));
    }
    static service open(const domain &d, const std::string &name) {
        return service(
            detail::make<handle>([&](shmbus_service **o) { return shmbus_service_open(d.get(), name.c_str(), o); }));
    }
    static service_status status(const domain &d, const std::string &name) {
        service_status s{};
        detail::check(shmbus_service_status(d.get(), name.c_str(), &s));
        return s;
    }
    /// The schema of the service's requests, set by its creator (none: it has none).
    std::optional<shmbus::schema> request_schema() const {
        return detail::schema_of([&](shmbus_schema *o) { return shmbus_service_request_schema(h_.get(), o); });
    }
    /// The schema of the service's responses, set by its creator (none: it has none).
    std::optional<shmbus::schema> response_schema() const {
        return detail::schema_of([&](shmbus_schema *o) { return shmbus_service_response_schema(h_.get(), o); });
    }
    shmbus::client client() const {
        shmbus_client *p = nullptr;
        detail::check(shmbus_service_client(h_.get(), &p));
        return shmbus::client(p);
    }
    shmbus::server server() const {
        shmbus_server *p = nullptr;
        detail::check(shmbus_service_server(h_.get(), &p));
        return shmbus::server(p);
    }
    /// A typed client (client_of) and server (server_of) for trivially copyable types.
    template <class Req, class Resp> shmbus::client_of<Req, Resp> client_of() const {
        return shmbus::client_of<Req, Resp>(client());
    }
    template <class Req, class Resp> shmbus::server_of<Req, Resp> server_of() const {
        return shmbus::server_of<Req, Resp>(server());
    }
    const shmbus_service *get() const noexcept { return h_.get(); }

  private:
    using handle = detail::owned<shmbus_service, shmbus_service_free>;
    explicit service(handle h) : h_(std::move(h)) {}
    handle h_;
};

}  // namespace shmbus

#endif
