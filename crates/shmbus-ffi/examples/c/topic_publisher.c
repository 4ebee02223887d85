/* A topic publisher: publishes COUNT messages "message <i>" on topic NAME in domain DOMAIN,
 * writing each in place in shared memory (loan -> write -> send).
 *
 *   topic_publisher ROOT DOMAIN NAME COUNT
 *
 * ROOT is the directory the domain lives in ("-" for the default, /dev/shm). */
#include <shmbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, shmbus_status rc) {
    fprintf(stderr, "%s: %s: %s\n", what, shmbus_status_name(rc), shmbus_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s ROOT DOMAIN NAME COUNT\n", argv[0]);
        return 2;
    }
    long count = strtol(argv[4], NULL, 10);
    shmbus_domain *domain = NULL;
    shmbus_status rc = strcmp(argv[1], "-") == 0 ? shmbus_domain_new(argv[2], &domain)
                                                 : shmbus_domain_with_root(argv[2], argv[1], &domain);
    if (rc != SHMBUS_OK) return fail("domain", rc);

    shmbus_topic_config *config = NULL;
    shmbus_topic_config_new(&config);
    shmbus_topic_config_set_max_message_len(config, 64);
    shmbus_topic *topic = NULL;
    rc = shmbus_topic_create_or_open(domain, argv[3], config, &topic);
    shmbus_topic_config_free(config);
    if (rc != SHMBUS_OK) return fail("create_or_open", rc);

    shmbus_publisher *publisher = NULL;
    rc = shmbus_topic_publisher(topic, &publisher);
    if (rc != SHMBUS_OK) return fail("publisher", rc);

    for (long i = 0; i < count; i++) {
        shmbus_loan *loan = NULL;
        rc = shmbus_publisher_loan(publisher, &loan);
        if (rc != SHMBUS_OK) return fail("loan", rc);
        uint8_t *data = NULL;
        size_t capacity = 0;
        rc = shmbus_loan_data(loan, &data, &capacity);
        if (rc != SHMBUS_OK) return fail("loan_data", rc);
        int len = snprintf((char *)data, capacity, "message %ld", i);
        uint64_t seq = 0;
        rc = shmbus_loan_send(loan, (size_t)len, &seq);
        if (rc != SHMBUS_OK) return fail("loan_send", rc);
    }
    printf("published %ld\n", count);

    shmbus_publisher_free(publisher);
    shmbus_topic_free(topic);
    shmbus_domain_free(domain);
    return 0;
}
