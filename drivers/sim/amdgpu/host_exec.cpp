#include "drivers/sim/amdgpu/host_exec.hpp"

#include "base/error.hpp"
#include "drivers/hostcode/loaded_object.hpp"
#include "drivers/hostcode/host_program.h"
#include "drivers/hostcode/kernel_abi.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <sys/mman.h>
#include <thread>

namespace baregpu::sim::amdgpu {

namespace {
constexpr uint64_t kPage = 4096;
// Model limits (not hardware ones): how many loaded images stay cached, how large an image may be.
constexpr size_t kImageCacheEntries = 32;
constexpr uint64_t kMaxImageBytes = 64ull << 20;
constexpr uint32_t kMaxKernargBytes = 4096;
}  // namespace

struct HostExecutor::Image {
    std::shared_ptr<hostcode::LoadedObject> loaded;
    uint64_t last_use = 0;
};

HostExecutor::HostExecutor(Chip& chip, Gmc& gmc, int vram_fd, uint64_t vram_file_offset)
    : chip_(chip), gmc_(gmc), vram_fd_(vram_fd), vram_file_offset_(vram_file_offset) {}

HostExecutor::~HostExecutor() { drop_mirror(); }

void HostExecutor::reset() {
    if (busy_) {
        reset_pending_ = true;  // the running kernel uses the mirror and its image
        return;
    }
    drop_mirror();
    images_.clear();
}

void HostExecutor::drop_mirror() {
    for (Window& w : windows_) ::munmap(w.host, w.bytes + kPage);
    windows_.clear();
    mirror_valid_ = false;
}

HostExecutor::MirrorKey HostExecutor::mirror_key() {
    const RegisterMap::Hub& h = chip_.reg.gc;
    MirrorKey k;
    k.regs = {chip_.load(h.context0_cntl), chip_.load(h.pt_base_lo), chip_.load(h.pt_base_hi), chip_.load(h.pt_start_lo),
              chip_.load(h.pt_start_hi),   chip_.load(h.pt_end_lo),   chip_.load(h.pt_end_hi),  0};
    k.invalidations = chip_.state().gmc.gc_invalidations;
    return k;
}

void HostExecutor::rebuild_mirror() {
    drop_mirror();
    // Extents of VRAM-backed VA, coalesced where both VA and VRAM are consecutive (one mapping
    // each: the kernel's vm.max_map_count is finite).
    std::vector<Extent> extents;
    auto add = [&](uint64_t va, uint64_t bytes, uint64_t target, bool writeable, std::byte* system) {
        if (!extents.empty()) {
            Extent& e = extents.back();
            if (e.va + e.bytes == va && e.target + e.bytes == target && e.writeable == writeable &&
                (e.system == nullptr) == (system == nullptr) && (system == nullptr || e.system + e.bytes == system)) {
                e.bytes += bytes;
                return;
            }
        }
        extents.push_back({va, bytes, target, writeable, system});
    };
    // The system aperture first: translate() gives it priority over the page table.
    const uint64_t aperture_end = kFbBase + kVramBytes;
    gmc_.for_each_leaf(VmClient::gfx, [&](uint64_t va, uint64_t bytes, const Gmc::Translation& t) {
        if (va < aperture_end && va + bytes > kFbBase) return;
        if (t.system) {
            // Host memory the bus can hand over as one range; otherwise not mirrored (a fault).
            std::byte* host = chip_.port ? chip_.port->dma_host_memory(BusAddress(t.address), bytes) : nullptr;
            if (host != nullptr && reinterpret_cast<uintptr_t>(host) % kPage == 0) add(va, bytes, t.address, t.writeable, host);
            return;
        }
        if (t.address >= kVramBytes) return;
        add(va, std::min(bytes, kVramBytes - t.address), t.address, t.writeable, nullptr);
    });
    extents.push_back({kFbBase, kVramBytes, 0, true, nullptr});
    std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.va < b.va; });
    // Windows: runs of VA-consecutive extents, each one reservation with a guard page after it.
    for (const Extent& e : extents) {
        if (windows_.empty() || windows_.back().va + windows_.back().bytes != e.va) windows_.push_back({e.va, 0, nullptr, {}});
        windows_.back().bytes += e.bytes;
        windows_.back().extents.push_back(e);
    }
    for (Window& w : windows_) {
        void* p = ::mmap(nullptr, w.bytes + kPage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw SystemError("sim-am", fmt::format("cannot reserve {} bytes for the host mirror", w.bytes), errno);
        w.host = static_cast<std::byte*>(p);
        for (const Extent& e : w.extents) {
            void* at = w.host + (e.va - w.va);
            const int prot = PROT_READ | (e.writeable ? PROT_WRITE : 0);
            if (e.system != nullptr) {
                // A second mapping of the driver's shared host pages (mremap with old size 0).
                void* m = ::mremap(e.system, 0, e.bytes, MREMAP_MAYMOVE | MREMAP_FIXED, at);
                if (m == MAP_FAILED) continue;  // a private mapping cannot be aliased: left PROT_NONE (faults)
                if (!e.writeable) ::mprotect(at, e.bytes, PROT_READ);
                continue;
            }
            void* m = ::mmap(at, e.bytes, prot, MAP_SHARED | MAP_FIXED, vram_fd_, static_cast<off_t>(vram_file_offset_ + e.target));
            if (m == MAP_FAILED) throw SystemError("sim-am", "cannot map VRAM into the host mirror", errno);
        }
    }
    key_ = mirror_key();
    mirror_valid_ = true;
}

std::byte* HostExecutor::mirrored(uint64_t va, uint64_t& target) const {
    auto w = std::upper_bound(windows_.begin(), windows_.end(), va, [](uint64_t v, const Window& x) { return v < x.va; });
    if (w == windows_.begin()) return nullptr;
    --w;
    if (va - w->va >= w->bytes) return nullptr;
    auto e = std::upper_bound(w->extents.begin(), w->extents.end(), va, [](uint64_t v, const Extent& x) { return v < x.va; });
    --e;  // the window starts with its first extent
    target = e->target + (va - e->va);
    return w->host + (va - w->va);
}

std::shared_ptr<HostExecutor::Image> HostExecutor::load(uint64_t image_va, uint64_t image_size, uint64_t image_hash,
                                                        std::string& what) {
    auto key = std::make_pair(image_va, image_hash);
    if (auto it = images_.find(key); it != images_.end()) {
        it->second->last_use = ++use_counter_;
        return it->second;
    }
    if (image_size == 0 || image_size > kMaxImageBytes) {
        what = fmt::format("image_size {} is 0 or above the model's {} byte limit", image_size, kMaxImageBytes);
        return nullptr;
    }
    std::vector<std::byte> bytes(image_size);
    if (!gmc_.access(image_va, bytes, false, VmClient::gfx)) {
        what = fmt::format("the code object at {} ({} bytes) is not mapped", hex(image_va), image_size);
        return nullptr;
    }
    const uint64_t hash = baregpu_host_program_hash(bytes.data(), bytes.size());
    if (hash != image_hash) {
        what = fmt::format("image_hash {} does not match the FNV-1a 64 of the {} image bytes at {} ({})", hex(image_hash),
                           image_size, hex(image_va), hex(hash));
        return nullptr;
    }
    try {
        auto image = std::make_shared<Image>();
        image->loaded = hostcode::LoadedObject::load(bytes, "sim-am", fmt::format("code object at {}", hex(image_va)));
        if (images_.size() >= kImageCacheEntries) {
            auto oldest = std::min_element(images_.begin(), images_.end(),
                                           [](const auto& a, const auto& b) { return a.second->last_use < b.second->last_use; });
            images_.erase(oldest);
        }
        image->last_use = ++use_counter_;
        images_[key] = image;
        return image;
    } catch (const SystemError&) {
        throw;  // the host, not the driver, failed
    } catch (const Error& e) {
        what = e.what();
        return nullptr;
    }
}

HostExecutor::Outcome HostExecutor::run(const Dispatch& d, std::string& what) {
    // The descriptor.
    baregpu_host_program prog{};
    if (!gmc_.access(d.program, std::as_writable_bytes(std::span(&prog, 1)), false, VmClient::gfx)) {
        what = fmt::format("the host program descriptor at COMPUTE_PGM {} is not mapped", hex(d.program));
        return Outcome::refused;  // the page fault is posted too
    }
    if (d.program % BAREGPU_HOST_PROGRAM_ALIGN != 0) {
        what = fmt::format("the host program descriptor at {} is not {}-byte aligned", hex(d.program), BAREGPU_HOST_PROGRAM_ALIGN);
        return Outcome::refused;
    }
    if (prog.magic != BAREGPU_HOST_PROGRAM_MAGIC || prog.version != BAREGPU_HOST_PROGRAM_VERSION) {
        what = fmt::format("COMPUTE_PGM {} is not a host program: magic {} version {} (want {} version {})", hex(d.program),
                           hex(prog.magic), prog.version, hex(BAREGPU_HOST_PROGRAM_MAGIC), BAREGPU_HOST_PROGRAM_VERSION);
        return Outcome::refused;
    }
    const char* nul = static_cast<const char*>(std::memchr(prog.kernel, 0, sizeof prog.kernel));
    if (nul == nullptr || nul == prog.kernel) {
        what = "the host program's kernel name is empty or not NUL-terminated";
        return Outcome::refused;
    }
    const std::string kernel_name(prog.kernel, static_cast<size_t>(nul - prog.kernel));

    // The code object and the kernel.
    std::shared_ptr<Image> image = load(prog.image_va, prog.image_size, prog.image_hash, what);
    if (!image) return Outcome::refused;
    const hostcode::KernelEntry* k = nullptr;
    k = image->loaded->find(kernel_name);
    if (k == nullptr) {
        what = fmt::format("the code object at {} has no kernel '{}'", hex(prog.image_va), kernel_name);
        return Outcome::refused;
    }
    const uint64_t threads = uint64_t{d.block[0]} * d.block[1] * d.block[2];
    if (threads > k->max_threads) {
        what = fmt::format("COMPUTE_NUM_THREAD_X*Y*Z = {} exceeds kernel '{}''s max_threads {}", threads, k->name, k->max_threads);
        return Outcome::refused;
    }
    if (prog.kernarg_size != k->kernarg_size || k->kernarg_size > kMaxKernargBytes) {
        what = fmt::format("the host program's kernarg_size {} differs from kernel '{}''s {}", prog.kernarg_size, k->name,
                           k->kernarg_size);
        return Outcome::refused;
    }

    // The kernargs, with every buffer address translated to the mirror.
    const uint64_t kernarg_va = d.sgpr_pair(0);  // COMPUTE_USER_DATA_0/1 (host_program.h)
    alignas(64) std::array<std::byte, kMaxKernargBytes> args{};
    if (!gmc_.access(kernarg_va, std::span(args).first(k->kernarg_size), false, VmClient::gfx)) return Outcome::fault;
    if (!mirror_valid_ || key_ != mirror_key()) rebuild_mirror();
    refused_source.clear();
    // SH_MEM_CONFIG.ALIGNMENT_MODE (bits 3:2; soc21_enum.h SH_MEM_ALIGNMENT_MODE_DWORD 0, DWORD_STRICT 1,
    // STRICT 2, UNALIGNED 3). LLVM's gfx11/gfx12 code assumes misaligned accesses are allowed, which
    // "GFX9 and onwards allow ... only if SH_MEM_CONFIG.alignment_mode allows it" (LLVM D82788,
    // UnalignedAccessMode). The reset value 0x0000c000 (gc_11_0_0_default.h) is DWORD mode. The model
    // cannot see a kernel's accesses: it takes each buffer's elements to be at least 4 bytes, so a
    // buffer address that is not 4-byte aligned is a misaligned access, a memory violation unless
    // the mode is UNALIGNED.
    const uint32_t alignment_mode = sh_mem_config ? (sh_mem_config() >> 2) & 3 : 3;
    for (uint32_t i = 0; i < k->num_buffers; ++i) {
        uint64_t va = 0;
        std::memcpy(&va, args.data() + i * 8, 8);
        if (va % 4 != 0 && alignment_mode != 3) {
            what = fmt::format("buffer {} of kernel '{}' at {} is not 4-byte aligned and VMID 0's SH_MEM_CONFIG is {} "
                               "(ALIGNMENT_MODE {}, not UNALIGNED 3): the access is a memory violation; SH_MEM_CONFIG is "
                               "not programmed (reset value 0x0000c000, DWORD mode)",
                               i, k->name, hex(va), hex(sh_mem_config()), alignment_mode);
            refused_source = "Linux gfx_v11_0.c gfx_v11_0_constants_init (DEFAULT_SH_MEM_CONFIG: ALIGNMENT_MODE_UNALIGNED); "
                             "gc_11_0_0_default.h regSH_MEM_CONFIG_DEFAULT; LLVM D82788";
            return Outcome::refused;
        }
        auto t = gmc_.translate(va, VmClient::gfx);
        if (!t || (!t->system && t->address >= kVramBytes)) {
            gmc_.fault(va, false, VmClient::gfx);  // unmapped: a shader page fault
            return Outcome::fault;
        }
        uint64_t target = 0;
        std::byte* host = mirrored(va, target);
        if (host == nullptr || target != t->address) {
            rebuild_mirror();  // the page table changed without a TLB invalidation the mirror saw
            host = mirrored(va, target);
            if ((host == nullptr || target != t->address) && t->system) {
                gmc_.fault(va, false, VmClient::gfx);  // system memory the bus could not alias
                return Outcome::fault;
            }
            if (host == nullptr || target != t->address) {
                what = fmt::format("buffer {} at {}: the model could not mirror its page", i, hex(va));
                return Outcome::refused;
            }
        }
        const auto addr = reinterpret_cast<uint64_t>(host);
        std::memcpy(args.data() + i * 8, &addr, 8);
    }

    // Every workgroup, on one host thread per core (the engine thread is thread 0), each with its
    // own shared_bytes of workgroup memory (drivers/hostcode/grid_launcher.hpp).
    const baregpu_kernel_fn fn = image->loaded->entry(*k);
    const uint64_t groups = uint64_t{d.grid[0]} * d.grid[1] * d.grid[2];
    const auto begin = std::chrono::steady_clock::now();
    if (groups != 0) {
        // Only the pool, the mirror and the image are used from here on, none of them the chip's
        // state: the model's lock may go (reset() waits, see busy_).
        busy_ = true;
        auto all = [&] { launcher_.run(fn, args.data(), d.grid, d.block, k->shared_bytes); };
        try {
            if (unlocked)
                unlocked(all);
            else
                all();
        } catch (...) {
            busy_ = false;
            throw;
        }
        busy_ = false;
        if (reset_pending_) {
            reset_pending_ = false;
            reset();
        }
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - begin).count();
    chip_.spend(static_cast<uint64_t>(std::max<int64_t>(ns, 1)));
    return Outcome::done;
}

}  // namespace baregpu::sim::amdgpu
