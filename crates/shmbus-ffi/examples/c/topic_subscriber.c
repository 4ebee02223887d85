/* A topic subscriber: reads COUNT messages from topic NAME in domain DOMAIN in place (pinned
 * zero-copy samples), checks that they are "message 0", "message 1", ... in order, and says
 * "received COUNT". It prints "ready" once subscribed, so a publisher can be started then.
 *
 *   topic_subscriber ROOT DOMAIN NAME COUNT
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

    /* History COUNT: a subscriber that falls behind still gets every message. */
    shmbus_topic_config *config = NULL;
    shmbus_topic_config_new(&config);
    shmbus_topic_config_set_max_message_len(config, 64);
    shmbus_topic_config_set_history(config, (size_t)count);
    shmbus_topic *topic = NULL;
    rc = shmbus_topic_create_or_open(domain, argv[3], config, &topic);
    shmbus_topic_config_free(config);
    if (rc != SHMBUS_OK) return fail("create_or_open", rc);

    shmbus_subscriber *subscriber = NULL;
    rc = shmbus_topic_subscriber(topic, &subscriber);
    if (rc != SHMBUS_OK) return fail("subscriber", rc);
    printf("ready\n");
    fflush(stdout);

    uint64_t last_seq = 0;
    for (long i = 0; i < count; i++) {
        shmbus_sample *sample = NULL;
        rc = shmbus_subscriber_recv_ref_timeout(subscriber, &sample, 10ull * 1000 * 1000 * 1000);
        if (rc != SHMBUS_OK) return fail("recv_ref_timeout", rc);
        const uint8_t *data = NULL;
        size_t len = 0;
        shmbus_sample_data(sample, &data, &len);
        char expected[64];
        int n = snprintf(expected, sizeof expected, "message %ld", i);
        if (len != (size_t)n || memcmp(data, expected, len) != 0) {
            fprintf(stderr, "message %ld: got %.*s\n", i, (int)len, (const char *)data);
            return 1;
        }
        uint64_t seq = shmbus_sample_seq(sample);
        if (seq <= last_seq) {
            fprintf(stderr, "sequence numbers out of order: %llu after %llu\n", (unsigned long long)seq,
                    (unsigned long long)last_seq);
            return 1;
        }
        last_seq = seq;
        shmbus_sample_release(sample);
    }
    printf("received %ld\n", count);

    shmbus_subscriber_free(subscriber);
    shmbus_topic_free(topic);
    shmbus_domain_free(domain);
    return 0;
}
