/* A program built against an installed shmbus (pkg-config or CMake): a topic round trip in
 * the domain root given as argv[1]. */
#include <shmbus.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    shmbus_domain *d = NULL;
    shmbus_topic *t = NULL;
    shmbus_publisher *p = NULL;
    shmbus_subscriber *s = NULL;
    if (shmbus_domain_with_root("installed", argv[1], &d) != SHMBUS_OK ||
        shmbus_topic_create_or_open(d, "hello", NULL, &t) != SHMBUS_OK ||
        shmbus_topic_publisher(t, &p) != SHMBUS_OK || shmbus_topic_subscriber(t, &s) != SHMBUS_OK ||
        shmbus_publisher_send(p, "installed", 9, NULL) != SHMBUS_OK) {
        fprintf(stderr, "setup failed: %s\n", shmbus_last_error());
        return 1;
    }
    char buf[16];
    size_t len = 0;
    if (shmbus_subscriber_try_recv(s, buf, sizeof buf, &len, NULL, NULL) != SHMBUS_OK || len != 9 ||
        memcmp(buf, "installed", 9) != 0) {
        fprintf(stderr, "receive failed: %s\n", shmbus_last_error());
        return 1;
    }
    if (strlen(shmbus_version()) < 5) return 1;
    printf("consumer: ok\n");
    shmbus_subscriber_free(s);
    shmbus_publisher_free(p);
    shmbus_topic_free(t);
    shmbus_domain_free(d);
    return 0;
}
