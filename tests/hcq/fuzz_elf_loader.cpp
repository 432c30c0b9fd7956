// libFuzzer target for the CPU device's ELF loader (built with clang by tests/hcq/meson.build):
// every input must be rejected with baregpu::Error or parse, lay out and link inside its image.
#include "base/error.hpp"
#include "drivers/hostcode/elf_loader.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace baregpu;
    try {
        auto object = hostcode::ElfObject::parse({reinterpret_cast<const std::byte*>(data), size}, "cpu", "fuzz input");
        std::vector<std::byte> image(object.layout().size);
        static const hostcode::Import imports[] = {{"memcpy", reinterpret_cast<uint64_t>(&::memcpy)},
                                              {"memset", reinterpret_cast<uint64_t>(&::memset)}};
        object.link(image, 0x7f0000000000ull, imports);
    } catch (const Error&) {
    }
    return 0;
}
