#include "drivers/nv/rm_abi.hpp"

#include <fmt/format.h>

namespace baregpu::nv {

namespace {
struct Named {
    uint32_t value;
    const char* name;
};

constexpr Named kClasses[] = {
    {NV01_ROOT_CLIENT, "NV01_ROOT_CLIENT"},
    {NV01_DEVICE_0, "NV01_DEVICE_0"},
    {NV20_SUBDEVICE_0, "NV20_SUBDEVICE_0"},
    {NV01_MEMORY_SYSTEM, "NV01_MEMORY_SYSTEM"},
    {NV1_MEMORY_USER, "NV1_MEMORY_USER"},
    {NV01_MEMORY_VIRTUAL, "NV01_MEMORY_VIRTUAL"},
    {NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, "NV01_MEMORY_SYSTEM_OS_DESCRIPTOR"},
    {FERMI_CONTEXT_SHARE_A, "FERMI_CONTEXT_SHARE_A"},
    {FERMI_VASPACE_A, "FERMI_VASPACE_A"},
    {KEPLER_CHANNEL_GROUP_A, "KEPLER_CHANNEL_GROUP_A"},
    {TURING_USERMODE_A, "TURING_USERMODE_A"},
    {HOPPER_USERMODE_A, "HOPPER_USERMODE_A"},
    {AMPERE_CHANNEL_GPFIFO_A, "AMPERE_CHANNEL_GPFIFO_A"},
    {HOPPER_CHANNEL_GPFIFO_A, "HOPPER_CHANNEL_GPFIFO_A"},
    {BLACKWELL_CHANNEL_GPFIFO_A, "BLACKWELL_CHANNEL_GPFIFO_A"},
    {AMPERE_DMA_COPY_B, "AMPERE_DMA_COPY_B"},
    {HOPPER_DMA_COPY_A, "HOPPER_DMA_COPY_A"},
    {BLACKWELL_DMA_COPY_B, "BLACKWELL_DMA_COPY_B"},
    {AMPERE_COMPUTE_B, "AMPERE_COMPUTE_B"},
    {ADA_COMPUTE_A, "ADA_COMPUTE_A"},
    {HOPPER_COMPUTE_A, "HOPPER_COMPUTE_A"},
    {BLACKWELL_COMPUTE_B, "BLACKWELL_COMPUTE_B"},
};

constexpr Named kControls[] = {
    {NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, "NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2"},
    {NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2, "NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2"},
    {NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, "NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2"},
    {NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE"},
    {NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN"},
    {NV90F1_CTRL_CMD_VASPACE_COPY_SERVER_RESERVED_PDES, "NV90F1_CTRL_CMD_VASPACE_COPY_SERVER_RESERVED_PDES"},
};

template <size_t N>
std::string lookup(const Named (&table)[N], uint32_t value, const char* fallback) {
    for (const Named& entry : table) {
        if (entry.value == value) return fmt::format("{} (0x{:x})", entry.name, value);
    }
    return fmt::format("{} 0x{:x}", fallback, value);
}
}  // namespace

std::string class_name(uint32_t cls) { return lookup(kClasses, cls, "class"); }
std::string control_name(uint32_t cmd) { return lookup(kControls, cmd, "control"); }

const char* branch_name(RmBranch branch) {
    switch (branch) {
        case RmBranch::r570: return "570";
        case RmBranch::r575: return "575";
        case RmBranch::r580: return "580";
    }
    return "?";
}

}  // namespace baregpu::nv
