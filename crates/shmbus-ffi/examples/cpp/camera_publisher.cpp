// A camera: publishes FRAMES frames of 1920x1080 RGB to topic NAME, each written in place in
// a loaned slot of shared memory (zero-copy: no frame buffer of its own), with its checksum
// in the header. Prints "published FRAMES".
//
//   camera_publisher ROOT DOMAIN NAME FRAMES      (ROOT "-": the default, /dev/shm)
#include "camera_frame.hpp"

#include <cstring>

int main(int argc, char **argv) {
    if (argc != 5) {
        std::cerr << "usage: " << argv[0] << " ROOT DOMAIN NAME FRAMES\n";
        return 2;
    }
    return camera::run([&] {
        const std::uint64_t frames = std::strtoull(argv[4], nullptr, 10);
        shmbus::publisher camera = camera::open_topic(argv[1], argv[2], argv[3]).publisher();
        for (std::uint64_t f = 0; f < frames; f++) {
            shmbus::loan slot = camera.loan();  // the next slot, mapped in this process
            std::uint8_t *pixels = slot.data() + sizeof(camera::header);
            for (std::size_t i = 0; i < camera::pixel_bytes; i++)  // "capture": a moving gradient
                pixels[i] = static_cast<std::uint8_t>((i % (camera::width * camera::channels)) + f * 7);
            camera::header h{f, camera::fnv1a(pixels, camera::pixel_bytes), camera::width, camera::height,
                             camera::channels, 0};
            std::memcpy(slot.data(), &h, sizeof h);
            slot.send(camera::message_len);  // publish: subscribers see the slot itself
        }
        std::cout << "published " << frames << "\n";
    });
}
