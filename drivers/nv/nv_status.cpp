#include "drivers/nv/nv_status.hpp"

#include <fmt/format.h>

namespace baregpu::nv {

namespace {

struct StatusName {
    uint32_t code;
    const char* name;
    const char* text;  // nvstatuscodes.h's own description
};

constexpr StatusName kStatusNames[] = {
    {NV_OK, "NV_OK", "Success"},
    {NV_ERR_GPU_IS_LOST, "NV_ERR_GPU_IS_LOST", "GPU lost from the bus"},
    {NV_ERR_INSERT_DUPLICATE_NAME, "NV_ERR_INSERT_DUPLICATE_NAME", "Found a duplicate entry in the requested btree"},
    {NV_ERR_INSUFFICIENT_RESOURCES, "NV_ERR_INSUFFICIENT_RESOURCES", "Ran out of a critical resource, other than memory"},
    {NV_ERR_INVALID_ADDRESS, "NV_ERR_INVALID_ADDRESS", "Address not valid"},
    {NV_ERR_INVALID_ARGUMENT, "NV_ERR_INVALID_ARGUMENT", "Invalid argument to call"},
    {NV_ERR_INVALID_CHANNEL, "NV_ERR_INVALID_CHANNEL", "Given channel-id not valid"},
    {NV_ERR_INVALID_CLASS, "NV_ERR_INVALID_CLASS", "Given class-id not valid"},
    {NV_ERR_INVALID_CLIENT, "NV_ERR_INVALID_CLIENT", "Given client not valid"},
    {NV_ERR_INVALID_COMMAND, "NV_ERR_INVALID_COMMAND", "Command passed is not valid"},
    {NV_ERR_INVALID_DEVICE, "NV_ERR_INVALID_DEVICE", "Current device is not valid"},
    {NV_ERR_INVALID_FLAGS, "NV_ERR_INVALID_FLAGS", "Invalid flags passed"},
    {NV_ERR_INVALID_LIMIT, "NV_ERR_INVALID_LIMIT", "Generic Error: Invalid limit"},
    {NV_ERR_INVALID_OBJECT, "NV_ERR_INVALID_OBJECT", "Object not valid"},
    {NV_ERR_INVALID_OBJECT_HANDLE, "NV_ERR_INVALID_OBJECT_HANDLE", "Object handle is not valid"},
    {NV_ERR_INVALID_OBJECT_NEW, "NV_ERR_INVALID_OBJECT_NEW", "New object is not valid"},
    {NV_ERR_INVALID_OBJECT_PARENT, "NV_ERR_INVALID_OBJECT_PARENT", "Object parent is not valid"},
    {NV_ERR_INVALID_OFFSET, "NV_ERR_INVALID_OFFSET", "The offset passed is not valid"},
    {NV_ERR_INVALID_PARAM_STRUCT, "NV_ERR_INVALID_PARAM_STRUCT", "Invalid structure parameter"},
    {NV_ERR_INVALID_PARAMETER, "NV_ERR_INVALID_PARAMETER", "At least one of the parameters passed is not valid"},
    {NV_ERR_INVALID_REQUEST, "NV_ERR_INVALID_REQUEST", "Generic Error: Invalid request"},
    {NV_ERR_INVALID_STATE, "NV_ERR_INVALID_STATE", "Generic Error: Invalid state"},
    {NV_ERR_NO_MEMORY, "NV_ERR_NO_MEMORY", "Out of memory"},
    {NV_ERR_NOT_SUPPORTED, "NV_ERR_NOT_SUPPORTED", "Call not supported"},
    {NV_ERR_OBJECT_NOT_FOUND, "NV_ERR_OBJECT_NOT_FOUND", "Requested object not found"},
    {NV_ERR_RESET_REQUIRED, "NV_ERR_RESET_REQUIRED", "Reset required"},
    {NV_ERR_STATE_IN_USE, "NV_ERR_STATE_IN_USE", "State in use"},
    {NV_ERR_TIMEOUT, "NV_ERR_TIMEOUT", "Call timed out"},
    {NV_ERR_MEMORY_ERROR, "NV_ERR_MEMORY_ERROR", "Generic memory error"},
    {NV_ERR_GENERIC, "NV_ERR_GENERIC", "Failure: Generic Error"},
};

}  // namespace

std::string describe_status(uint32_t status) {
    for (const StatusName& entry : kStatusNames) {
        if (entry.code == status) return fmt::format("{} (0x{:x}, {})", entry.name, status, entry.text);
    }
    return fmt::format("NV_STATUS 0x{:x}", status);
}

}  // namespace baregpu::nv
