/* Channel schemas through the C API, on all five kinds: a created channel stores its schema
 * and every handle reads it back; an opener with the same schema or none opens it, one with
 * another (or with one, on a channel without) gets SHMBUS_SCHEMA_MISMATCH naming both; schema
 * data of exactly SHMBUS_SCHEMA_MAX_DATA bytes is stored and one byte more is
 * SHMBUS_INVALID_CONFIG; invalid texts are refused with a message. */
#include <stdint.h>

#include "check.h"

static const char IMU_TEXT[] = "std_msgs/Header header\nfloat64[3] linear_acceleration\n";

/* The text `len` bytes at `p` equals `want`. */
static int text_is(const char *p, size_t len, const char *want) {
    return len == strlen(want) && (len == 0 || memcmp(p, want, len) == 0);
}

static void check_imu(const shmbus_schema *s) {
    CHECK(text_is(s->message_encoding, s->message_encoding_len, "cdr"));
    CHECK(text_is(s->name, s->name_len, "sensor_msgs/msg/Imu"));
    CHECK(text_is(s->encoding, s->encoding_len, "ros2msg"));
    CHECK(s->data_len == strlen(IMU_TEXT) && memcmp(s->data, IMU_TEXT, s->data_len) == 0);
}

static void check_none(const shmbus_schema *s) {
    CHECK(s->message_encoding == NULL && s->message_encoding_len == 0 && s->name == NULL && s->encoding == NULL);
    CHECK(s->data == NULL && s->data_len == 0);
}

/* The schema setters of the five configs, and the matching opens and getters, behind one
 * shape so that each kind runs the same checks. */
enum kind { TOPIC, QUEUE, STREAM, POOL, JOURNAL };
static const char *const KIND_NAMES[] = {"topic", "queue", "stream", "pool", "journal"};

struct config {
    enum kind kind;
    void *p;
};

static struct config config_new(enum kind k) {
    struct config c = {k, NULL};
    switch (k) {
    case TOPIC: OK(shmbus_topic_config_new((shmbus_topic_config **)&c.p)); break;
    case QUEUE: OK(shmbus_queue_config_new((shmbus_queue_config **)&c.p)); break;
    case STREAM: OK(shmbus_stream_config_new((shmbus_stream_config **)&c.p)); break;
    case POOL: OK(shmbus_pool_config_new((shmbus_pool_config **)&c.p)); break;
    case JOURNAL: OK(shmbus_journal_config_new((shmbus_journal_config **)&c.p)); break;
    }
    return c;
}

static shmbus_status set_schema(struct config c, const char *me, const char *name, const char *enc, const void *data,
                                size_t len) {
    switch (c.kind) {
    case TOPIC: return shmbus_topic_config_set_schema(c.p, me, name, enc, data, len);
    case QUEUE: return shmbus_queue_config_set_schema(c.p, me, name, enc, data, len);
    case STREAM: return shmbus_stream_config_set_schema(c.p, me, name, enc, data, len);
    case POOL: return shmbus_pool_config_set_schema(c.p, me, name, enc, data, len);
    case JOURNAL: return shmbus_journal_config_set_schema(c.p, me, name, enc, data, len);
    }
    return SHMBUS_UNKNOWN;
}

static void config_free(struct config c) {
    switch (c.kind) {
    case TOPIC: shmbus_topic_config_free(c.p); break;
    case QUEUE: shmbus_queue_config_free(c.p); break;
    case STREAM: shmbus_stream_config_free(c.p); break;
    case POOL: shmbus_pool_config_free(c.p); break;
    case JOURNAL: shmbus_journal_config_free(c.p); break;
    }
}

/* A config of `k` with the IMU schema (or, for `which` 1, a protobuf one; 0: none). */
static struct config with_schema(enum kind k, int which) {
    struct config c = config_new(k);
    if (which == 2) OK(set_schema(c, "cdr", "sensor_msgs/msg/Imu", "ros2msg", IMU_TEXT, strlen(IMU_TEXT)));
    if (which == 1) OK(set_schema(c, "protobuf", "foxglove.RawImage", "protobuf", "\x0a\x03" "abc", 5));
    return c;
}

struct channel {
    enum kind kind;
    void *p;
};

/* Opens (or creates) channel `name` of kind `c.kind` with config `c`: for a journal, `name`
 * is a directory under `root`. */
static shmbus_status open_with(shmbus_domain *d, const char *root, const char *name, struct config c,
                               struct channel *out) {
    out->kind = c.kind;
    out->p = NULL;
    char dir[4096];
    switch (c.kind) {
    case TOPIC: return shmbus_topic_create_or_open(d, name, c.p, (shmbus_topic **)&out->p);
    case QUEUE: return shmbus_queue_create_or_open(d, name, c.p, (shmbus_queue **)&out->p);
    case STREAM: return shmbus_stream_create_or_open(d, name, c.p, (shmbus_stream **)&out->p);
    case POOL: return shmbus_pool_create_or_open(d, name, c.p, (shmbus_pool **)&out->p);
    case JOURNAL:
        snprintf(dir, sizeof dir, "%s/%s", root, name);
        return shmbus_journal_create_or_open(dir, c.p, (shmbus_journal **)&out->p);
    }
    return SHMBUS_UNKNOWN;
}

static shmbus_status schema_of(struct channel ch, shmbus_schema *out) {
    switch (ch.kind) {
    case TOPIC: return shmbus_topic_schema(ch.p, out);
    case QUEUE: return shmbus_queue_schema(ch.p, out);
    case STREAM: return shmbus_stream_schema(ch.p, out);
    case POOL: return shmbus_pool_schema(ch.p, out);
    case JOURNAL: return shmbus_journal_schema(ch.p, out);
    }
    return SHMBUS_UNKNOWN;
}

static void channel_free(struct channel ch) {
    switch (ch.kind) {
    case TOPIC: shmbus_topic_free(ch.p); break;
    case QUEUE: shmbus_queue_free(ch.p); break;
    case STREAM: shmbus_stream_free(ch.p); break;
    case POOL: shmbus_pool_free(ch.p); break;
    case JOURNAL: shmbus_journal_free(ch.p); break;
    }
}

/* Opens `name` with a config of schema `which` and checks the code. */
static void open_expect(shmbus_domain *d, const char *root, const char *name, enum kind k, int which,
                        shmbus_status code) {
    struct config c = with_schema(k, which);
    struct channel ch;
    EXPECT(open_with(d, root, name, c, &ch), code);
    channel_free(ch);
    config_free(c);
}

static void every_kind(shmbus_domain *d, const char *root, enum kind k) {
    char name[64];
    snprintf(name, sizeof name, "%s-imu", KIND_NAMES[k]);

    /* Created with the IMU schema: read back through the creator's handle. */
    struct config c = with_schema(k, 2);
    struct channel created;
    OK(open_with(d, root, name, c, &created));
    config_free(c);
    shmbus_schema s;
    OK(schema_of(created, &s));
    check_imu(&s);

    /* The same schema and none open it (and read it back); another is a mismatch naming both. */
    struct config none = with_schema(k, 0);
    struct channel opened;
    OK(open_with(d, root, name, none, &opened));
    config_free(none);
    memset(&s, 0, sizeof s);
    OK(schema_of(opened, &s));
    check_imu(&s);
    channel_free(opened);
    open_expect(d, root, name, k, 2, SHMBUS_OK);
    open_expect(d, root, name, k, 1, SHMBUS_SCHEMA_MISMATCH);
    ERROR_MENTIONS("sensor_msgs/msg/Imu");
    ERROR_MENTIONS("foxglove.RawImage");
    CHECK(strcmp(shmbus_status_name(SHMBUS_SCHEMA_MISMATCH), "SHMBUS_SCHEMA_MISMATCH") == 0);
    /* The creator's schema is still readable after those opens. */
    OK(schema_of(created, &s));
    check_imu(&s);
    channel_free(created);

    /* A channel without a schema: none read back, and an opener asking for one is refused. */
    snprintf(name, sizeof name, "%s-plain", KIND_NAMES[k]);
    struct config plain = with_schema(k, 0);
    struct channel ch;
    OK(open_with(d, root, name, plain, &ch));
    config_free(plain);
    memset(&s, 0xa5, sizeof s);
    EXPECT(schema_of(ch, &s), SHMBUS_NOT_FOUND);
    ERROR_MENTIONS("no schema");
    check_none(&s);
    channel_free(ch);
    open_expect(d, root, name, k, 2, SHMBUS_SCHEMA_MISMATCH);
    ERROR_MENTIONS("no schema");

    /* Schema data of exactly the limit is stored whole; one byte more is refused. */
    uint8_t *big = malloc(SHMBUS_SCHEMA_MAX_DATA + 1);
    CHECK(big != NULL);
    for (size_t i = 0; i <= SHMBUS_SCHEMA_MAX_DATA; i++) big[i] = (uint8_t)(i * 7 + 3);
    struct config bc = config_new(k);
    EXPECT(set_schema(bc, "protobuf", "big.Message", "protobuf", big, SHMBUS_SCHEMA_MAX_DATA + 1),
           SHMBUS_INVALID_CONFIG);
    ERROR_MENTIONS("1048577");
    OK(set_schema(bc, "protobuf", "big.Message", "protobuf", big, SHMBUS_SCHEMA_MAX_DATA));
    snprintf(name, sizeof name, "%s-big", KIND_NAMES[k]);
    struct channel bch;
    OK(open_with(d, root, name, bc, &bch));
    config_free(bc);
    OK(schema_of(bch, &s));
    CHECK(s.data_len == SHMBUS_SCHEMA_MAX_DATA && memcmp(s.data, big, SHMBUS_SCHEMA_MAX_DATA) == 0);
    CHECK(text_is(s.name, s.name_len, "big.Message"));
    channel_free(bch);
    free(big);

    /* Invalid schemas leave the config as it was (here: no schema, so the open works). */
    struct config bad = config_new(k);
    EXPECT(set_schema(bad, "", "x", "", NULL, 0), SHMBUS_INVALID_CONFIG);
    ERROR_MENTIONS("message encoding");
    EXPECT(set_schema(bad, "cdr", "two\nlines", "ros2msg", "x", 1), SHMBUS_INVALID_CONFIG);
    ERROR_MENTIONS("control character");
    char long_name[SHMBUS_SCHEMA_MAX_TEXT + 2];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    EXPECT(set_schema(bad, "cdr", long_name, "ros2msg", "x", 1), SHMBUS_INVALID_CONFIG);
    long_name[SHMBUS_SCHEMA_MAX_TEXT] = '\0'; /* exactly the limit: fine */
    OK(set_schema(bad, "cdr", long_name, "ros2msg", "x", 1));
    EXPECT(set_schema(bad, "json", NULL, NULL, "x", 1), SHMBUS_INVALID_CONFIG);
    ERROR_MENTIONS("without a schema encoding");
    EXPECT(set_schema(bad, NULL, "x", "y", NULL, 0), SHMBUS_INVALID_ARGUMENT);
    EXPECT(set_schema(bad, "cdr", "x", "y", NULL, 3), SHMBUS_INVALID_ARGUMENT);
    snprintf(name, sizeof name, "%s-long", KIND_NAMES[k]);
    struct channel lch;
    OK(open_with(d, root, name, bad, &lch));
    config_free(bad);
    OK(schema_of(lch, &s));
    CHECK(s.name_len == SHMBUS_SCHEMA_MAX_TEXT);
    channel_free(lch);

    /* A plain json schema: NULL name and encoding are empty texts. */
    struct config js = config_new(k);
    OK(set_schema(js, "json", NULL, NULL, NULL, 0));
    snprintf(name, sizeof name, "%s-json", KIND_NAMES[k]);
    struct channel jch;
    OK(open_with(d, root, name, js, &jch));
    config_free(js);
    OK(schema_of(jch, &s));
    CHECK(text_is(s.message_encoding, s.message_encoding_len, "json") && s.name_len == 0 && s.encoding_len == 0);
    CHECK(s.data_len == 0);
    channel_free(jch);
}

int main(int argc, char **argv) {
    shmbus_domain *d = test_domain(argc, argv, "cschema");
    for (int k = TOPIC; k <= JOURNAL; k++) every_kind(d, argv[1], (enum kind)k);

    /* NULL handles and outputs are argument errors. */
    shmbus_schema s;
    EXPECT(shmbus_topic_schema(NULL, &s), SHMBUS_INVALID_ARGUMENT);
    EXPECT(shmbus_queue_config_set_schema(NULL, "cdr", "", "", NULL, 0), SHMBUS_INVALID_ARGUMENT);
    shmbus_topic *t = NULL;
    OK(shmbus_topic_open(d, "topic-imu", &t));
    EXPECT(shmbus_topic_schema(t, NULL), SHMBUS_INVALID_ARGUMENT);
    shmbus_topic_free(t);

    shmbus_domain_free(d);
    printf("schema: ok\n");
    return 0;
}
