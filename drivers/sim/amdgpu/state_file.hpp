// All of a simulated chip's state in one MAP_SHARED file mapping:
// `$BAREGPU_SIM_STATE_DIR/sim-am-<asic>.state` (default /tmp/baregpu-sim-<uid>). Registers, the
// PSP/SMU/IH/GMC internals and VRAM live there and nowhere else, so a process that crashes or
// exits leaves the "hardware" exactly as it was, and the next model instance (a new SimBus, a new
// process) finds it warm. A missing file, or one with another magic, version, ASIC or size, is a
// chip that was just powered on. The file's blocks are reserved while it is open (a store into a
// hole of a full file system would be SIGBUS): opening fails instead, naming the directory and
// the space needed; its last user gives back at close what nobody wrote. The default directory is the user's own (created 0700, refused when it is
// another user's or others can write it), and the file is opened without following links
// (base/safe_files.hpp).
#pragma once

#include "drivers/sim/amdgpu/asic.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace baregpu::sim::amdgpu {

// Per-block state. Plain integers only: this is the file's format.
struct PspState {
    uint32_t next_component;  // bootloader: index into the package's component order
    uint32_t sos_alive;
    uint64_t busy_until_ns;   // bootloader or ring control "working" (modelled time)
    uint32_t bootloader_status;  // low bits of C2PMSG_35 after the last command (0 = OK)
    uint32_t ring_exists;
    uint64_t ring_mc;
    uint32_t ring_bytes;
    uint32_t wptr;            // dwords, as C2PMSG_67 holds it
    uint32_t toc_loaded;
    uint32_t tmr_size;        // what LOAD_TOC answered
    uint32_t tmr_set_up;
    uint32_t autoload_done;
    uint64_t loaded_fw_types[2];  // bit n: GFX_FW_TYPE n was accepted
    uint32_t inject_cmd_id;   // inject_psp_error
    uint32_t inject_status;
    uint32_t inject_armed;
    uint32_t commands_done;
};

struct SmuState {
    uint32_t running;         // SMU firmware loaded (by the PSP) and answering
    uint32_t hung;            // inject_smu_hang
    uint32_t pending;         // a message is being worked on
    uint64_t answer_at_ns;
    uint32_t answer;          // response to post at answer_at_ns
    uint32_t answer_param;    // value for C2PMSG_82 with the response
    uint32_t answer_param_valid;
    uint32_t driver_table_hi, driver_table_lo;
    uint32_t features_enabled;
    uint32_t metrics_counter;
    uint32_t soft_min[4], soft_max[4];
    uint64_t reset_done_at_ns;  // mode1 reset in progress until then
    uint32_t mode1_resets;
};

struct IhState {
    uint32_t entries_written;
    uint32_t overflows;
};

struct GmcState {
    uint32_t gc_fault_latched, mm_fault_latched;
    uint32_t gc_invalidations, mm_invalidations;
    uint32_t mm_sem_held;
    uint32_t hdp_flushes;
    uint32_t mm_private_pending;  // an MM hub invalidation not yet followed by the private invalidation
};

// The GC registers the model banks (GRBM_GFX_CNTL selects the bank) or latches, and what it counts.
struct GcState {
    uint32_t mec_pc_start[4], mec_pc_start_hi[4];  // CP_MEC_RS64_PRGRM_CNTR_START/_HI per MEC pipe
    uint32_t mec_pc_lo[4], mec_pc_hi[4];           // the start each pipe took when it last left reset
    uint32_t sh_mem_config[16], sh_mem_bases[16];  // per VMID
    uint32_t dropped_doorbells;                    // doorbells no engine took (routing, MEC range, halted)
    uint32_t autoload_stall_reported;              // the RLC-autoload-waits-for-the-SMU violation, once
};

struct IndirectRegister {
    uint32_t address;
    uint32_t value;
};
inline constexpr unsigned kIndirectRegisters = 256;

struct ChipState {
    static constexpr uint64_t kMagic = 0x4d414d4953474242ull;  // "BBGSIMAM"
    static constexpr uint32_t kVersion = 2;  // 2: GcState, GmcState.mm_private_pending
    uint64_t magic;
    uint32_t version;
    uint32_t asic;
    uint64_t vram_bytes;
    uint64_t file_bytes;
    uint32_t mm_index, mm_index_hi;
    PspState psp;
    SmuState smu;
    IhState ih;
    GmcState gmc;
    GcState gc;
    uint32_t indirect_count;
    IndirectRegister indirect[kIndirectRegisters];
};

class StateFile {
public:
    // Maps (creating when missing or mismatched) the state file of `asic` in `dir` (empty:
    // $BAREGPU_SIM_STATE_DIR, else /tmp/baregpu-sim-<uid>). powered_on() says whether it was fresh.
    // ephemeral: an anonymous memfd instead (no file in any directory; path() is empty; always
    // powered on). Either way VRAM is backed by a file descriptor, so that the compute engine can
    // map VRAM pages a second time into its host mirror of the GPU address space (host_exec.hpp).
    StateFile(Asic asic, const std::string& dir, bool ephemeral = false);
    ~StateFile();
    StateFile(const StateFile&) = delete;
    StateFile& operator=(const StateFile&) = delete;

    ChipState& chip() { return *reinterpret_cast<ChipState*>(base_); }
    std::span<uint32_t> registers() { return {reinterpret_cast<uint32_t*>(base_ + kRegistersOffset), kBar5Dwords}; }
    std::span<std::byte> vram() { return {reinterpret_cast<std::byte*>(base_ + kVramOffset), kVramBytes}; }
    bool powered_on() const { return powered_on_; }
    const std::filesystem::path& path() const { return path_; }  // empty when ephemeral
    // The descriptor backing the mapping and where VRAM starts in it (page aligned).
    int fd() const { return fd_; }
    static constexpr uint64_t vram_file_offset() { return kVramOffset; }

    // Back to the power-on state: every register and block state zeroed. keep_vram false also
    // drops VRAM (a power cycle); true keeps it (mode1 reset).
    void power_on(bool keep_vram);

    static std::filesystem::path default_dir();

private:
    // Allocates the file's blocks for [offset, offset + bytes); throws SystemError naming the
    // file, the directory, the space needed and what is free.
    void reserve(uint64_t offset, uint64_t bytes);
    // At close, by the file's last user: gives back the reserved blocks nobody wrote.
    void release_unused_blocks() noexcept;

    static constexpr uint64_t kRegistersOffset = 64u << 10;
    static constexpr uint64_t kVramOffset = 2u << 20;
    static constexpr uint64_t kFileBytes = kVramOffset + kVramBytes;

    Asic asic_;
    std::filesystem::path path_;
    int fd_ = -1;
    unsigned char* base_ = nullptr;
    bool powered_on_ = false;
};

}  // namespace baregpu::sim::amdgpu
