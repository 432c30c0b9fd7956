// A host code object made runnable: parsed by ElfObject, linked into fresh host memory at its own
// address (kernels may call memcpy, memmove, memset and memcmp), then protected W^X — code
// read+execute, constants read-only, data writable. What the simulated GPUs keep per
// (image_va, image_hash) in their caches. The memory is released with the object.
#pragma once

#include "drivers/hostcode/elf_loader.hpp"
#include "drivers/hostcode/kernel_abi.h"

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace baregpu::hostcode {

class LoadedObject {
public:
    // Throws baregpu::Error (device `device`, naming `origin`) for a malformed object, SystemError
    // when the host refuses the memory or its protection.
    static std::shared_ptr<LoadedObject> load(std::span<const std::byte> bytes, const std::string& device,
                                              const std::string& origin);
    ~LoadedObject();
    LoadedObject(const LoadedObject&) = delete;
    LoadedObject& operator=(const LoadedObject&) = delete;

    const ElfObject& object() const { return object_; }
    // The kernel named `name`, or nullptr.
    const KernelEntry* find(std::string_view name) const;
    baregpu_kernel_fn entry(const KernelEntry& kernel) const;

private:
    LoadedObject(ElfObject object, void* memory, size_t bytes);
    ElfObject object_;
    void* memory_;
    size_t bytes_;
};

}  // namespace baregpu::hostcode
