// The camera frame pipeline's message: a small header, then 1920x1080 RGB pixels, one frame
// per topic message (about 6 MB). Shared by camera_publisher.cpp and camera_subscriber.cpp.
#ifndef CAMERA_FRAME_HPP
#define CAMERA_FRAME_HPP

#include <shmbus.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

namespace camera {

constexpr std::uint32_t width = 1920, height = 1080, channels = 3;
constexpr std::size_t pixel_bytes = std::size_t{width} * height * channels;

struct header {
    std::uint64_t frame;     // 0, 1, 2, ...
    std::uint64_t checksum;  // FNV-1a of the pixels
    std::uint32_t width, height, channels, reserved;
};

constexpr std::size_t message_len = sizeof(header) + pixel_bytes;

inline std::uint64_t fnv1a(const std::uint8_t *p, std::size_t n) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

// The topic, as both sides open it: one frame per message, a history of 4 frames.
inline shmbus::topic open_topic(const std::string &root, const std::string &domain, const std::string &name) {
    shmbus::domain d = root == "-" ? shmbus::domain(domain) : shmbus::domain(domain, root);
    shmbus::topic_config config;
    config.max_message_len = message_len;
    config.history = 4;
    return shmbus::topic::create_or_open(d, name, config);
}

// Runs `body`, reporting an error (code and message) with exit status 1.
template <class F> int run(F &&body) {
    try {
        body();
        return 0;
    } catch (const shmbus::error &e) {
        std::cerr << e.name() << ": " << e.what() << "\n";
    } catch (const std::exception &e) {
        std::cerr << e.what() << "\n";
    }
    return 1;
}

}  // namespace camera

#endif
