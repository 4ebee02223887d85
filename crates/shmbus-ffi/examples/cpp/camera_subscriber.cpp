// A vision node: reads the camera's frames from topic NAME in place (each a pinned sample in
// shared memory, never copied), checks every frame's checksum, and stops after frame
// FRAMES-1. A frame overwritten before it was read (the node fell behind) is counted as
// skipped. Prints "ready" once subscribed, then "checked N skipped S last F".
//
//   camera_subscriber ROOT DOMAIN NAME FRAMES     (ROOT "-": the default, /dev/shm)
#include "camera_frame.hpp"

#include <chrono>
#include <cstring>

int main(int argc, char **argv) {
    if (argc != 5) {
        std::cerr << "usage: " << argv[0] << " ROOT DOMAIN NAME FRAMES\n";
        return 2;
    }
    return camera::run([&] {
        const std::uint64_t frames = std::strtoull(argv[4], nullptr, 10);
        shmbus::subscriber node = camera::open_topic(argv[1], argv[2], argv[3]).subscriber();
        std::cout << "ready" << std::endl;
        std::uint64_t checked = 0, skipped = 0, last = 0;
        while (checked + skipped < frames) {
            std::optional<shmbus::sample> frame;
            try {
                frame = node.recv_ref(std::chrono::seconds(30));
            } catch (const shmbus::error &e) {
                if (e.code() != SHMBUS_LAGGED) throw;
                skipped += e.value();  // overwritten unread; the next receive goes on
                continue;
            }
            if (!frame) throw std::runtime_error("no frame for 30 s");
            if (frame->size() != camera::message_len) throw std::runtime_error("a message of the wrong size");
            camera::header h;
            std::memcpy(&h, frame->data(), sizeof h);
            const std::uint8_t *pixels = frame->data() + sizeof h;  // in shared memory, pinned
            if (h.width != camera::width || h.height != camera::height || h.channels != camera::channels ||
                camera::fnv1a(pixels, camera::pixel_bytes) != h.checksum)
                throw std::runtime_error("frame " + std::to_string(h.frame) + ": bad checksum");
            if (h.frame != checked + skipped)
                throw std::runtime_error("frame " + std::to_string(h.frame) + " out of order");
            checked++;
            last = h.frame;
        }
        std::cout << "checked " << checked << " skipped " << skipped << " last " << last << "\n";
    });
}
