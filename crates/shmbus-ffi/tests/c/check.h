/* Assertions for the C tests: each failure prints the call, the code, its name and
 * shmbus_last_error(), and exits 1. Every test takes the domain root directory as argv[1]. */
#ifndef SHMBUS_TEST_CHECK_H
#define SHMBUS_TEST_CHECK_H

#include <shmbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT(call, code)                                                                      \
    do {                                                                                        \
        shmbus_status rc_ = (call);                                                             \
        if (rc_ != (code)) {                                                                    \
            fprintf(stderr, "%s:%d: %s returned %s (%d), expected %s: %s\n", __FILE__, __LINE__, \
                    #call, shmbus_status_name(rc_), rc_, #code, shmbus_last_error());            \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

#define OK(call) EXPECT(call, SHMBUS_OK)

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* The last error's text contains `part`. */
#define ERROR_MENTIONS(part) CHECK(strstr(shmbus_last_error(), (part)) != NULL)

static inline shmbus_domain *test_domain(int argc, char **argv, const char *name) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s ROOT\n", argv[0]);
        exit(2);
    }
    shmbus_domain *d = NULL;
    OK(shmbus_domain_with_root(name, argv[1], &d));
    return d;
}

#endif
