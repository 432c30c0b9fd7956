// Where the simulated devices, and the drivers the registry composes with them, find firmware:
// $BAREGPU_FIRMWARE_PATH, then the real linux-firmware files this build carries (the Meson option
// firmware_dir, by default firmware/ in the source tree), then /lib/firmware. A real GPU never
// sees the carried files: its driver searches firmware-loader's path alone.
#pragma once

#include "firmware-loader/search_path.hpp"

#include <filesystem>

namespace baregpu::sim {

// The directory the build carries ("<source>/firmware" unless -Dfirmware_dir= says otherwise).
std::filesystem::path carried_firmware_dir();

fw::FirmwareSearchPath firmware_search_path();

}  // namespace baregpu::sim
