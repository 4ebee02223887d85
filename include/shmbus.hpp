/*
 * shmbus: shared-memory messaging for Linux, the C++17 API: a header-only layer over the C API
 * of shmbus.h (link libshmbus.so or libshmbus.a as for C). Guide: docs/cpp.md.
 *
 * - Every handle is owned by one object (move-only; the destructor frees it). Channel
 *   handles and domains may be destroyed once their endpoints are made.
 * - Errors are thrown as shmbus::error (code(), value(), what() from shmbus_last_error()).
 * - Calls that may give up without it being an error return an empty std::optional (a
 *   receive: nothing now, or the timeout passed) or false (a send: no room now, or the
 *   timeout passed): every try_ call, and every call taking a std::chrono duration.
 * - Zero-copy items (loan, sample, stream_loan, record, journal_loan, request_loan,
 *   response_loan, response_ref) borrow their endpoint: give them back (send, release, or
 *   let them go out of scope) before the conflicting call.
 * - A channel's schema (shmbus::schema) is set on its config and read back with schema();
 *   another schema than the channel's throws SHMBUS_SCHEMA_MISMATCH.
 * - Bytes are read through bytes_view and written through mutable_bytes_view (pointer +
 *   size, with begin()/end() and a std::string_view conversion).
 */

#ifndef SHMBUS_HPP
#define SHMBUS_HPP

#include <shmbus.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace shmbus {

/// The version of the library linked in (e.g. "0.1.0").
inline const char *version() noexcept { return shmbus_version(); }

/// A failed call: code() is the SHMBUS_* status, value() the number that goes with some codes
/// (messages skipped for SHMBUS_LAGGED, the largest size for SHMBUS_TOO_LARGE, ...), what()
/// the library's message.
class error : public std::runtime_error {
  public:
    error(shmbus_status code, const std::string &message, std::uint64_t value = 0)
        : std::runtime_error(message), code_(code), value_(value) {}
    /// The SHMBUS_* code (negative).
    shmbus_status code() const noexcept { return code_; }
    /// The number that goes with the code (0 when none).
    std::uint64_t value() const noexcept { return value_; }
    /// The code's name, e.g. "SHMBUS_TIMEOUT".
    const char *name() const noexcept { return shmbus_status_name(code_); }

  private:
    shmbus_status code_;
    std::uint64_t value_;
};

/// Read-only bytes: a pointer and a size (C++17 has no std::span).
class bytes_view {
  public:
    constexpr bytes_view() noexcept = default;
    bytes_view(const void *data, std::size_t size) noexcept
        : data_(static_cast<const std::uint8_t *>(data)), size_(size) {}
    /// A string's characters (not its terminating NUL).
    bytes_view(std::string_view s) noexcept : bytes_view(s.data(), s.size()) {}
    bytes_view(const std::string &s) noexcept : bytes_view(s.data(), s.size()) {}
    bytes_view(const char *s) noexcept : bytes_view(std::string_view(s)) {}
    /// A contiguous container of bytes (std::vector<std::uint8_t>, std::array<char, N>, ...).
    template <class C, class E = std::remove_pointer_t<decltype(std::data(std::declval<const C &>()))>,
              class = std::enable_if_t<sizeof(E) == 1 && std::is_trivially_copyable_v<E> &&
                                       !std::is_convertible_v<const C &, std::string_view>>>
    bytes_view(const C &c) noexcept : bytes_view(std::data(c), std::size(c)) {}

    const std::uint8_t *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    const std::uint8_t *begin() const noexcept { return data_; }
    const std::uint8_t *end() const noexcept { return data_ + size_; }
    std::uint8_t operator[](std::size_t i) const noexcept { return data_[i]; }
    /// The bytes as characters.
    std::string_view str() const noexcept { return {reinterpret_cast<const char *>(data_), size_}; }

  private:
    const std::uint8_t *data_ = nullptr;
    std::size_t size_ = 0;
};

/// Writable bytes: a pointer and a size.
class mutable_bytes_view {
  public:
    constexpr mutable_bytes_view() noexcept = default;
    mutable_bytes_view(void *data, std::size_t size) noexcept : data_(static_cast<std::uint8_t *>(data)), size_(size) {}
    /// A contiguous container of bytes, writable (std::vector<std::uint8_t>, std::array<char,
    /// N>, ...): its current size, not its capacity.
    template <class C, class E = std::remove_pointer_t<decltype(std::data(std::declval<C &>()))>,
              class = std::enable_if_t<sizeof(E) == 1 && std::is_trivially_copyable_v<E> && !std::is_const_v<E>>>
    mutable_bytes_view(C &c) noexcept : mutable_bytes_view(std::data(c), std::size(c)) {}
    std::uint8_t *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    std::uint8_t *begin() const noexcept { return data_; }
    std::uint8_t *end() const noexcept { return data_ + size_; }
    std::uint8_t &operator[](std::size_t i) const noexcept { return data_[i]; }
    operator bytes_view() const noexcept { return {data_, size_}; }

  private:
    std::uint8_t *data_ = nullptr;
    std::size_t size_ = 0;
};

/// What a channel's messages are, in MCAP's vocabulary (docs/schemas.md): how each message is
/// encoded (`cdr`, `protobuf`, `json`, ...; never empty), the schema's name
/// (`sensor_msgs/msg/Imu`), its encoding (`ros2msg`, `protobuf`, ...; empty for none) and its
/// data (at most SHMBUS_SCHEMA_MAX_DATA bytes). Set on a config (`topic_config::schema`, ...);
/// read back with `topic::schema()`, .... The library checks it when a channel is created or
/// opened (SHMBUS_INVALID_CONFIG for an invalid one, SHMBUS_SCHEMA_MISMATCH for another).
struct schema {
    std::string message_encoding;
    std::string name;
    std::string encoding;
    std::vector<std::uint8_t> data;

    schema() = default;
    schema(std::string message_encoding, std::string name = {}, std::string encoding = {}, bytes_view data = {})
        : message_encoding(std::move(message_encoding)), name(std::move(name)), encoding(std::move(encoding)),
          data(data.begin(), data.end()) {}

    friend bool operator==(const schema &a, const schema &b) {
        return a.message_encoding == b.message_encoding && a.name == b.name && a.encoding == b.encoding &&
               a.data == b.data;
    }
    friend bool operator!=(const schema &a, const schema &b) { return !(a == b); }
};

namespace detail {

[[noreturn]] inline void raise(shmbus_status rc) { throw error(rc, shmbus_last_error(), shmbus_last_error_value()); }

inline void check(shmbus_status rc) {
    if (rc != SHMBUS_OK) raise(rc);
}

/// SHMBUS_OK: true; `soft` (EMPTY, FULL, TIMEOUT, ...; SHMBUS_OK for none): false; any
/// other code: thrown.
inline bool check_soft(shmbus_status rc, shmbus_status soft) {
    if (rc == SHMBUS_OK) return true;
    if (rc == soft) return false;
    raise(rc);
}

inline std::uint64_t nanos(std::chrono::nanoseconds d) noexcept {
    return d.count() < 0 ? 0 : static_cast<std::uint64_t>(d.count());
}

/// Sets `s` (if any) on a C config with `set(config, message_encoding, name, encoding, data,
/// len)`.
template <class Config, class Set> void set_schema(Config *config, const std::optional<schema> &s, Set set) {
    if (!s) return;
    check(set(config, s->message_encoding.c_str(), s->name.c_str(), s->encoding.c_str(), s->data.data(),
              s->data.size()));
}

/// The schema a `shmbus_<kind>_schema(handle, &out)` getter reads, copied; none for
/// SHMBUS_NOT_FOUND.
template <class Get> std::optional<schema> schema_of(Get &&get) {
    shmbus_schema s{};
    if (!check_soft(get(&s), SHMBUS_NOT_FOUND)) return std::nullopt;
    return schema(std::string(s.message_encoding, s.message_encoding_len), std::string(s.name, s.name_len),
                  std::string(s.encoding, s.encoding_len), bytes_view(s.data, s.data_len));
}

template <class T, void (*Free)(T *)> struct deleter {
    void operator()(T *p) const noexcept { Free(p); }
};
template <class T, void (*Free)(T *)> using owned = std::unique_ptr<T, deleter<T, Free>>;

/// What every loan is built on: the lent handle `H` (freed unsent with `Discard`) and the
/// writable room it lends, which `room(h, &data, &capacity)` gives. The loan classes add
/// their send, which uses the handle up with `take`.
template <class H, void (*Discard)(H *)> class loan_room {
  public:
    std::uint8_t *data() const noexcept { return data_; }
    /// The room's size: the largest message the loan may send (a journal loan's: its entry's
    /// length).
    std::size_t size() const noexcept { return cap_; }
    mutable_bytes_view bytes() const noexcept { return {data_, cap_}; }
    /// Gives the room back without sending anything.
    void discard() noexcept {
        h_.reset();
        data_ = nullptr;
        cap_ = 0;
    }

  protected:
    loan_room(H *h, shmbus_status (*room)(H *, std::uint8_t **, std::size_t *)) : h_(h) {
        check(room(h, &data_, &cap_));
    }
    /// The handle, for a send that uses it up (also when the send fails).
    H *take() {
        if (!h_) throw error(SHMBUS_INVALID_ARGUMENT, "the loan was already sent or discarded");
        data_ = nullptr;
        cap_ = 0;
        return h_.release();
    }

  private:
    owned<H, Discard> h_;
    std::uint8_t *data_ = nullptr;
    std::size_t cap_ = 0;
};

/// Makes a handle with `make(out)` and owns it.
template <class Owned, class Make> Owned make(Make &&make) {
    typename Owned::pointer p = nullptr;
    check(make(&p));
    return Owned(p);
}

/// A copy receive into a vector sized by `hint` (the last message's length): a larger
/// message is SHMBUS_BUFFER_TOO_SMALL with its length, kept by the channel, and received
/// again into a buffer of that size. `recv(buf, cap, &len)` returns the status. Returns
/// false for `soft`.
template <class Recv> bool recv_vec(std::vector<std::uint8_t> &out, std::size_t &hint, shmbus_status soft, Recv &&recv) {
    out.resize(hint);
    for (;;) {
        std::size_t len = 0;
        shmbus_status rc = recv(out.data(), out.size(), &len);
        if (rc == SHMBUS_BUFFER_TOO_SMALL && len > out.size()) {
            out.resize(len);
            continue;
        }
        if (!check_soft(rc, soft)) return false;
        out.resize(len);
        hint = len < 64 ? 64 : len;
        return true;
    }
}

/// The one typed-view check: `b` holds exactly one T, aligned for it.
template <class T> const T &as(bytes_view b) {
    static_assert(std::is_trivially_copyable_v<T>, "shmbus typed messages need a trivially copyable T");
    if (b.size() != sizeof(T))
        throw error(SHMBUS_TYPE_MISMATCH, "a message of " + std::to_string(b.size()) + " bytes where the type has " +
                                              std::to_string(sizeof(T)));
    if (reinterpret_cast<std::uintptr_t>(b.data()) % alignof(T) != 0)
        throw error(SHMBUS_TYPE_MISMATCH,
                    "a message not aligned to the type's " + std::to_string(alignof(T)) + " bytes in shared memory");
    return *reinterpret_cast<const T *>(b.data());
}

template <class T> T copy_of(bytes_view b) {
    static_assert(std::is_trivially_copyable_v<T>, "shmbus typed messages need a trivially copyable T");
    if (b.size() != sizeof(T))
        throw error(SHMBUS_TYPE_MISMATCH, "a message of " + std::to_string(b.size()) + " bytes where the type has " +
                                              std::to_string(sizeof(T)));
    if constexpr (std::is_default_constructible_v<T>) {
        T v;
        std::memcpy(&v, b.data(), sizeof(T));
        return v;
    } else {
        // No default constructor: the bytes go into storage of T's size and alignment, which
        // (T being trivially copyable) then holds a T.
        alignas(T) unsigned char raw[sizeof(T)];
        std::memcpy(raw, b.data(), sizeof(T));
        return *std::launder(reinterpret_cast<T *>(raw));
    }
}

template <class T> bytes_view bytes_of(const T &v) noexcept {
    static_assert(std::is_trivially_copyable_v<T>, "shmbus typed messages need a trivially copyable T");
    return {&v, sizeof(T)};
}

}  // namespace detail

/// A domain: a directory of channels (/dev/shm/shmbus.<name>, or under $SHMBUS_ROOT or a root).
class domain {
  public:
    explicit domain(const std::string &name)
        : h_(detail::make<handle>([&](shmbus_domain **o) { return shmbus_domain_new(name.c_str(), o); })) {}
    domain(const std::string &name, const std::string &root)
        : h_(detail::make<handle>(
              [&](shmbus_domain **o) { return shmbus_domain_with_root(name.c_str(), root.c_str(), o); })) {}
    /// The C handle (still owned by this object).
    const shmbus_domain *get() const noexcept { return h_.get(); }

  private:
    using handle = detail::owned<shmbus_domain, shmbus_domain_free>;
    handle h_;
};

}  // namespace shmbus

#include "shmbus/topic.hpp"
#include "shmbus/queue.hpp"
#include "shmbus/stream.hpp"
#include "shmbus/pool.hpp"
#include "shmbus/service.hpp"
#include "shmbus/journal.hpp"
#include "shmbus/waitset.hpp"

#endif /* SHMBUS_HPP */
