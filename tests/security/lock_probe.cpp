// Takes a device lock as the tools do (drivers/pci/device_lock), for the attack suite:
//   lock_probe KEY          lock KEY, print "locked <path>", release; exit 0
//   lock_probe KEY hold     lock KEY, print "locked <path>", hold it until stdin closes
//   lock_probe --owner KEY  print the pid holding KEY's lock, or "none"
// A refusal prints "refused: <message>" and exits 1.
#include "base/error.hpp"
#include "drivers/pci/device_lock.hpp"

#include <cstdio>
#include <string>
#include <unistd.h>

using baregpu::pci::DeviceLock;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: lock_probe KEY [hold] | --owner KEY\n");
        return 2;
    }
    try {
        if (std::string(argv[1]) == "--owner" && argc == 3) {
            auto owner = DeviceLock::owner_of(argv[2]);
            if (owner) {
                std::printf("%d\n", static_cast<int>(*owner));
            } else {
                std::printf("none\n");
            }
            return 0;
        }
        DeviceLock lock = DeviceLock::acquire(argv[1]);
        std::printf("locked %s\n", lock.path().c_str());
        std::fflush(stdout);
        if (argc > 2 && std::string(argv[2]) == "hold") {
            char c;
            while (::read(0, &c, 1) > 0) {
            }
        }
        return 0;
    } catch (const baregpu::Error& e) {
        std::printf("refused: %s\n", e.what());
        return 1;
    }
}
