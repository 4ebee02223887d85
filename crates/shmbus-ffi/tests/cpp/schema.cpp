// Channel schemas through the C++ API on all five kinds: shmbus::schema on the config,
// schema() on the channel (std::nullopt for none), another schema than the channel's thrown as
// shmbus::error with SHMBUS_SCHEMA_MISMATCH, an invalid one as SHMBUS_INVALID_CONFIG, and
// schema data of exactly SHMBUS_SCHEMA_MAX_DATA bytes stored whole.
#include "check.hpp"

#include <string>
#include <vector>

namespace {

const std::string IMU_TEXT = "std_msgs/Header header\nfloat64[3] linear_acceleration\n";

shmbus::schema imu() { return {"cdr", "sensor_msgs/msg/Imu", "ros2msg", IMU_TEXT}; }
shmbus::schema image() { return {"protobuf", "foxglove.RawImage", "protobuf", std::string("\x0a\x03" "abc")}; }

bool mentions(const shmbus::error &e, const char *part) { return std::strstr(e.what(), part) != nullptr; }

// One kind's checks, through `open(name, schema)` which opens (or creates) the channel with
// a config carrying `schema` (or none) and returns its schema().
template <class Open> void every_kind(const char *kind, Open open) {
    std::string name = std::string(kind) + "-imu";
    CHECK(open(name, imu()) == imu());
    CHECK(open(name, std::nullopt) == imu());
    CHECK(open(name, imu()) == imu());
    EXPECT_ERROR(open(name, image()), SHMBUS_SCHEMA_MISMATCH, {
        CHECK(mentions(e, "sensor_msgs/msg/Imu"));
        CHECK(mentions(e, "foxglove.RawImage"));
        CHECK(std::strcmp(e.name(), "SHMBUS_SCHEMA_MISMATCH") == 0);
    });

    std::string plain = std::string(kind) + "-plain";
    CHECK(!open(plain, std::nullopt));
    EXPECT_ERROR(open(plain, imu()), SHMBUS_SCHEMA_MISMATCH, CHECK(mentions(e, "no schema")));

    std::vector<std::uint8_t> data(SHMBUS_SCHEMA_MAX_DATA + 1);
    for (std::size_t i = 0; i < data.size(); i++) data[i] = static_cast<std::uint8_t>(i * 7 + 3);
    shmbus::schema over{"protobuf", "big.Message", "protobuf", data};
    EXPECT_ERROR(open(std::string(kind) + "-over", over), SHMBUS_INVALID_CONFIG, CHECK(mentions(e, "1048577")));
    data.pop_back();
    shmbus::schema big{"protobuf", "big.Message", "protobuf", data};
    std::optional<shmbus::schema> got = open(std::string(kind) + "-big", big);
    CHECK(got && got->data.size() == SHMBUS_SCHEMA_MAX_DATA && *got == big);

    EXPECT_ERROR(open(std::string(kind) + "-bad", shmbus::schema{"cdr", "two\nlines"}), SHMBUS_INVALID_CONFIG,
                 CHECK(mentions(e, "control character")));
    EXPECT_ERROR(open(std::string(kind) + "-bad", shmbus::schema{}), SHMBUS_INVALID_CONFIG,
                 CHECK(mentions(e, "message encoding")));
    std::optional<shmbus::schema> json = open(std::string(kind) + "-json", shmbus::schema{"json"});
    CHECK(json && json->message_encoding == "json" && json->name.empty() && json->encoding.empty() &&
          json->data.empty());
}

}  // namespace

int main(int argc, char **argv) {
    return run_test(argc, argv, "schema", [](const std::string &root) {
        shmbus::domain d("cppschema", root);
        CHECK(imu() == imu() && imu() != image());

        every_kind("topic", [&](const std::string &name, std::optional<shmbus::schema> s) {
            shmbus::topic_config cfg;
            cfg.schema = std::move(s);
            return shmbus::topic::create_or_open(d, name, cfg).schema();
        });
        every_kind("queue", [&](const std::string &name, std::optional<shmbus::schema> s) {
            shmbus::queue_config cfg;
            cfg.schema = std::move(s);
            return shmbus::queue::create_or_open(d, name, cfg).schema();
        });
        every_kind("stream", [&](const std::string &name, std::optional<shmbus::schema> s) {
            shmbus::stream_config cfg;
            cfg.schema = std::move(s);
            return shmbus::stream::create_or_open(d, name, cfg).schema();
        });
        every_kind("pool", [&](const std::string &name, std::optional<shmbus::schema> s) {
            shmbus::pool_config cfg;
            cfg.schema = std::move(s);
            return shmbus::pool::create_or_open(d, name, cfg).schema();
        });
        every_kind("journal", [&](const std::string &name, std::optional<shmbus::schema> s) {
            shmbus::journal_config cfg;
            cfg.schema = std::move(s);
            return shmbus::journal::create_or_open(root + "/" + name, cfg).schema();
        });

        // open() without a config reads the creator's schema too.
        CHECK(shmbus::topic::open(d, "topic-imu").schema() == imu());
        CHECK(!shmbus::queue::open(d, "queue-plain").schema());
        CHECK(shmbus::journal::open(root + "/journal-imu").schema() == imu());
    });
}
