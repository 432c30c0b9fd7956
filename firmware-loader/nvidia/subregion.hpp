// A part of a file given by an (offset, size) pair relative to an enclosing region (a data
// image, a ROM image, an ELF section table): both ends are checked against the enclosing
// region, not only against the file, so one structure cannot reach into its neighbour.
#pragma once

#include "firmware-loader/byte_reader.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace baregpu::fw::nv {

// [parent.offset + offset, ... + size) as a Region of the file. field names the (offset, size)
// pair in errors; at is the file offset of the field that held offset.
inline Region subregion(const ByteReader& file, const Region& parent, uint64_t offset, uint64_t size,
                        std::string_view field, uint64_t at) {
    if (offset > parent.size() || size > parent.size() - offset) {
        file.fail(field, at,
                  "a region inside the " + std::to_string(parent.size()) + "-byte region at " + hex(parent.offset),
                  "offset " + hex(offset) + " size " + hex(size));
    }
    return file.region(parent.offset + offset, size, field);
}

}  // namespace baregpu::fw::nv
