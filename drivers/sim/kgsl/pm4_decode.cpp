#include "drivers/sim/kgsl/pm4_decode.hpp"

#include <fmt/format.h>

namespace baregpu::sim::kgsl::pm4 {

Header decode(uint32_t w) {
    Header h;
    if ((w & 0xf0000000u) == 0x70000000u) {
        h.count = w & 0x3fff;
        h.opcode = (w >> 16) & 0x7f;
        if (((w >> 15) & 1) != odd_parity_bit(h.count)) {
            h.error = fmt::format("type-7 header 0x{:08x}: count parity bit 15 is {} for count {}", w, (w >> 15) & 1, h.count);
        } else if (((w >> 23) & 1) != odd_parity_bit(h.opcode)) {
            h.error = fmt::format("type-7 header 0x{:08x}: opcode parity bit 23 is {} for opcode 0x{:x}", w, (w >> 23) & 1, h.opcode);
        } else if ((w & 0x0f000000u) != 0) {
            h.error = fmt::format("type-7 header 0x{:08x}: reserved bits 24-27 are set", w);
        } else {
            h.type = Header::type7;
        }
    } else if ((w & 0xf0000000u) == 0x40000000u) {
        h.count = w & 0x7f;
        h.reg = (w >> 8) & 0x3ffff;
        if (((w >> 7) & 1) != odd_parity_bit(h.count)) {
            h.error = fmt::format("type-4 header 0x{:08x}: count parity bit 7 is {} for count {}", w, (w >> 7) & 1, h.count);
        } else if (((w >> 27) & 1) != odd_parity_bit(h.reg)) {
            h.error = fmt::format("type-4 header 0x{:08x}: register parity bit 27 is {} for register 0x{:x}", w, (w >> 27) & 1, h.reg);
        } else if ((w & 0x04000000u) != 0) {
            h.error = fmt::format("type-4 header 0x{:08x}: reserved bit 26 is set", w);
        } else {
            h.type = Header::type4;
        }
    } else {
        h.error = fmt::format("0x{:08x} is not a type-4 or type-7 packet header (A6xx executes no other types)", w);
    }
    return h;
}

const ProtectedRange* protected_range(uint32_t reg) {
    static const ProtectedRange ranges[] = {
        {0x00000, 0x004ff, "RBBM"},
        {0x00800, 0x0097f, "CP control (CP_PROTECT_REG[], ring and SQE registers)"},
        {0x00e00, 0x00e0f, "UCHE"},
        {0x08e00, 0x08e50, "GBIF"},
    };
    for (const ProtectedRange& r : ranges) {
        if (reg >= r.first && reg <= r.last) return &r;
    }
    return nullptr;
}

const char* opcode_name(uint32_t opcode) {
    switch (opcode) {
        case CP_NOP: return "CP_NOP";
        case CP_WAIT_MEM_WRITES: return "CP_WAIT_MEM_WRITES";
        case CP_WAIT_FOR_ME: return "CP_WAIT_FOR_ME";
        case CP_WAIT_FOR_IDLE: return "CP_WAIT_FOR_IDLE";
        case CP_EXEC_CS: return "CP_EXEC_CS";
        case CP_LOAD_STATE6_FRAG: return "CP_LOAD_STATE6_FRAG";
        case CP_WAIT_REG_MEM: return "CP_WAIT_REG_MEM";
        case CP_MEM_WRITE: return "CP_MEM_WRITE";
        case CP_REG_TO_MEM: return "CP_REG_TO_MEM";
        case CP_COND_EXEC: return "CP_COND_EXEC";
        case CP_EVENT_WRITE: return "CP_EVENT_WRITE";
        case CP_SET_MARKER: return "CP_SET_MARKER";
    }
    return "unknown";
}

}  // namespace baregpu::sim::kgsl::pm4
