// A signed PSP binary, as the PSP TOC inside psp_<ver>_sos.bin is: a 256-byte header with the
// cookie "$PS1" at 0x10 and the signed body's length at 0x14, the body, then the signature.
// The cookie and its place: Linux drivers/platform/x86/amd/pmf/pmf.h (POLICY_SIGN_COOKIE 0x31535024,
// POLICY_COOKIE_OFFSET 0x10, struct cookie_header {sign, length}), which reads the same PSP header.
// Only the packaging is read: the body is the PSP's to interpret (and LICENSE.amdgpu forbids
// analysing it).
#pragma once

#include "firmware-loader/byte_reader.hpp"

namespace baregpu::fw::amd {

struct PspSignedBinary {
    static constexpr uint32_t kCookie = 0x31535024;  // "$PS1"
    static constexpr uint64_t kHeaderBytes = 256;

    Region header;     // the 256-byte header
    Region body;       // the signed payload
    Region signature;  // what follows the body (may be empty)
};

// blob: a region of file (a PSP binary from psp_firmware_header). Errors quote file offsets.
PspSignedBinary parse_psp_signed_binary(const ByteReader& file, Region blob);

}  // namespace baregpu::fw::amd
