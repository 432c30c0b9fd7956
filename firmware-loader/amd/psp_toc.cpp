#include "firmware-loader/amd/psp_toc.hpp"

namespace baregpu::fw::amd {

PspSignedBinary parse_psp_signed_binary(const ByteReader& file, Region blob) {
    file.expect(blob.size() >= PspSignedBinary::kHeaderBytes, "PSP binary header", blob.offset,
                "at least 256 bytes", std::to_string(blob.size()) + " bytes");
    file.expect_eq(file.u32(blob.offset + 0x10, "PSP binary cookie"), PspSignedBinary::kCookie,
                   "PSP binary cookie (\"$PS1\")", blob.offset + 0x10);
    uint32_t body = file.u32(blob.offset + 0x14, "PSP binary body length");
    file.expect(body <= blob.size() - PspSignedBinary::kHeaderBytes, "PSP binary body length", blob.offset + 0x14,
                "at most " + std::to_string(blob.size() - PspSignedBinary::kHeaderBytes) + " (the binary less its header)",
                std::to_string(body));
    PspSignedBinary out;
    out.header = file.region(blob.offset, PspSignedBinary::kHeaderBytes, "PSP binary header");
    out.body = file.region(out.header.end(), body, "PSP binary body");
    out.signature = file.region(out.body.end(), blob.end() - out.body.end(), "PSP binary signature");
    return out;
}

}  // namespace baregpu::fw::amd
