// A publisher for the shell and other languages: publishes COUNT text messages "message 0",
// "message 1", ... to topic NAME (created with the defaults if missing; an existing topic
// keeps its settings), then prints "published COUNT last seq S". Any subscriber reads them:
// `shmbus sub`, a Python or a C program.
//
//   text_publisher ROOT DOMAIN NAME COUNT      (ROOT "-": the default, /dev/shm)
#include <shmbus.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

int main(int argc, char **argv) {
    if (argc != 5) {
        std::cerr << "usage: " << argv[0] << " ROOT DOMAIN NAME COUNT\n";
        return 2;
    }
    try {
        const std::string root = argv[1];
        shmbus::domain d = root == "-" ? shmbus::domain(argv[2]) : shmbus::domain(argv[2], root);
        shmbus::publisher p = shmbus::topic::create_or_open(d, argv[3]).publisher();
        const unsigned long count = std::strtoul(argv[4], nullptr, 10);
        std::uint64_t seq = 0;
        for (unsigned long i = 0; i < count; i++) seq = p.send("message " + std::to_string(i));
        std::cout << "published " << count << " last seq " << seq << "\n";
        return 0;
    } catch (const shmbus::error &e) {
        std::cerr << e.name() << ": " << e.what() << "\n";
        return 1;
    }
}
