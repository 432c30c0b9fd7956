#include "drivers/hostcode/loaded_object.hpp"

#include "base/error.hpp"

#include <cerrno>
#include <cstring>
#include <sys/mman.h>

namespace baregpu::hostcode {

LoadedObject::LoadedObject(ElfObject object, void* memory, size_t bytes)
    : object_(std::move(object)), memory_(memory), bytes_(bytes) {}

LoadedObject::~LoadedObject() { ::munmap(memory_, bytes_); }

std::shared_ptr<LoadedObject> LoadedObject::load(std::span<const std::byte> bytes, const std::string& device,
                                                 const std::string& origin) {
    ElfObject object = ElfObject::parse(bytes, device, origin);
    const ElfObject::Layout& layout = object.layout();
    void* memory = ::mmap(nullptr, layout.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw SystemError(device, "cannot map host memory for " + origin, errno);
    std::shared_ptr<LoadedObject> loaded(new LoadedObject(std::move(object), memory, layout.size));
    static const Import imports[] = {
        {"memcpy", reinterpret_cast<uint64_t>(&::memcpy)},
        {"memmove", reinterpret_cast<uint64_t>(&::memmove)},
        {"memset", reinterpret_cast<uint64_t>(&::memset)},
        {"memcmp", reinterpret_cast<uint64_t>(&::memcmp)},
    };
    auto* base = static_cast<std::byte*>(memory);
    loaded->object_.link({base, layout.size}, reinterpret_cast<uint64_t>(base), imports);
    if (::mprotect(base + layout.exec_begin, layout.ro_begin - layout.exec_begin, PROT_READ | PROT_EXEC) != 0 ||
        ::mprotect(base + layout.ro_begin, layout.rw_begin - layout.ro_begin, PROT_READ) != 0) {
        throw SystemError(device, "cannot protect the host memory of " + origin, errno);
    }
    return loaded;
}

const KernelEntry* LoadedObject::find(std::string_view name) const {
    for (const KernelEntry& k : object_.kernels()) {
        if (k.name == name) return &k;
    }
    return nullptr;
}

baregpu_kernel_fn LoadedObject::entry(const KernelEntry& kernel) const {
    return reinterpret_cast<baregpu_kernel_fn>(reinterpret_cast<uintptr_t>(memory_) + kernel.offset);
}

}  // namespace baregpu::hostcode
