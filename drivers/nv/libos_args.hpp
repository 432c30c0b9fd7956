// What GSP-RM finds in host memory when it starts: the LibOS memory-region list (its address goes
// into the GSP falcon's MAILBOX0/1), the log buffers and RMARGS it names, and in RMARGS where the
// message queues are. Layouts, open-gpu-kernel-modules 570.144:
//   src/common/uproc/os/common/include/libos_init_args.h  LibosMemoryRegionInitArgument {id8 +0, pa +8,
//     size +16, kind u8 +24, loc u8 +25} (32 bytes); LIBOS_MEMORY_REGION_CONTIGUOUS = 1, _LOC_SYSMEM = 1;
//     id8 = the region's ASCII name packed big-endian into a u64 ("LOGINIT", "RMARGS").
//   src/nvidia/arch/nvalloc/common/inc/gsp/gsp_init_args.h  MESSAGE_QUEUE_INIT_ARGUMENTS
//     {sharedMemPhysAddr u64 +0, pageTableEntryCount u32 +8, cmdQueueOffset u64 +16, statQueueOffset u64 +24},
//     GSP_ARGUMENTS_CACHED {messageQueueInitArguments +0, srInitArguments +32 (oldLevel, flags,
//     bInPMTransition), gpuInstance +44, bDmemStack +48, profilerArgs {pa, size} +56} (72 bytes in 570.144,
//     as nova-core's bindgen of it, gsp/fw/r570_144/bindings.rs, lays it out; later trees add sysmemHeapArgs).
//   The queue region: its first pages list the bus address of every 4 KiB page of the region,
//   themselves included; the command queue follows, then the status queue (message_queue_cpu.c).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace baregpu::nv {

inline constexpr uint64_t kLibosArgSize = 32;
inline constexpr uint64_t kGspArgumentsCachedSize = 72;

struct LibosRegion {
    std::string_view name;  // up to 8 ASCII characters
    uint64_t pa = 0;        // bus address
    uint64_t size = 0;
};

uint64_t libos_id8(std::string_view name);
// Writes the region list into `out` (kLibosArgSize each, then zeros).
void encode_libos_args(std::span<std::byte> out, std::span<const LibosRegion> regions);

struct MessageQueueInitArguments {
    uint64_t shared_mem_phys_addr = 0;  // bus address of the page list (the region's first page)
    uint32_t page_table_entry_count = 0;
    uint64_t cmd_queue_offset = 0, stat_queue_offset = 0;
};
// GSP_ARGUMENTS_CACHED with bDmemStack = 1, gpuInstance 0, no profiler buffer.
void encode_gsp_arguments_cached(std::span<std::byte> out, const MessageQueueInitArguments& mq);

// Bytes of the page list for a queue region of queue_bytes (page-list pages included).
uint64_t queue_page_list_bytes(uint64_t queue_bytes);

}  // namespace baregpu::nv
