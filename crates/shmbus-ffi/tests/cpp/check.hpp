// Assertions for the C++ tests: a failure prints where and what, and exits 1 (an escaping
// shmbus::error prints its code and message). Every test takes the domain root as argv[1].
#ifndef SHMBUS_TEST_CHECK_HPP
#define SHMBUS_TEST_CHECK_HPP

#include <shmbus.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            std::exit(1);                                                            \
        }                                                                            \
    } while (0)

// `stmt` throws a shmbus::error with `code`; `e` names it in `then` (e.g. to check value()).
#define EXPECT_ERROR(stmt, expected, then)                                                        \
    do {                                                                                          \
        try {                                                                                     \
            stmt;                                                                                 \
        } catch (const shmbus::error &e) {                                                        \
            if (e.code() != (expected)) {                                                         \
                std::fprintf(stderr, "%s:%d: %s threw %s (%s), expected %s\n", __FILE__, __LINE__, \
                             #stmt, e.name(), e.what(), #expected);                               \
                std::exit(1);                                                                     \
            }                                                                                     \
            then;                                                                                 \
            break;                                                                                \
        }                                                                                         \
        std::fprintf(stderr, "%s:%d: %s did not throw %s\n", __FILE__, __LINE__, #stmt, #expected); \
        std::exit(1);                                                                             \
    } while (0)

// Runs `body(root)` and turns an escaping error into a message and exit status 1.
template <class F> int run_test(int argc, char **argv, const char *name, F &&body) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s ROOT\n", argv[0]);
        return 2;
    }
    try {
        body(std::string(argv[1]));
    } catch (const shmbus::error &e) {
        std::fprintf(stderr, "uncaught shmbus::error %s: %s\n", e.name(), e.what());
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "uncaught exception: %s\n", e.what());
        return 1;
    }
    std::printf("%s: ok\n", name);
    return 0;
}

#endif
