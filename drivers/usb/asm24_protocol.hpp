// The ASM2464 custom-firmware protocol: USB IDs, endpoints, vendor requests, controller (XDATA)
// addresses and the SRAM windows the GPU can DMA into. There is no public header for any of it;
// every value is from tinygrad (tinygrad/runtime/support/usb.py, support/system.py USBPCIDevice,
// ops_amd.py USBIface).
#pragma once

#include <chrono>
#include <cstdint>

namespace baregpu::usb::asm24 {

// USB IDs (ASMedia's stock IDs; tinygrad usb.py for the custom firmware's).
inline constexpr uint16_t kAsmediaVendor = 0x174C;  // stock firmware: 0x2464 (ASM2464PD), 0x2463
inline constexpr uint16_t kStockProduct2464 = 0x2464;
inline constexpr uint16_t kStockProduct2463 = 0x2463;
inline constexpr uint16_t kCustomVendorOld = 0xADD1;  // tinygrad's custom firmware, product 0x0001
inline constexpr uint16_t kCustomVendor = 0x3801;  // since 2026-07-31
inline constexpr uint16_t kCustomProduct = 0x0001;

// Endpoints of the custom firmware.
inline constexpr uint8_t kBulkOut = 0x02;
inline constexpr uint8_t kBulkIn = 0x81;

// Vendor requests on EP0 (usb.py ASM24Controller).
inline constexpr uint8_t kReqXdataRead = 0xE4;  // IN, wValue = XDATA address, wLength <= 0xFF
inline constexpr uint8_t kReqXdataWrite = 0xE5;  // OUT, wValue = address, wIndex = the byte
inline constexpr uint8_t kReqTlp = 0xF0;  // OUT: issue TLP(s); IN: 8-byte completion of the last mode-0 TLP
inline constexpr uint8_t kReqSramArm = 0xF2;  // OUT, wValue = sectors | 0x8000 for read, wIndex = slot | nslots << 8
inline constexpr uint8_t kReqPciePower = 0xF3;  // OUT, wValue = 1 on / 0 off

inline constexpr unsigned kXdataReadMax = 0xFF;
inline constexpr uint16_t kSramArmRead = 0x8000;

// XDATA addresses.
inline constexpr uint16_t kXdataLtssm = 0xB450;  // LTSSM state
inline constexpr uint8_t kLtssmL0 = 0x78;  // link up
inline constexpr uint16_t kXdataSysBuf = 0xA000;  // 4 KB SRAM, GPU sees it at kGpuSysBuf
inline constexpr uint16_t kXdataCqBuf = 0xB800;  // 4 KB SRAM, GPU sees it at kGpuCqBuf
// 0xF000..0xFFFF shows the first 4 KB of the SRAM at kGpuSram (asm2464pd-firmware app/README.md,
// "maps to PCIe 0x200000, first 4KB only"; pcie/test_sram_verify.py compares the two).
inline constexpr uint16_t kXdataBulkWindow = 0xF000;

// The SRAM the GPU can DMA into, at fixed PCIe addresses (system.py USBPCIDevice, ops_amd.py USBIface).
inline constexpr uint64_t kGpuSram = 0x200000;  // 512 KB behind the bulk engine
inline constexpr uint64_t kSramBytes = 512 * 1024;
inline constexpr uint64_t kSramSlotBytes = 16 * 1024;  // 0xF2 slot unit
inline constexpr unsigned kSramSlots = kSramBytes / kSramSlotBytes;
inline constexpr uint64_t kSectorBytes = 512;  // 0xF2 length unit
inline constexpr uint64_t kGpuSysBuf = 0x820000;  // "the NVMe SQ region"
inline constexpr uint64_t kGpuCqBuf = 0x822000;  // a device write here releases an armed SRAM read (README.md)
inline constexpr uint64_t kSmallWindowBytes = 4096;

// Timeouts (usb.py): control 1 s (0xF0 OUT and its completion read 5 s), bulk OUT 1 s (async 10 s), bulk IN 30 s.
inline constexpr std::chrono::milliseconds kControlTimeout{1000};
inline constexpr std::chrono::milliseconds kTlpTimeout{5000};
inline constexpr std::chrono::milliseconds kPowerTimeout{10000};
inline constexpr std::chrono::milliseconds kBulkOutTimeout{1000};
inline constexpr std::chrono::milliseconds kAsyncBulkTimeout{10000};
inline constexpr std::chrono::milliseconds kBulkInTimeout{30000};

// Non-posted TLPs: a transport error is retried 10 times, 1 ms apart (usb.py pcie_request).
inline constexpr unsigned kTlpRetries = 10;
inline constexpr std::chrono::milliseconds kTlpRetryDelay{1};

// ---- The stock (and patched stock) firmware, driven by SCSI commands (tinygrad usb.py before commit
// d6fddb066f, ASM24Controller; research nv_qcom_usb.md C.8). No public source describes them. ----

// The XDATA TLP engine. Multi-byte registers are big-endian.
inline constexpr uint16_t kTlpData = 0xB220;  // write data in, completion data out (4 bytes)
inline constexpr uint16_t kTlpAddressLow = 0xB218;  // address [31:0], dword aligned (4 bytes)
inline constexpr uint16_t kTlpAddressHigh = 0xB21C;  // address [63:32] (4 bytes)
inline constexpr uint16_t kTlpByteEnables = 0xB217;
inline constexpr uint16_t kTlpFmtType = 0xB210;
inline constexpr uint16_t kTlpArm = 0xB254;  // written 0x0F before every launch
inline constexpr uint8_t kTlpArmValue = 0x0F;
inline constexpr uint16_t kTlpStatus = 0xB296;  // write 0x04: launch; read: bit 1 done, bit 0 error (write 0x01 to clear)
inline constexpr uint8_t kTlpLaunch = 0x04, kTlpDone = 0x02, kTlpError = 0x01;
inline constexpr uint16_t kTlpCompletionHasData = 0xB284;  // bit 0: the completion carried data (config reads)
inline constexpr uint16_t kTlpCompletion = 0xB22A;  // 2 bytes: status [15:13], byte count [11:0]

// The controller init writes tinygrad's ASM24Controller makes before anything else (their meaning is not public).
struct XdataInit {
    uint16_t address;
    uint8_t bytes[4];
    uint8_t length;
};
inline constexpr XdataInit kStockInit[] = {{0x054B, {0x20}, 1}, {0x054E, {0x04}, 1}, {0x05A8, {0x02}, 1}, {0x05F8, {0x04}, 1},
                                            {0x07EC, {0x01, 0x00, 0x00, 0x00}, 4}, {0xC422, {0x02}, 1}, {0x0000, {0x33}, 1}};

// Around every WRITE(16) into the SRAM (usb.py scsi_write): 0x07EF = 0 before ("re-arm SCSI write
// path"), 0x0171 = ff ff ff and 0xCE6E = 00 00 after; after a write of more than 16 KB, 0xCE40..0xCE43 = 0.
inline constexpr uint16_t kScsiWriteRearm = 0x07EF;
inline constexpr uint16_t kScsiWriteDone = 0x0171;
inline constexpr uint16_t kScsiWriteClear = 0xCE6E;
inline constexpr uint16_t kScsiWriteLargeClear = 0xCE40;
inline constexpr uint64_t kScsiWriteLarge = 16 * 1024;

// PCIe writes per USB batch (usb.py pcie_mem_write: "16 for Linux", "benchmarked values").
inline constexpr unsigned kTlpsPerBatch = 16;

}  // namespace baregpu::usb::asm24
