// The compute class behind a subchannel bound to AMPERE_COMPUTE_A/B or ADA_COMPUTE_A: a QMD V03
// launch (SEND_PCAS_A = QMD address >> 8, then SEND_SIGNALING_PCAS2_B with PCAS_ACTION SCHEDULE or
// INVALIDATE_COPY_SCHEDULE; clc6c0.h 0x02b4 / 0x02c0) runs a host-code kernel (ARCHITECTURE.md,
// code objects): the QMD's program address points at a struct baregpu_host_program
// (drivers/hostcode/host_program.h) naming a host ELF in GPU memory and the kernel; constant buffer 0
// holds the HCQ kernarg block (num_buffers u64 GPU VAs, then u32 values), whose buffer VAs are
// translated through the MMU to host pointers into VRAM (or the bus's host memory) in a copy. Every
// CTA runs on drivers/hostcode's thread pool. Then the QMD's release semaphores are written and a
// dependent QMD is scheduled.
// QMD V03_00 fields, open-gpu-doc classes/compute/clc6c0qmd.h (NVC6C0_QMDV03_00_*), typed here on
// the model's own: QMD_VERSION 579:576, QMD_MAJOR_VERSION 583:580, CTA_RASTER_WIDTH 415:384,
// HEIGHT 431:416, DEPTH 463:448, CTA_THREAD_DIMENSION0/1/2 607:592 / 623:608 / 639:624,
// CONSTANT_BUFFER_VALID(i) 640+i, CONSTANT_BUFFER_ADDR_LOWER(i) 1055+64i:1024+64i, ADDR_UPPER(i)
// 1072+64i:1056+64i, SIZE_SHIFTED4(i) 1087+64i:1075+64i, PROGRAM_ADDRESS_LOWER 1567:1536, UPPER
// 1584:1568, RELEASE0_ADDRESS_LOWER 799:768, UPPER 807:800, ENABLE 823, PAYLOAD64B 829,
// STRUCTURE_SIZE 831:830 (0 FOUR_WORDS, 1 ONE_WORD, 2 TWO_WORDS), PAYLOAD_LOWER 863:832, UPPER 895:864,
// RELEASE1_* the same + 128 bits, DEPENDENT_QMD0_POINTER 511:480 (>> 8), ENABLE 512, ACTION 515:513
// (1 SCHEDULE, 3 INVALIDATE_COPY_SCHEDULE).
// HOPPER_COMPUTE_A reads QMD V04_00 (384 bytes; open-gpu-doc clcbc0qmd.h NVCBC0_QMDV04_00_*, as Mesa NVK's nak
// qmd.rs picks it for Hopper): GRID_WIDTH 1055:1024, HEIGHT 1071:1056, DEPTH 1103:1088, CTA_THREAD_DIMENSION0/1/2
// 1167:1152 / 1183:1168 / 1199:1184, CONSTANT_BUFFER_VALID(i) 416+4i, CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(i)
// 1567+64i:1536+64i, UPPER_SHIFTED6(i) 1586+64i:1568+64i, SIZE_SHIFTED4(i) 1599+64i:1587+64i, PROGRAM_ADDRESS_LOWER
// 1247:1216, UPPER 1272:1248, RELEASE_ENABLE(i) 320+16i, STRUCTURE_SIZE(i) 322+16i:321+16i, PAYLOAD64B(i) 332+16i,
// RELEASE_SEMAPHORE0_ADDR_LOWER 671:640, UPPER 696:672, PAYLOAD_LOWER 735:704, UPPER 767:736 (SEMAPHORE1 + 128 bits),
// DEPENDENT_QMD_ENABLE(0) 368, ACTION(0) 371:369, DEPENDENT_QMD0_POINTER 479:448. A V03 QMD sent to it (or V04 to
// an Ada class) is refused: the major version is where both keep it, 583:580.
#include "gpu_engines.hpp"
#include "gpu_engines_internal.hpp"

#include "base/error.hpp"
#include "drivers/hostcode/loaded_object.hpp"
#include "drivers/hostcode/host_program.h"
#include "drivers/hostcode/kernel_abi.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace baregpu::sim::nvgpu {

namespace {
constexpr uint32_t SEND_PCAS_A = 0x02b4, SEND_SIGNALING_PCAS2_B = 0x02c0;
constexpr unsigned kQmdBytes = 384;  // the larger of V03 (256) and V04 (384)

struct Bits {
    unsigned hi, lo;
};
// Where the fields the model reads sit, per version (see the header comment).
struct QmdLayout {
    unsigned major, bytes;
    Bits grid[3], block[3], cb_valid0, cb_lo0, cb_hi0, cb_size0;
    unsigned cb_shift;
    Bits program_lo, program_hi;
    Bits rel_enable[2], rel_payload64[2], rel_structure[2], rel_addr_lo[2], rel_addr_hi[2], rel_payload_lo[2], rel_payload_hi[2];
    Bits dep_enable, dep_action, dep_pointer;
    Bits registers, barriers, shared;  // REGISTER_COUNT(_V), BARRIER_COUNT, SHARED_MEMORY_SIZE
};
constexpr QmdLayout kV03{3, 256, {{415, 384}, {431, 416}, {463, 448}}, {{607, 592}, {623, 608}, {639, 624}}, {640, 640},
                         {1055, 1024}, {1072, 1056}, {1087, 1075}, 0, {1567, 1536}, {1584, 1568},
                         {{823, 823}, {951, 951}}, {{829, 829}, {957, 957}}, {{831, 830}, {959, 958}},
                         {{799, 768}, {927, 896}}, {{807, 800}, {935, 928}}, {{863, 832}, {991, 960}}, {{895, 864}, {1023, 992}},
                         {512, 512}, {515, 513}, {511, 480}, {656, 648}, {767, 763}, {561, 544}};
constexpr QmdLayout kV04{4, 384, {{1055, 1024}, {1071, 1056}, {1103, 1088}}, {{1167, 1152}, {1183, 1168}, {1199, 1184}}, {416, 416},
                         {1567, 1536}, {1586, 1568}, {1599, 1587}, 6, {1247, 1216}, {1272, 1248},
                         {{320, 320}, {336, 336}}, {{332, 332}, {348, 348}}, {{322, 321}, {338, 337}},
                         {{671, 640}, {799, 768}}, {{696, 672}, {824, 800}}, {{735, 704}, {863, 832}}, {{767, 736}, {895, 864}},
                         {368, 368}, {371, 369}, {479, 448}, {1208, 1200}, {1215, 1211}, {601, 584}};
constexpr unsigned kMaxDependentDepth = 64;       // model limit on a QMD chain
constexpr uint64_t kMaxImageBytes = 64ull << 20;   // model limit on a host code object
constexpr uint32_t kMaxKernargBytes = 4096;
constexpr size_t kImageCacheEntries = 16;

struct QmdWords {
    std::array<uint32_t, kQmdBytes / 4> w{};
    uint64_t get(unsigned hi, unsigned lo) const {  // MW(hi:lo), at most 32 bits, within one word
        uint32_t word = w[lo / 32];
        unsigned width = hi - lo + 1;
        return width == 32 ? word : (word >> (lo % 32)) & ((1u << width) - 1);
    }
    uint64_t get(Bits b) const { return get(b.hi, b.lo); }
};
}  // namespace

namespace {

// The cubin facts the model reads itself (ELF64 section and symbol tables; .nv.info records EIFMT u8, EIATTR u8,
// u16 value or size: NVIDIA cuda-gdb's published EIATTR list): EIATTR_PARAM_CBANK 0x0a {sym u32, offset u16, size u16},
// EIATTR_REGCOUNT 0x2f {sym, value} in .nv.info, EIATTR_NUM_BARRIERS 0x4c (a BVAL), the SM in e_flags 15:8.
template <class T>
T le(std::span<const std::byte> b, uint64_t at) {
    if (at + sizeof(T) > b.size()) throw Error("cubin", fmt::format("read of {} bytes at {:#x} past the file", sizeof(T), at));
    T v;
    std::memcpy(&v, b.data() + at, sizeof v);
    return v;
}

std::vector<GpuEngines::CubinKernelFacts> read_cubin(std::span<const std::byte> f) {
    if (f.size() < 64 || std::memcmp(f.data(), "\x7f" "ELF", 4) != 0 || le<uint8_t>(f, 4) != 2 || le<uint16_t>(f, 18) != 190)
        throw Error("cubin", "not an ELF64 for EM_CUDA (190)");
    const uint32_t sm = (le<uint32_t>(f, 48) >> 8) & 0xff;
    const uint64_t shoff = le<uint64_t>(f, 40);
    const uint16_t shentsize = le<uint16_t>(f, 58), shnum = le<uint16_t>(f, 60), shstrndx = le<uint16_t>(f, 62);
    struct Sec {
        std::string name;
        uint32_t type;
        uint64_t offset, size;
        uint32_t link;
    };
    std::vector<Sec> secs(shnum);
    auto str = [&](uint64_t at) {
        std::string out;
        while (at < f.size() && f[at] != std::byte{0}) out += static_cast<char>(f[at++]);
        return out;
    };
    for (uint16_t i = 0; i < shnum; ++i) {
        const uint64_t h = shoff + uint64_t{i} * shentsize;
        secs[i] = {"", le<uint32_t>(f, h + 4), le<uint64_t>(f, h + 24), le<uint64_t>(f, h + 32), le<uint32_t>(f, h + 40)};
    }
    const uint64_t names = secs.at(shstrndx).offset;
    for (uint16_t i = 0; i < shnum; ++i) secs[i].name = str(names + le<uint32_t>(f, shoff + uint64_t{i} * shentsize));
    auto find = [&](const std::string& n) -> const Sec* {
        for (const Sec& s : secs)
            if (s.name == n) return &s;
        return nullptr;
    };
    // Symbol index -> name (SHT_SYMTAB 2, 24-byte entries, names in its linked string table).
    std::vector<std::string> symbols;
    for (const Sec& s : secs) {
        if (s.type != 2) continue;
        for (uint64_t at = s.offset; at + 24 <= s.offset + s.size; at += 24) symbols.push_back(str(secs.at(s.link).offset + le<uint32_t>(f, at)));
    }
    auto records = [&](const Sec& s, auto&& each) {
        for (uint64_t at = s.offset; at + 4 <= s.offset + s.size;) {
            const uint8_t format = le<uint8_t>(f, at), attribute = le<uint8_t>(f, at + 1);
            const uint16_t value = le<uint16_t>(f, at + 2);
            each(format, attribute, value, at + 4);
            at += 4 + (format == 4 ? value : 0);
        }
    };
    std::vector<GpuEngines::CubinKernelFacts> out;
    for (const Sec& s : secs) {
        if (!s.name.starts_with(".text.")) continue;
        GpuEngines::CubinKernelFacts k;
        k.name = s.name.substr(6);
        k.sm = sm;
        const uint64_t head = std::min<uint64_t>(s.size, 128);
        if (s.offset + head > f.size()) throw Error("cubin", s.name + " past the file");
        k.text_head.assign(f.begin() + static_cast<ptrdiff_t>(s.offset), f.begin() + static_cast<ptrdiff_t>(s.offset + head));
        if (const Sec* shared = find(".nv.shared." + k.name)) k.shared_bytes = static_cast<uint32_t>(shared->size);
        if (const Sec* info = find(".nv.info." + k.name)) {
            records(*info, [&](uint8_t format, uint8_t attribute, uint16_t value, uint64_t data) {
                if (attribute == 0x0a && format == 4 && value == 8) {
                    k.param_offset = le<uint16_t>(f, data + 4);
                    k.param_size = le<uint16_t>(f, data + 6);
                }
                if (attribute == 0x4c && format != 4) k.barriers = value;
            });
        }
        out.push_back(std::move(k));
    }
    if (const Sec* info = find(".nv.info")) {
        records(*info, [&](uint8_t format, uint8_t attribute, uint16_t value, uint64_t data) {
            if (attribute != 0x2f || format != 4 || value != 8) return;
            const uint32_t sym = le<uint32_t>(f, data), regs = le<uint32_t>(f, data + 4);
            for (auto& k : out)
                if (sym < symbols.size() && symbols[sym] == k.name) k.registers = regs;
        });
    }
    return out;
}

// The SM each compute class runs.
uint32_t sm_of_class(uint32_t cls) {
    switch (cls) {
        case kAmpereComputeB: return 86;
        case kAdaComputeA: return 89;
        case kHopperComputeA: return 90;
        default: return 0;
    }
}

}  // namespace

void GpuEngines::add_cubin(std::span<const std::byte> elf) {
    std::vector<CubinKernelFacts> kernels = read_cubin(elf);
    std::lock_guard lock(mutex_);
    for (auto& k : kernels) cubin_kernels_.push_back(std::move(k));
}

uint64_t GpuEngines::cubin_launches() const {
    std::lock_guard lock(mutex_);
    return cubin_launches_;
}

GpuEngines::Step GpuEngines::compute_method(Channel& c, unsigned subchannel, uint32_t method, uint32_t data) {
    c.methods[subchannel][method / 4] = data;
    if (method != SEND_SIGNALING_PCAS2_B) return Step::ok;
    uint32_t action = data & 0xf;  // PCAS_ACTION 3:0: 0 NOP, 1 INVALIDATE, 2 SCHEDULE, 3 INVALIDATE_COPY_SCHEDULE
    if (action == 0 || action == 1) return Step::ok;
    if (action != 2 && action != 3) {
        EngineFault e;
        e.kind = EngineFault::Kind::bad_method;
        e.subchannel = subchannel;
        e.method = method;
        e.data = data;
        e.what = fmt::format("SEND_SIGNALING_PCAS2_B PCAS_ACTION {} is not defined (clc6c0.h)", action);
        return stop(c, e);
    }
    return launch_qmd(c, subchannel, uint64_t{c.mthd(subchannel, SEND_PCAS_A)} << 8, 0);
}

std::shared_ptr<hostcode::LoadedObject> GpuEngines::load_image(Channel& c, uint64_t image_va, uint64_t image_size,
                                                              uint64_t image_hash, std::string& what) {
    auto key = std::make_pair(image_va, image_hash);
    if (auto it = images_.find(key); it != images_.end()) return it->second;
    if (image_size == 0 || image_size > kMaxImageBytes) {
        what = fmt::format("image_size {} is 0 or above the model's {} byte limit", image_size, kMaxImageBytes);
        return nullptr;
    }
    std::vector<std::byte> bytes(image_size);
    if (auto f = mmu_.read(c.state.page_directory_base, c.state.mmu_format, image_va, bytes)) {
        mmu_fault(c, *f, "the host code object read");
        return nullptr;
    }
    const uint64_t hash = baregpu_host_program_hash(bytes.data(), bytes.size());
    if (hash != image_hash) {
        what = fmt::format("image_hash {:#x} does not match the FNV-1a 64 {:#x} of the {} bytes at {:#x}", image_hash,
                           hash, image_size, image_va);
        return nullptr;
    }
    try {
        auto image = hostcode::LoadedObject::load(bytes, device_, fmt::format("code object at {:#x}", image_va));
        if (images_.size() >= kImageCacheEntries) images_.erase(images_.begin());
        images_[key] = image;
        return image;
    } catch (const SystemError&) {
        throw;
    } catch (const Error& e) {
        what = e.what();
        return nullptr;
    }
}

GpuEngines::Step GpuEngines::launch_qmd(Channel& c, unsigned subchannel, uint64_t qmd_va, unsigned depth) {
    const uint64_t pdb = c.state.page_directory_base;
    const MmuFormat format = c.state.mmu_format;
    auto refuse = [&](const std::string& why) {
        EngineFault e;
        e.kind = EngineFault::Kind::bad_launch;
        e.subchannel = subchannel;
        e.method = SEND_SIGNALING_PCAS2_B;
        e.address = qmd_va;
        e.what = fmt::format("QMD launch at {:#x} (class {:#x}, subchannel {}): {}", qmd_va, c.classes[subchannel],
                             subchannel, why);
        return stop(c, e);
    };
    const QmdLayout& L = c.classes[subchannel] == kHopperComputeA ? kV04 : kV03;
    QmdWords q;
    if (auto f = mmu_.read(pdb, format, qmd_va, std::as_writable_bytes(std::span(q.w).first(L.bytes / 4))))
        return mmu_fault(c, *f, "a QMD read");
    if (q.get(583, 580) != L.major || q.get(579, 576) != 0)
        return refuse(fmt::format("QMD_MAJOR_VERSION.QMD_VERSION is {}.{}; this class reads V0{}_00 ({})", q.get(583, 580),
                                  q.get(579, 576), L.major, L.major == 4 ? "clcbc0qmd.h" : "clc6c0qmd.h"));
    const std::array<uint32_t, 3> grid{static_cast<uint32_t>(q.get(L.grid[0])), static_cast<uint32_t>(q.get(L.grid[1])),
                                       static_cast<uint32_t>(q.get(L.grid[2]))};
    const std::array<uint32_t, 3> block{static_cast<uint32_t>(q.get(L.block[0])), static_cast<uint32_t>(q.get(L.block[1])),
                                        static_cast<uint32_t>(q.get(L.block[2]))};
    if (block[0] == 0 || block[1] == 0 || block[2] == 0)
        return refuse(fmt::format("CTA_THREAD_DIMENSION {}x{}x{} has a zero", block[0], block[1], block[2]));
    if (q.get(L.cb_valid0) == 0) return refuse("CONSTANT_BUFFER_VALID(0) is not set: the kernargs live in constant buffer 0");
    const uint64_t cb0 = (q.get(L.cb_lo0) | (q.get(L.cb_hi0) << 32)) << L.cb_shift;
    const uint64_t cb0_size = q.get(L.cb_size0) << 4;
    const uint64_t program = q.get(L.program_lo) | (q.get(L.program_hi) << 32);

    // After the grid: release semaphores 0 and 1, then dependent QMD 0.
    auto finish = [&]() -> Step {
        // Release semaphores 0 and 1.
        for (unsigned r = 0; r < 2; ++r) {
            if (q.get(L.rel_enable[r]) == 0) continue;
            const uint64_t va = q.get(L.rel_addr_lo[r]) | (q.get(L.rel_addr_hi[r]) << 32);
            const bool payload64 = q.get(L.rel_payload64[r]) != 0;
            const uint64_t structure = q.get(L.rel_structure[r]);
            const uint64_t payload = q.get(L.rel_payload_lo[r]) | (payload64 ? q.get(L.rel_payload_hi[r]) << 32 : 0);
            std::byte b[16];
            std::memcpy(b, &payload, 8);
            const uint64_t ts = now_ns();
            std::memcpy(b + 8, &ts, 8);
            const size_t bytes = structure == 0 ? 16 : payload64 ? 8 : 4;  // FOUR_WORDS: payload, then the timestamp at +8
            if (!write_bytes(c, va, std::span<const std::byte>(b, bytes), "a QMD release semaphore")) return Step::fault;
        }
        // Dependent QMD 0.
        if (q.get(L.dep_enable) != 0) {
            const uint64_t action = q.get(L.dep_action), next = q.get(L.dep_pointer) << 8;
            if (action != 1 && action != 3)
                return refuse(fmt::format("DEPENDENT_QMD0_ACTION {} is not modelled (SCHEDULE 1 and "
                                          "INVALIDATE_COPY_SCHEDULE 3 are)", action));
            if (depth + 1 >= kMaxDependentDepth)
                return refuse(fmt::format("dependent QMD chain longer than the model's {}", kMaxDependentDepth));
            return launch_qmd(c, subchannel, next, depth + 1);
        }
        return Step::ok;
    };
    // A kernel of a cubin this GPU was given: its launch state against what its SASS needs (not executed).
    const CubinKernelFacts* sass = nullptr;
    if (!cubin_kernels_.empty()) {
        std::array<std::byte, 128> head{};
        if (!mmu_.read(pdb, format, program, std::span(head))) {
            for (const CubinKernelFacts& k : cubin_kernels_)
                if (std::memcmp(head.data(), k.text_head.data(), k.text_head.size()) == 0) sass = &k;
        }
    }
    if (sass != nullptr) {
        // SASS reaches shared and local memory through the windows SET_SHADER_SHARED_MEMORY_WINDOW_A/B (0x02a0) and
        // SET_SHADER_LOCAL_MEMORY_WINDOW_A/B (0x07b0) place (clc7c0.h; tinygrad programs both per compute channel). Their
        // reset value is not public: the model takes 0, so that a channel that never set them is seen.
        const uint64_t shared_window = uint64_t{c.mthd(subchannel, 0x02a0)} << 32 | c.mthd(subchannel, 0x02a4);
        const uint64_t local_window = uint64_t{c.mthd(subchannel, 0x07b0)} << 32 | c.mthd(subchannel, 0x07b4);
        if (shared_window == 0 || local_window == 0)
            return refuse(fmt::format("kernel '{}' launched before SET_SHADER_SHARED_MEMORY_WINDOW ({:#x}) and "
                                      "SET_SHADER_LOCAL_MEMORY_WINDOW ({:#x}) were programmed on this subchannel",
                                      sass->name, shared_window, local_window));
        const uint32_t sm = sm_of_class(c.classes[subchannel]);
        if (sass->sm != sm)
            return refuse(fmt::format("PROGRAM_ADDRESS {:#x} holds kernel '{}' of a cubin for sm_{}; this class runs sm_{}", program,
                                      sass->name, sass->sm, sm));
        const uint64_t regs = q.get(L.registers), barriers = q.get(L.barriers), shared = q.get(L.shared);
        if (regs != sass->registers)
            return refuse(fmt::format("REGISTER_COUNT {} for kernel '{}', whose SASS uses {} (EIATTR_REGCOUNT)", regs, sass->name,
                                      sass->registers));
        if (barriers < sass->barriers)
            return refuse(fmt::format("BARRIER_COUNT {} for kernel '{}', which uses {} barriers", barriers, sass->name, sass->barriers));
        if (shared < sass->shared_bytes)
            return refuse(fmt::format("SHARED_MEMORY_SIZE {} for kernel '{}', which has {} bytes of static shared memory", shared,
                                      sass->name, sass->shared_bytes));
        if (cb0_size < uint64_t{sass->param_offset} + sass->param_size)
            return refuse(fmt::format("constant buffer 0 holds {} bytes; kernel '{}' reads its {} bytes of parameters at +{:#x} "
                                      "(EIATTR_PARAM_CBANK)", cb0_size, sass->name, sass->param_size, sass->param_offset));
        ++cubin_launches_;
        ++c.kernels;
        return finish();
    }

    baregpu_host_program prog{};
    if (auto f = mmu_.read(pdb, format, program, std::as_writable_bytes(std::span(&prog, 1))))
        return mmu_fault(c, *f, "the host program descriptor read");
    if (program % BAREGPU_HOST_PROGRAM_ALIGN != 0)
        return refuse(fmt::format("PROGRAM_ADDRESS {:#x} is not {}-byte aligned", program, BAREGPU_HOST_PROGRAM_ALIGN));
    if (prog.magic != BAREGPU_HOST_PROGRAM_MAGIC || prog.version != BAREGPU_HOST_PROGRAM_VERSION)
        return refuse(fmt::format("PROGRAM_ADDRESS {:#x} is not a host program: magic {:#x} version {} (want {:#x} "
                                  "version {})", program, prog.magic, prog.version, BAREGPU_HOST_PROGRAM_MAGIC,
                                  BAREGPU_HOST_PROGRAM_VERSION));
    const char* nul = static_cast<const char*>(std::memchr(prog.kernel, 0, sizeof prog.kernel));
    if (nul == nullptr || nul == prog.kernel) return refuse("the host program's kernel name is empty or not NUL-terminated");
    const std::string kernel_name(prog.kernel, static_cast<size_t>(nul - prog.kernel));
    std::string what;
    auto image = load_image(c, prog.image_va, prog.image_size, prog.image_hash, what);
    if (c.fault) return Step::fault;
    if (!image) return refuse(what);
    const hostcode::KernelEntry* k = image->find(kernel_name);
    if (k == nullptr) return refuse(fmt::format("the code object at {:#x} has no kernel '{}'", prog.image_va, kernel_name));
    const uint64_t threads = uint64_t{block[0]} * block[1] * block[2];
    if (threads > k->max_threads)
        return refuse(fmt::format("CTA_THREAD_DIMENSION product {} exceeds kernel '{}''s max_threads {}", threads,
                                  k->name, k->max_threads));
    if (prog.kernarg_size != k->kernarg_size || k->kernarg_size > kMaxKernargBytes)
        return refuse(fmt::format("the host program's kernarg_size {} differs from kernel '{}''s {}", prog.kernarg_size,
                                  k->name, k->kernarg_size));
    if (cb0_size < k->kernarg_size)
        return refuse(fmt::format("constant buffer 0 holds {} bytes, kernel '{}' takes {} bytes of kernargs", cb0_size,
                                  k->name, k->kernarg_size));

    // The kernargs, each buffer VA replaced by the host address of its first byte. A buffer must be
    // physically contiguous from there (one leaf, or consecutive VRAM): the model does not mirror.
    alignas(64) std::array<std::byte, kMaxKernargBytes> args{};
    if (auto f = mmu_.read(pdb, format, cb0, std::span(args).first(k->kernarg_size)))
        return mmu_fault(c, *f, "the constant buffer 0 (kernargs) read");
    for (uint32_t i = 0; i < k->num_buffers; ++i) {
        uint64_t va = 0;
        std::memcpy(&va, args.data() + i * 8, 8);
        auto r = mmu_.translate(pdb, format, va, MmuAccess::write);
        if (auto* f = std::get_if<MmuFault>(&r)) return mmu_fault(c, *f, fmt::format("kernel buffer {}", i).c_str());
        const auto& t = std::get<MmuTranslation>(r);
        std::byte* host = t.vram ? vram_.data() + t.address : (port_ ? port_->dma_host_memory(BusAddress(t.address), 1) : nullptr);
        if (host == nullptr) return refuse(fmt::format("buffer {} at {:#x}: system memory the bus cannot alias", i, va));
        const auto addr = reinterpret_cast<uint64_t>(host);
        std::memcpy(args.data() + i * 8, &addr, 8);
    }

    const baregpu_kernel_fn fn = image->entry(*k);
    const uint64_t ctas = uint64_t{grid[0]} * grid[1] * grid[2];
    const auto begin = std::chrono::steady_clock::now();
    if (ctas != 0) {
        // The CTAs touch only VRAM / host memory, the image and `args`: let queries and doorbells in meanwhile.
        kernel_running_ = true;
        if (engine_lock_) engine_lock_->unlock();
        try {
            launcher_.run(fn, args.data(), grid, block, k->shared_bytes);
        } catch (...) {
            if (engine_lock_) engine_lock_->lock();
            kernel_running_ = false;
            progress_cv_.notify_all();
            throw;
        }
        if (engine_lock_) engine_lock_->lock();
        kernel_running_ = false;
        progress_cv_.notify_all();
    }
    if (port_)
        port_->spend_ns(static_cast<uint64_t>(std::max<int64_t>(
            1, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - begin).count())));
    ++c.kernels;

    return finish();
}

}  // namespace baregpu::sim::nvgpu
