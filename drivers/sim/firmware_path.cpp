#include "drivers/sim/firmware_path.hpp"

namespace baregpu::sim {

std::filesystem::path carried_firmware_dir() { return BAREGPU_CARRIED_FIRMWARE_DIR; }

fw::FirmwareSearchPath firmware_search_path() { return fw::FirmwareSearchPath::from_environment({carried_firmware_dir()}); }

}  // namespace baregpu::sim
