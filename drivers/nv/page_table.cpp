#include "page_table.hpp"

#include "base/checked.hpp"
#include "base/error.hpp"

#include <fmt/format.h>

namespace baregpu::nv {

struct PageTable::Table {
    unsigned level = 0;
    VramAllocation allocation;
    uint64_t offset = 0;  // VRAM offset
    struct Entry {
        enum class Kind : uint8_t { empty, table, leaf } kind = Kind::empty;
        uint64_t address = 0;
        Aperture aperture = Aperture::vram;
        std::unique_ptr<Table> child;
    };
    std::vector<Entry> entries;
};

namespace {
constexpr uint64_t k4K = uint64_t{1} << 12, k2M = uint64_t{1} << 21, k512M = uint64_t{1} << 29;
}

PageTable::PageTable(std::string device, MmuVersion version, VramAllocator& vram, WriteVram64 write64,
                     WriteRegister write_register)
    : device_(std::move(device)), version_(version), geometry_(mmu_geometry(version)), vram_(vram),
      write64_(std::move(write64)), write_register_(std::move(write_register)) {
    root_ = new_table(0);
}

PageTable::~PageTable() {
    // Give the tables' VRAM back; a failure here (a corrupt allocator) must not throw from a destructor.
    std::vector<Table*> stack{root_.get()};
    while (!stack.empty()) {
        Table* t = stack.back();
        stack.pop_back();
        for (auto& e : t->entries)
            if (e.child) stack.push_back(e.child.get());
        try {
            vram_.free(t->allocation);
        } catch (const Error&) {
        }
    }
}

uint64_t PageTable::root() const { return root_->offset; }

std::unique_ptr<PageTable::Table> PageTable::new_table(unsigned level) {
    const MmuLevel& l = geometry_.levels[level];
    uint64_t entries = uint64_t{1} << l.index_bits;
    uint64_t bytes = entries * l.entry_bytes;
    auto t = std::make_unique<Table>();
    t->level = level;
    t->allocation = vram_.allocate(bytes < k4K ? k4K : bytes, /*contiguous=*/true);
    t->offset = t->allocation.blocks.front().offset;
    t->entries.resize(entries);
    for (uint64_t at = 0; at < bytes; at += 8) write64_(t->offset + at, 0);  // every entry invalid
    ++stats_.tables;
    return t;
}

void PageTable::write_entry(const Table& t, uint64_t index, uint64_t lo, uint64_t hi) {
    const MmuLevel& l = geometry_.levels[t.level];
    uint64_t at = t.offset + index * l.entry_bytes;
    if (l.entry_bytes == 16) write64_(at + 8, hi);
    write64_(at, lo);
}

unsigned PageTable::level_of_size(uint64_t page_size) const {
    unsigned shift = page_size == k512M ? 29 : page_size == k2M ? 21 : 12;
    for (unsigned i = 0; i < geometry_.level_count; ++i)
        if (geometry_.levels[i].shift == shift) return i;
    throw Error(device_, fmt::format("page table: no level for page size {:#x}", page_size));
}

uint64_t PageTable::leaf_size_for(uint64_t va, uint64_t address, uint64_t remaining) const {
    for (uint64_t size : {k512M, k2M})
        if (va % size == 0 && address % size == 0 && remaining >= size) return size;
    return k4K;
}

void PageTable::check_range(GpuVirtualAddress va, uint64_t size, const char* what) const {
    auto end = checked_add(va.value(), size);
    if (va.value() % k4K != 0 || size % k4K != 0 || size == 0 || !end || *end > (uint64_t{1} << geometry_.va_bits))
        throw Error(device_, fmt::format("page table: {} [{}, +{:#x}) must be 4 KiB aligned, non-empty and inside the "
                                         "{}-bit VA space", what, va.hex(), size, geometry_.va_bits));
}

namespace {
bool table_in_use(const PageTable::Table& t) {
    for (const auto& e : t.entries) {
        if (e.kind == PageTable::Table::Entry::Kind::leaf) return true;
        if (e.child && table_in_use(*e.child)) return true;
    }
    return false;
}
}  // namespace

void PageTable::map(GpuVirtualAddress va, uint64_t address, uint64_t size, const PteAttributes& attributes) {
    check_range(va, size, "map");
    if (address % k4K != 0)
        throw Error(device_, fmt::format("page table: map of {} to {:#x}: the physical address must be 4 KiB aligned",
                                         va.hex(), address));
    // Pass 1: nothing in the range is mapped yet (so a refused map changes nothing), and every
    // entry encodes (encode_pte throws for an address that does not fit).
    for (uint64_t done = 0; done < size;) {
        uint64_t v = va.value() + done, leaf = leaf_size_for(v, address + done, size - done);
        (void)encode_pte(version_, address + done, attributes);
        unsigned target = level_of_size(leaf);
        const Table* t = root_.get();
        for (unsigned level = 0;; ++level) {
            const MmuLevel& l = geometry_.levels[level];
            const auto& e = t->entries[(v >> l.shift) & ((uint64_t{1} << l.index_bits) - 1)];
            if (e.kind == Table::Entry::Kind::leaf || (level == target && e.child && table_in_use(*e.child)))
                throw Error(device_, fmt::format("page table: map of [{}, +{:#x}): VA {:#x} is already mapped",
                                                 va.hex(), size, v));
            if (level == target || !e.child) break;
            t = e.child.get();
        }
        done += leaf;
    }
    // Pass 2: write tables, then leaves.
    for (uint64_t done = 0; done < size;) {
        uint64_t v = va.value() + done, phys = address + done, leaf = leaf_size_for(v, phys, size - done);
        unsigned target = level_of_size(leaf);
        Table* t = root_.get();
        for (unsigned level = 0; level < target; ++level) {
            const MmuLevel& l = geometry_.levels[level];
            uint64_t index = (v >> l.shift) & ((uint64_t{1} << l.index_bits) - 1);
            auto& e = t->entries[index];
            if (!e.child) {
                e.child = new_table(level + 1);
                e.kind = Table::Entry::Kind::table;
                if (l.entry_bytes == 16) {
                    auto dual = encode_dual_pde_small(version_, e.child->offset, Aperture::vram);
                    write_entry(*t, index, dual[0], dual[1]);
                } else {
                    write_entry(*t, index, encode_pde(version_, e.child->offset, Aperture::vram), 0);
                }
            }
            t = e.child.get();
        }
        const MmuLevel& l = geometry_.levels[target];
        uint64_t index = (v >> l.shift) & ((uint64_t{1} << l.index_bits) - 1);
        auto& e = t->entries[index];
        e.kind = Table::Entry::Kind::leaf;
        e.address = phys;
        e.aperture = attributes.aperture;
        write_entry(*t, index, encode_pte(version_, phys, attributes), 0);
        (leaf == k512M ? stats_.leaves_512m : leaf == k2M ? stats_.leaves_2m : stats_.leaves_4k)++;
        done += leaf;
    }
    invalidate_tlb();
}

void PageTable::unmap(GpuVirtualAddress va, uint64_t size) {
    check_range(va, size, "unmap");
    struct Found { Table* table; uint64_t index; uint64_t page_size; };
    std::vector<Found> leaves;
    for (uint64_t done = 0; done < size;) {
        uint64_t v = va.value() + done;
        Table* t = root_.get();
        std::optional<Found> found;
        for (unsigned level = 0; level < geometry_.level_count; ++level) {
            const MmuLevel& l = geometry_.levels[level];
            uint64_t index = (v >> l.shift) & ((uint64_t{1} << l.index_bits) - 1);
            auto& e = t->entries[index];
            if (e.kind == Table::Entry::Kind::leaf) {
                found = Found{t, index, uint64_t{1} << l.shift};
                break;
            }
            if (!e.child) break;
            t = e.child.get();
        }
        if (!found)
            throw Error(device_, fmt::format("page table: unmap of [{}, +{:#x}): VA {:#x} is not mapped", va.hex(), size, v));
        if (v % found->page_size != 0 || size - done < found->page_size)
            throw Error(device_, fmt::format("page table: unmap of [{}, +{:#x}) would split the {:#x}-byte leaf at VA {:#x}",
                                             va.hex(), size, found->page_size, v & ~(found->page_size - 1)));
        leaves.push_back(*found);
        done += found->page_size;
    }
    for (const auto& f : leaves) {
        auto& e = f.table->entries[f.index];
        e.kind = Table::Entry::Kind::empty;
        write_entry(*f.table, f.index, 0, 0);
    }
    invalidate_tlb();
}

std::optional<PageTable::Leaf> PageTable::lookup(GpuVirtualAddress va) const {
    if (va.value() >> geometry_.va_bits) return std::nullopt;
    const Table* t = root_.get();
    for (unsigned level = 0; level < geometry_.level_count; ++level) {
        const MmuLevel& l = geometry_.levels[level];
        const auto& e = t->entries[(va.value() >> l.shift) & ((uint64_t{1} << l.index_bits) - 1)];
        if (e.kind == Table::Entry::Kind::leaf) {
            uint64_t page = uint64_t{1} << l.shift;
            return Leaf{e.address + (va.value() & (page - 1)), page, e.aperture};
        }
        if (!e.child) return std::nullopt;
        t = e.child.get();
    }
    return std::nullopt;
}

void PageTable::invalidate_tlb() {
    // dev_vm.h: INVALIDATE_PDB ADDR 31:4 = pdb >> 12, APERTURE 1:1 = VID_MEM (0); UPPER_PDB ADDR 19:0
    // = pdb >> 40; then INVALIDATE with ALL_VA and TRIGGER.
    uint64_t pdb = root_->offset;
    write_register_(NV_VIRTUAL_FUNCTION_FULL_PHYS_OFFSET + NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_PDB,
                    static_cast<uint32_t>(((pdb >> 12) << 4) & 0xfffffff0u));
    write_register_(NV_VIRTUAL_FUNCTION_FULL_PHYS_OFFSET + NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE_UPPER_PDB,
                    static_cast<uint32_t>((pdb >> 40) & 0xfffffu));
    write_register_(NV_VIRTUAL_FUNCTION_FULL_PHYS_OFFSET + NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE,
                    kMmuInvalidateAllVa | kMmuInvalidateTrigger);
    ++stats_.invalidates;
}

}  // namespace baregpu::nv
