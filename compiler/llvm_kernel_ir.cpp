#include "compiler/llvm_kernel_ir.hpp"

#include "base/error.hpp"
#include "compiler/cpu_codegen.hpp"
#include "compiler/cpu_kernel_abi.hpp"
#include "compiler/matmul_match.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace baregpu::compiler {

namespace {

// Builds the kernel function. Every loop counter and accumulator lives in an alloca of the
// entry block; the O3 pipeline promotes them to SSA values before the loop passes run.
class Emitter {
public:
    Emitter(llvm::Module& module, const Kernel& kernel)
        : ctx_(module.getContext()), module_(module), k_(kernel), b_(ctx_), i1_(b_.getInt1Ty()), i8_(b_.getInt8Ty()),
          i32_(b_.getInt32Ty()), i64_(b_.getInt64Ty()), f32_(b_.getFloatTy()), ptr_(b_.getPtrTy()) {}

    llvm::Function* emit_cpu(const Target& target) {
        cpu_ = true;
        auto* fn_type = llvm::FunctionType::get(b_.getVoidTy(), {ptr_, ptr_}, false);
        fn_ = llvm::Function::Create(fn_type, llvm::Function::ExternalLinkage, k_.name(), module_);
        fn_->addFnAttr(llvm::Attribute::NoUnwind);
        fn_->addFnAttr("target-cpu", target.cpu);
        fn_->addFnAttr("target-features", target.features);
        llvm::Argument* kernargs = fn_->getArg(0);
        llvm::Argument* dispatch = fn_->getArg(1);
        kernargs->addAttr(llvm::Attribute::NoAlias);
        kernargs->addAttr(llvm::Attribute::ReadOnly);
        dispatch->addAttr(llvm::Attribute::NoAlias);
        dispatch->addAttr(llvm::Attribute::ReadOnly);

        entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
        b_.SetInsertPoint(entry_);
        out_ = b_.CreateLoad(ptr_, kernargs, "out");
        for (size_t i = 0; i < k_.inputs.size(); ++i) {
            in_.push_back(b_.CreateLoad(ptr_, b_.CreateConstGEP1_64(i8_, kernargs, 8 * (i + 1)), fmt::format("in{}", i)));
        }
        llvm::Value* group = b_.CreateZExt(b_.CreateLoad(i32_, b_.CreateConstGEP1_64(i8_, dispatch, cpu_abi::kDispatchGroupIdOffset)), i64_);
        llvm::Value* groups = b_.CreateZExt(b_.CreateLoad(i32_, b_.CreateConstGEP1_64(i8_, dispatch, cpu_abi::kDispatchGridOffset)), i64_);

        Shape full = k_.full_shape;
        // Named, not bound: the loop lambdas below capture them (clang 14, which builds the
        // sanitizer tests, cannot capture a structured binding).
        const auto axes = output_axes(k_);
        const auto& outer = axes.first;
        const auto& inner = axes.second;
        const Block blk = block_for(target);
        if (std::optional<MatmulPlan> plan = match_matmul(k_, blk.mr, blk.nr)) {
            emit_matmul(*plan, target, group, groups);
            b_.CreateRetVoid();
            return fn_;
        }
        const int64_t total = k_.output_elements();
        const int64_t row_len = inner ? full[*inner] : 1;
        const Expr* red = find_reduce(*k_.root);
        const bool interchange = red && inner && row_len <= kMaxPartials && prefers_inner_axis(*red, *inner);

        // This workgroup's chunk [begin, end) of the output's row-major elements.
        llvm::Value* n = c64(total);
        llvm::Value* per = b_.CreateUDiv(b_.CreateAdd(n, b_.CreateSub(groups, c64(1))), groups);
        llvm::Value* begin = umin(b_.CreateMul(group, per), n);
        llvm::Value* end = umin(b_.CreateAdd(begin, per), n);
        llvm::Value* row_begin = b_.CreateUDiv(begin, c64(row_len));
        llvm::Value* row_end = b_.CreateUDiv(b_.CreateAdd(end, c64(row_len - 1)), c64(row_len));

        loop(row_begin, row_end, "row", [&](llvm::Value* row) {
            std::vector<llvm::Value*> idx(full.size(), c64(0));
            llvm::Value* rest = row;
            for (size_t j = outer.size(); j-- > 0;) {
                size_t d = outer[j];
                idx[d] = b_.CreateURem(rest, c64(full[d]));
                rest = b_.CreateUDiv(rest, c64(full[d]));
            }
            llvm::Value* row_start = b_.CreateMul(row, c64(row_len));
            llvm::Value* lo = b_.CreateSub(umax(begin, row_start), row_start);
            llvm::Value* hi = b_.CreateSub(umin(end, b_.CreateAdd(row_start, c64(row_len))), row_start);
            // This row's row reductions, before its elements: each reads the row once (from
            // memory; the next one and the element loop find it in cache).
            for (const Expr* r : row_reduces(*k_.root)) row_value(*r, idx);
            llvm::AllocaInst* partial = nullptr;
            if (interchange) {
                // Reduction loops outside, the output's inner axis inside: one accumulator per
                // element of the row, unit-stride loads in the vectorized loop.
                DType t = red->dtype;
                llvm::Type* vt = value_type(t);
                partial = entry_alloca(llvm::ArrayType::get(vt, uint64_t(row_len)), "partial");
                auto slot = [&](llvm::Value* i) { return b_.CreateGEP(vt, partial, i); };
                loop(lo, hi, "init", [&](llvm::Value* i) { b_.CreateStore(reduce_init(*red), slot(i)); });
                std::function<void(size_t)> nest = [&](size_t level) {
                    if (level == k_.reduce_axes.size()) {
                        loop(lo, hi, "acc", [&](llvm::Value* i) {
                            idx[*inner] = i;
                            Memo below;
                            llvm::Value* x = value(*red->src[0], idx, below);
                            b_.CreateStore(reduce_combine(*red, b_.CreateLoad(vt, slot(i)), x), slot(i));
                        });
                        return;
                    }
                    size_t d = size_t(k_.reduce_axes[level]);
                    loop(c64(0), c64(full[d]), "r", [&](llvm::Value* j) {
                        idx[d] = j;
                        nest(level + 1);
                    });
                };
                nest(0);
                for (int a : k_.reduce_axes) idx[size_t(a)] = c64(0);
            }
            loop(lo, hi, "i", [&](llvm::Value* i) {
                if (inner) idx[*inner] = i;
                out_index_ = idx;
                above_.clear();
                reduced_ = partial ? b_.CreateLoad(value_type(red->dtype), b_.CreateGEP(value_type(red->dtype), partial, i)) : nullptr;
                llvm::Value* v = value(*k_.root, idx, above_);
                store(v, b_.CreateAdd(row_start, i));
            });
            row_values_.clear();  // defined in this row's body only
            row_cache_.clear();
        });
        b_.CreateRetVoid();
        return fn_;
    }


    // One work-item per output element: item = group id * kGpuBlock + item id within the group
    // (AMDGPU: workgroup.id.x / workitem.id.x; NVPTX: ctaid.x / tid.x, the same layout).
    llvm::Function* emit_gpu(const Target& target, KernelFlavor flavor) {
        std::vector<llvm::Type*> params(1 + k_.inputs.size(), ptr_);
        fn_ = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), params, false), llvm::Function::ExternalLinkage, k_.name(), module_);
        fn_->addFnAttr(llvm::Attribute::NoUnwind);
        fn_->addFnAttr("target-cpu", target.cpu);
        if (flavor == KernelFlavor::amdgpu) {
            fn_->setCallingConv(llvm::CallingConv::AMDGPU_KERNEL);
            // The kernel computes gid = group * kAmdgpuBlock + item: it must be launched with exactly
            // that block. reqd_work_group_size (the OpenCL attribute's metadata) becomes the code
            // object's .reqd_workgroup_size, which the loader passes on as KernelInfo::required_block
            // (LLVM AMDGPUUsage "Code Object V3 Metadata": .reqd_workgroup_size).
            fn_->addFnAttr("amdgpu-flat-work-group-size", fmt::format("{},{}", kAmdgpuBlock, kAmdgpuBlock));
            llvm::Metadata* block[] = {llvm::ConstantAsMetadata::get(c32(int32_t(kAmdgpuBlock))),
                                       llvm::ConstantAsMetadata::get(c32(1)), llvm::ConstantAsMetadata::get(c32(1))};
            fn_->setMetadata("reqd_work_group_size", llvm::MDNode::get(ctx_, block));
        } else {
            // A kernel entry (.entry, its arguments in .param space) by the calling convention
            // and, for tools that read only it, the nvvm.annotations "kernel" entry; maxntid
            // tells ptxas the block size it is launched with.
            fn_->setCallingConv(llvm::CallingConv::PTX_Kernel);
            if (!target.features.empty()) fn_->addFnAttr("target-features", target.features);
            llvm::NamedMDNode* annotations = module_.getOrInsertNamedMetadata("nvvm.annotations");
            for (auto [key, value] : {std::pair<const char*, int64_t>{"kernel", 1}, {"maxntidx", kAmdgpuBlock}}) {
                llvm::Metadata* md[] = {llvm::ValueAsMetadata::get(fn_), llvm::MDString::get(ctx_, key),
                                        llvm::ConstantAsMetadata::get(c32(int32_t(value)))};
                annotations->addOperand(llvm::MDNode::get(ctx_, md));
            }
            for (unsigned i = 0; i < params.size(); ++i) fn_->addParamAttr(i, llvm::Attribute::NoAlias);
        }
        entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
        b_.SetInsertPoint(entry_);
        out_ = fn_->getArg(0);
        for (size_t i = 0; i < k_.inputs.size(); ++i) in_.push_back(fn_->getArg(unsigned(i + 1)));
        using ID = llvm::Intrinsic::ID;
        const bool amd = flavor == KernelFlavor::amdgpu;
        const ID group_id = amd ? ID(llvm::Intrinsic::amdgcn_workgroup_id_x) : ID(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x);
        const ID item_id = amd ? ID(llvm::Intrinsic::amdgcn_workitem_id_x) : ID(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
        llvm::Value* group = b_.CreateZExt(b_.CreateIntrinsic(group_id, {}, {}), i64_);
        llvm::Value* item = b_.CreateZExt(b_.CreateIntrinsic(item_id, {}, {}), i64_);
        amd_ = amd;
        if (k_.has_row_reduce()) {
            emit_gpu_rows(group, item);
        } else if (std::optional<MatmulPlan> plan = match_matmul(k_, kGpuTile, kGpuTile)) {
            emit_gpu_matmul(*plan, group, item);
        } else {
            llvm::Value* gid = b_.CreateAdd(b_.CreateMul(group, c64(kAmdgpuBlock)), item);
            auto* body = llvm::BasicBlock::Create(ctx_, "body", fn_);
            auto* done = llvm::BasicBlock::Create(ctx_, "done", fn_);
            b_.CreateCondBr(b_.CreateICmpULT(gid, c64(k_.output_elements())), body, done);
            b_.SetInsertPoint(body);
            const Shape& full = k_.full_shape;
            std::vector<bool> reduced(full.size(), false);
            for (int a : k_.reduce_axes) reduced[size_t(a)] = true;
            std::vector<llvm::Value*> idx(full.size(), c64(0));
            llvm::Value* rest = gid;
            for (size_t d = full.size(); d-- > 0;) {
                if (reduced[d]) continue;
                idx[d] = b_.CreateURem(rest, c64(full[d]));
                rest = b_.CreateUDiv(rest, c64(full[d]));
            }
            out_index_ = idx;
            store(value(*k_.root, idx, above_), gid);
            b_.CreateBr(done);
            b_.SetInsertPoint(done);
        }
        b_.CreateRetVoid();
        return fn_;
    }

    // A kernel with row reductions (softmax, layernorm) on a GPU: workgroup g computes output row
    // g (gpu_workgroups). Its work-items reduce the row together (row_value: block-strided
    // partials, then a tree through LDS), so each reduction reads the row once rather than once
    // per element, then store the row's elements, block-strided (coalesced).
    void emit_gpu_rows(llvm::Value* row, llvm::Value* item) {
        const Shape& full = k_.full_shape;
        const int64_t len = full.back();
        std::vector<llvm::Value*> idx(full.size(), c64(0));
        llvm::Value* rest = row;
        for (size_t d = full.size() - 1; d-- > 0;) {
            idx[d] = b_.CreateURem(rest, c64(full[d]));
            rest = b_.CreateUDiv(rest, c64(full[d]));
        }
        item_ = item;
        llvm::Value* row_start = b_.CreateMul(row, c64(len));
        bool whole_rows = true;  // every row reduction runs over the kernel's last axis
        std::unordered_map<const Expr*, bool> seen;  // shared subexpressions once
        std::function<void(const Expr&)> check = [&](const Expr& x) {
            if (!seen.emplace(&x, true).second) return;
            if (x.kind == ExprKind::row_reduce && x.row != len) whole_rows = false;
            for (const ExprRef& s : x.src) check(*s);
        };
        check(*k_.root);
        if (whole_rows && len <= kAmdgpuBlock * kRowSlots) {
            // The row in registers: each item's elements item + 256 p, p < ceil(len / 256), each
            // with its own memo for the whole kernel, so every reduction and the element pass
            // reuse what the first one loaded: the row comes from memory once. Positions past
            // the row read its last element (in bounds) and count for nothing.
            const int64_t positions = (len + kAmdgpuBlock - 1) / kAmdgpuBlock;
            row_slots_.assign(size_t(positions), {});
            for (int64_t p = 0; p < positions; ++p) {
                llvm::Value* j = b_.CreateAdd(item, c64(p * kAmdgpuBlock));
                RowSlot& slot = row_slots_[size_t(p)];
                slot.valid = (p + 1) * kAmdgpuBlock <= len ? nullptr : b_.CreateICmpULT(j, c64(len));
                slot.idx = idx;
                slot.idx.back() = slot.valid ? umin(j, c64(len - 1)) : j;
            }
            for (const Expr* r : row_reduces(*k_.root)) row_value(*r, idx);
            for (RowSlot& slot : row_slots_) {
                out_index_ = slot.idx;
                llvm::Value* v = value(*k_.root, slot.idx, slot.memo);
                auto* body = llvm::BasicBlock::Create(ctx_, "row.store", fn_);
                auto* next = llvm::BasicBlock::Create(ctx_, "row.next", fn_);
                b_.CreateCondBr(slot.valid ? slot.valid : b_.getTrue(), body, next);
                b_.SetInsertPoint(body);
                store(v, b_.CreateAdd(row_start, slot.idx.back()));
                b_.CreateBr(next);
                b_.SetInsertPoint(next);
            }
            row_slots_.clear();
            return;
        }
        // Every work-item reaches every barrier: the reductions run before the element loop,
        // outside any branch on the item.
        for (const Expr* r : row_reduces(*k_.root)) row_value(*r, idx);
        strided_loop(item, c64(len), kAmdgpuBlock, "i", [&](llvm::Value* j) {
            idx.back() = j;
            out_index_ = idx;
            above_.clear();
            store(value(*k_.root, idx, above_), b_.CreateAdd(row_start, j));
        });
    }

    // The workgroup's combined value of each work-item's `partial` (the same value in every item):
    // a tree over kAmdgpuBlock slots of LDS / shared memory, a barrier between levels.
    llvm::Value* workgroup_reduce(const Expr& e, llvm::Value* partial) {
        llvm::Type* vt = value_type(e.dtype);
        auto* slots_type = llvm::ArrayType::get(vt, uint64_t(kAmdgpuBlock));
        constexpr unsigned kLocalAddressSpace = 3;  // AMDGPU LDS, NVPTX .shared (LLVM AMDGPUUsage, NVPTXUsage)
        auto* slots = new llvm::GlobalVariable(module_, slots_type, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(slots_type),
                                               "row_partials", nullptr, llvm::GlobalValue::NotThreadLocal, kLocalAddressSpace);
        slots->setAlignment(llvm::Align(4));
        auto slot = [&](llvm::Value* i) { return b_.CreateInBoundsGEP(slots_type, slots, {c64(0), i}); };
        b_.CreateStore(partial, slot(item_));
        barrier();
        for (int64_t half = kAmdgpuBlock / 2; half >= 1; half /= 2) {
            auto* combine = llvm::BasicBlock::Create(ctx_, "tree", fn_);
            auto* next = llvm::BasicBlock::Create(ctx_, "tree.next", fn_);
            b_.CreateCondBr(b_.CreateICmpULT(item_, c64(half)), combine, next);
            b_.SetInsertPoint(combine);
            llvm::Value* mine = b_.CreateLoad(vt, slot(item_));
            llvm::Value* other = b_.CreateLoad(vt, slot(b_.CreateAdd(item_, c64(half))));
            b_.CreateStore(reduce_combine(e, mine, other), slot(item_));
            b_.CreateBr(next);
            b_.SetInsertPoint(next);
            barrier();
        }
        return b_.CreateLoad(vt, slot(c64(0)));
    }

    // The reduce index k into the reduce axes (row-major): plain for one axis. 32-bit divisions
    // when k < 2^31 (as in index()).
    void set_reduce_index(std::vector<llvm::Value*>& at, llvm::Value* k) {
        if (k_.reduce_axes.size() > 1 && k_.reduce_elements() < (int64_t(1) << 31)) {
            llvm::Value* k32 = b_.CreateTrunc(k, i32_);
            for (size_t j = k_.reduce_axes.size(); j-- > 0;) {
                auto d = size_t(k_.reduce_axes[j]);
                if (j == 0) {
                    at[d] = b_.CreateZExt(k32, i64_);
                    break;
                }
                at[d] = b_.CreateZExt(b_.CreateURem(k32, c32(int32_t(k_.full_shape[d]))), i64_);
                k32 = b_.CreateUDiv(k32, c32(int32_t(k_.full_shape[d])));
            }
            return;
        }
        for (size_t j = k_.reduce_axes.size(); j-- > 0;) {
            auto d = size_t(k_.reduce_axes[j]);
            if (j == 0) {
                at[d] = k;
                break;
            }
            at[d] = b_.CreateURem(k, c64(k_.full_shape[d]));
            k = b_.CreateUDiv(k, c64(k_.full_shape[d]));
        }
    }

    // Matmul tile t of C (tiles row-major, batch axes outermost): its batch indices into idx, and
    // its (row, column) tile numbers.
    std::pair<llvm::Value*, llvm::Value*> decode_tile(llvm::Value* t, int64_t m_tiles, int64_t n_tiles, const MatmulPlan& p,
                                                      std::vector<llvm::Value*>& idx) {
        llvm::Value* nt = b_.CreateURem(t, c64(n_tiles));
        llvm::Value* rest = b_.CreateUDiv(t, c64(n_tiles));
        llvm::Value* mt = b_.CreateURem(rest, c64(m_tiles));
        rest = b_.CreateUDiv(rest, c64(m_tiles));
        for (size_t j = p.batch.size(); j-- > 0;) {
            size_t d = p.batch[j];
            idx[d] = b_.CreateURem(rest, c64(k_.full_shape[d]));
            rest = b_.CreateUDiv(rest, c64(k_.full_shape[d]));
        }
        return {mt, nt};
    }

    // A matmul's epilogue at output element `at` (a full-shape index; the reduce axes ignored):
    // whatever lies above the sum, the sum there being `sum`, stored row-major in the output.
    void store_above_sum(const std::vector<llvm::Value*>& at, llvm::Value* sum) {
        out_index_ = at;
        above_.clear();
        reduced_ = sum;
        llvm::Value* v = value(*k_.root, at, above_);
        reduced_ = nullptr;
        const Shape out_shape = k_.output_shape();
        llvm::Value* off = c64(0);
        for (int64_t stride = 1, d = int64_t(out_shape.size()); d-- > 0;) {
            if (out_shape[size_t(d)] != 1) off = b_.CreateAdd(off, b_.CreateMul(at[size_t(d)], c64(stride)));  // reduce axes: size 1
            stride *= out_shape[size_t(d)];
        }
        store(v, off);
    }

    // A matrix product on a GPU: workgroup g computes one T x T tile of C (T = gpu_tile: 64, or
    // 128 for C of at least 128 x 128; tiles in row-major order, batches outermost:
    // Kernel::gpu_workgroups), each of its 16 x 16 work-items an R x R block (R = T / 16) in
    // registers. Per slice of kGpuSlice along K the items stage A's and B's tiles in LDS / shared
    // memory, k-major (an item's R rows, and its R columns, are R consecutive floats: 16-byte
    // loads), then each does R * R FMAs per k. Global loads: 2 T S per T T S FMAs, 2 / T per FMA
    // (1/32, 1/64; the per-element kernel: 2). Indices past M, N or K are clamped to the last
    // valid one and their values replaced by 0, so nothing is read out of bounds and padded rows
    // and columns add nothing.
    void emit_gpu_matmul(const MatmulPlan& p, llvm::Value* group, llvm::Value* item) {
        static_assert(kGpuItemsPerSide * kGpuItemsPerSide == kAmdgpuBlock, "one micro block per work-item");
        const GpuTile shape = gpu_tile_for(k_.full_shape[p.m], k_.full_shape[p.n], tile_);
        const int64_t T = shape.side, S = shape.slice, side = kGpuItemsPerSide, R = T / side;
        const Shape& full = k_.full_shape;
        const int64_t M = full[p.m], N = full[p.n], K = k_.reduce_elements();
        const int64_t m_tiles = (M + T - 1) / T, n_tiles = (N + T - 1) / T;
        int64_t tiles = m_tiles * n_tiles;
        for (size_t d : p.batch) tiles *= full[d];
        // Workgroups past the last tile (a larger grid than gpu_workgroups) write nothing; the whole
        // workgroup leaves, so no barrier waits for it.
        auto* work = llvm::BasicBlock::Create(ctx_, "tile", fn_);
        auto* none = llvm::BasicBlock::Create(ctx_, "no_tile", fn_);
        b_.CreateCondBr(b_.CreateICmpULT(group, c64(tiles)), work, none);
        b_.SetInsertPoint(none);
        b_.CreateRetVoid();
        b_.SetInsertPoint(work);
        item_ = item;
        std::vector<llvm::Value*> idx(full.size(), c64(0));
        auto [mt, nt] = decode_tile(group, m_tiles, n_tiles, p, idx);
        llvm::Value* m0 = b_.CreateMul(mt, c64(T));
        llvm::Value* n0 = b_.CreateMul(nt, c64(T));
        llvm::Value* ty = b_.CreateUDiv(item, c64(side));
        llvm::Value* tx = b_.CreateURem(item, c64(side));

        constexpr unsigned kLocalAddressSpace = 3;  // AMDGPU LDS, NVPTX .shared (LLVM AMDGPUUsage, NVPTXUsage)
        auto* tile_type = llvm::ArrayType::get(f32_, uint64_t(S * T));
        auto shared_tile = [&](const char* name) {
            auto* g = new llvm::GlobalVariable(module_, tile_type, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(tile_type),
                                               name, nullptr, llvm::GlobalValue::NotThreadLocal, kLocalAddressSpace);
            g->setAlignment(llvm::Align(16));
            return g;
        };
        llvm::GlobalVariable* as = shared_tile("a_tile");
        llvm::GlobalVariable* bs = shared_tile("b_tile");
        auto at_tile = [&](llvm::GlobalVariable* t, llvm::Value* i) { return b_.CreateInBoundsGEP(tile_type, t, {c64(0), i}); };

        auto* vt = llvm::FixedVectorType::get(f32_, unsigned(R));
        std::vector<llvm::AllocaInst*> acc(size_t(R * R));
        for (auto*& a : acc) {
            a = entry_alloca(f32_, "acc");
            b_.CreateStore(cf(0), a);
        }
        // A factor at (row or column, k), 0 past the edges (the index clamped to stay in bounds).
        auto factor = [&](const Expr& e, size_t axis, llvm::Value* i, int64_t extent, llvm::Value* k) {
            llvm::Value* valid = b_.CreateAnd(b_.CreateICmpULT(i, c64(extent)), b_.CreateICmpULT(k, c64(K)));
            std::vector<llvm::Value*> at = idx;
            at[axis] = umin(i, c64(extent - 1));
            set_reduce_index(at, umin(k, c64(K - 1)));
            Memo memo;
            return b_.CreateSelect(valid, value(e, at, memo), cf(0));
        };
        loop(c64(0), c64((K + S - 1) / S), "kslice", [&](llvm::Value* ks) {
            llvm::Value* k0 = b_.CreateMul(ks, c64(S));
            for (int64_t r = 0; r < S * T / kAmdgpuBlock; ++r) {
                llvm::Value* e = b_.CreateAdd(item, c64(r * kAmdgpuBlock));
                // A: consecutive items along k (A's rows are usually contiguous there), stored [k][m].
                llvm::Value* am = b_.CreateUDiv(e, c64(S));
                llvm::Value* ak = b_.CreateURem(e, c64(S));
                b_.CreateStore(factor(*p.a, p.m, b_.CreateAdd(m0, am), M, b_.CreateAdd(k0, ak)),
                               at_tile(as, b_.CreateAdd(b_.CreateMul(ak, c64(T)), am)));
                // B: consecutive items along n, stored [k][n].
                llvm::Value* bk = b_.CreateUDiv(e, c64(T));
                llvm::Value* bn = b_.CreateURem(e, c64(T));
                b_.CreateStore(factor(*p.b, p.n, b_.CreateAdd(n0, bn), N, b_.CreateAdd(k0, bk)),
                               at_tile(bs, b_.CreateAdd(b_.CreateMul(bk, c64(T)), bn)));
            }
            barrier();
            auto step = [&](llvm::Value* kk) {
                llvm::Value* row = b_.CreateMul(kk, c64(T));
                llvm::Value* av = b_.CreateAlignedLoad(vt, at_tile(as, b_.CreateAdd(row, b_.CreateMul(ty, c64(R)))), llvm::Align(16));
                llvm::Value* bv = b_.CreateAlignedLoad(vt, at_tile(bs, b_.CreateAdd(row, b_.CreateMul(tx, c64(R)))), llvm::Align(16));
                for (int64_t i = 0; i < R; ++i) {
                    llvm::Value* a = b_.CreateExtractElement(av, uint64_t(i));
                    for (int64_t j = 0; j < R; ++j) {
                        llvm::AllocaInst* slot = acc[size_t(i * R + j)];
                        llvm::Value* bj = b_.CreateExtractElement(bv, uint64_t(j));
                        b_.CreateStore(b_.CreateIntrinsic(llvm::Intrinsic::fma, {f32_}, {a, bj, b_.CreateLoad(f32_, slot)}), slot);
                    }
                }
            };
            // 4 x 4 blocks: the slice unrolled. 8 x 8: a loop, one k per iteration (64 FMAs to four
            // LDS loads); unrolled, the scheduler hoisted the LDS loads of many k at once, past the
            // 256 VGPRs, and spilled to scratch.
            if (R <= 4) {
                for (int64_t kk = 0; kk < S; ++kk) step(c64(kk));
            } else {
                loop(c64(0), c64(S), "kk", step, true);
            }
            barrier();  // the next slice overwrites the tiles
        }, true);
        // The epilogue: whatever lies above the sum, at each of the item's elements inside C.
        for (int64_t i = 0; i < R; ++i) {
            for (int64_t j = 0; j < R; ++j) {
                llvm::Value* m = b_.CreateAdd(m0, b_.CreateAdd(b_.CreateMul(ty, c64(R)), c64(i)));
                llvm::Value* n = b_.CreateAdd(n0, b_.CreateAdd(b_.CreateMul(tx, c64(R)), c64(j)));
                auto* body = llvm::BasicBlock::Create(ctx_, "epilogue", fn_);
                auto* next = llvm::BasicBlock::Create(ctx_, "epilogue.next", fn_);
                b_.CreateCondBr(b_.CreateAnd(b_.CreateICmpULT(m, c64(M)), b_.CreateICmpULT(n, c64(N))), body, next);
                b_.SetInsertPoint(body);
                std::vector<llvm::Value*> at = idx;
                at[p.m] = m;
                at[p.n] = n;
                store_above_sum(at, b_.CreateLoad(f32_, acc[size_t(i * R + j)]));
                b_.CreateBr(next);
                b_.SetInsertPoint(next);
            }
        }
    }

    // Every work-item of the workgroup arrives before any goes on, and sees the others' LDS /
    // shared-memory stores (AMDGPU: workgroup-scope release and acquire fences around s_barrier,
    // LLVM AMDGPUUsage "Memory Model"; NVPTX: bar.sync 0 orders shared memory for the CTA).
    void barrier() {
        if (amd_) {
            llvm::SyncScope::ID workgroup = ctx_.getOrInsertSyncScopeID("workgroup");
            b_.CreateFence(llvm::AtomicOrdering::Release, workgroup);
            b_.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_barrier, {}, {});
            b_.CreateFence(llvm::AtomicOrdering::Acquire, workgroup);
        } else {
            b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
        }
    }

    // Whether the CPU kernel is the register-blocked matmul (whose tile shape can be chosen).
    bool blocked_matmul(const Target& target) const {
        const Block blk = block_for(target);
        return match_matmul(k_, blk.mr, blk.nr).has_value();
    }

    void set_tile(const TileShape& tile) { tile_ = tile; }

    // Stack the kernel needs beyond the CPU ABI's 64 KiB (the descriptor's private_bytes).
    uint64_t private_bytes() const { return private_bytes_; }

private:
    // Accumulators an interchanged reduction keeps per row (on the kernel's stack).
    static constexpr int64_t kMaxPartials = 4096;

    // Register blocking (Goto/BLIS): the micro-kernel keeps an mr x nr block of C in vector
    // registers over a K slice; nr is two vectors (32 floats with AVX-512, mr = kMr: 24 of the
    // 32 zmm registers are accumulators, two hold B, one the broadcast A element; half of kMr
    // rows with AVX2's 16 registers). A workgroup takes whole kMc x kNc tiles of C; per K
    // slice of kKc it packs A (kMc x kKc, 192 KiB) and B
    // (kKc x kNc, 256 KiB) into contiguous zero-padded panels on its stack, so the micro-kernel
    // reads unit-stride memory whatever the views were, its B panel (kKc x nr, 32 KiB) stays
    // in L1 while it walks the A panels in L2, and edges need no special case: padded rows and
    // columns compute zeros that the epilogue does not store. C accumulates in a kMc x kNc
    // stack buffer across K slices; the epilogue evaluates the fused expression above the sum
    // once per element.
    // kMc, kNc and kKc are the TileShape (kernel.hpp; its defaults, or the tile search's choice).
    static constexpr int64_t kMr = 12;  // TileShape::mc: a multiple of kMr (and so of kMr / 2)

    // The register block for the target: floats per vector (vl), rows (mr) and columns (nr).
    struct Block {
        int64_t vl, mr, nr;
    };
    static Block block_for(const Target& target) {
        // 32 vector registers with AVX-512: 12 x 2 accumulators; 16 with AVX2: 6 x 2.
        return has_feature(target, "avx512f") ? Block{16, kMr, 32} : Block{8, kMr / 2, 16};
    }

    static bool has_feature(const Target& target, const char* feature) {
        const std::string& f = target.features;
        for (size_t at = f.find(feature); at != std::string::npos; at = f.find(feature, at + 1)) {
            size_t end = at + std::strlen(feature);
            if (at > 0 && f[at - 1] == '+' && (end == f.size() || f[end] == ',')) return true;
        }
        return false;
    }

    llvm::AllocaInst* entry_buffer(int64_t floats, const char* name) {
        llvm::AllocaInst* a = entry_alloca(llvm::ArrayType::get(f32_, uint64_t(floats)), name);
        a->setAlignment(llvm::Align(64));
        private_bytes_ += uint64_t(floats) * 4 + 64;
        return a;
    }

    llvm::Value* fptr(llvm::Value* base, llvm::Value* index) { return b_.CreateGEP(f32_, base, index); }

    void emit_matmul(const MatmulPlan& p, const Target& target, llvm::Value* group, llvm::Value* groups) {
        const Shape& full = k_.full_shape;
        const Block blk = block_for(target);
        const int64_t vl = blk.vl, mr = blk.mr, nr = blk.nr;
        const int64_t kMc = tile_.mc, kNc = tile_.nc, kKc = tile_.kc;
        const int64_t M = full[p.m], N = full[p.n], K = k_.reduce_elements();
        auto set_k = [&](std::vector<llvm::Value*>& at, llvm::Value* k) { set_reduce_index(at, k); };
        auto* vt = llvm::FixedVectorType::get(f32_, unsigned(vl));
        llvm::AllocaInst* apack = entry_buffer(kMc * kKc, "apack");
        llvm::AllocaInst* bpack = entry_buffer(kKc * kNc, "bpack");
        llvm::AllocaInst* cbuf = entry_buffer(kMc * kNc, "cbuf");
        std::vector<std::vector<llvm::AllocaInst*>> acc(size_t(mr), std::vector<llvm::AllocaInst*>(size_t(nr / vl)));
        for (auto& row : acc) {
            for (auto*& a : row) a = entry_alloca(vt, "acc");
        }

        int64_t batches = 1;
        for (size_t d : p.batch) batches *= full[d];
        const int64_t m_tiles = (M + kMc - 1) / kMc, n_tiles = (N + kNc - 1) / kNc;
        const int64_t tiles = batches * m_tiles * n_tiles;
        // This workgroup's tiles: [g * T / G, (g + 1) * T / G).
        llvm::Value* t_begin = b_.CreateUDiv(b_.CreateMul(group, c64(tiles)), groups);
        llvm::Value* t_end = b_.CreateUDiv(b_.CreateMul(b_.CreateAdd(group, c64(1)), c64(tiles)), groups);
        loop(t_begin, t_end, "tile", [&](llvm::Value* t) {
            std::vector<llvm::Value*> idx(full.size(), c64(0));
            auto [mt, nt] = decode_tile(t, m_tiles, n_tiles, p, idx);
            llvm::Value* m0 = b_.CreateMul(mt, c64(kMc));
            llvm::Value* n0 = b_.CreateMul(nt, c64(kNc));
            llvm::Value* mlen = umin(c64(kMc), b_.CreateSub(c64(M), m0));
            llvm::Value* nlen = umin(c64(kNc), b_.CreateSub(c64(N), n0));
            llvm::Value* mpanels = b_.CreateUDiv(b_.CreateAdd(mlen, c64(mr - 1)), c64(mr));
            llvm::Value* npanels = b_.CreateUDiv(b_.CreateAdd(nlen, c64(nr - 1)), c64(nr));
            b_.CreateMemSet(cbuf, b_.getInt8(0), c64(kMc * kNc * 4), llvm::MaybeAlign(64));
            loop(c64(0), c64((K + kKc - 1) / kKc), "kslice", [&](llvm::Value* ks) {
                llvm::Value* k0 = b_.CreateMul(ks, c64(kKc));
                llvm::Value* kc = umin(c64(kKc), b_.CreateSub(c64(K), k0));
                // B panel q holds B(k0 + kk, n0 + q*nr + j) at [q][kk][j], zero past N.
                loop(c64(0), npanels, "bq", [&](llvm::Value* q) {
                    llvm::Value* nq = b_.CreateAdd(n0, b_.CreateMul(q, c64(nr)));
                    llvm::Value* jvalid = umin(c64(nr), b_.CreateSub(c64(N), nq));
                    llvm::Value* panel = fptr(bpack, b_.CreateMul(q, c64(kKc * nr)));
                    loop(c64(0), kc, "bk", [&](llvm::Value* kk) {
                        llvm::Value* dst = fptr(panel, b_.CreateMul(kk, c64(nr)));
                        loop(c64(0), jvalid, "bj", [&](llvm::Value* j) {
                            std::vector<llvm::Value*> at = idx;
                            at[p.n] = b_.CreateAdd(nq, j);
                            set_k(at, b_.CreateAdd(k0, kk));
                            Memo memo;
                            b_.CreateStore(value(*p.b, at, memo), fptr(dst, j));
                        }, p.b->kind != ExprKind::load || p.b->view.views().size() > 1 || p.b->view.has_mask());
                        loop(jvalid, c64(nr), "bz", [&](llvm::Value* j) { b_.CreateStore(cf(0), fptr(dst, j)); });
                    });
                });
                // A panel r holds A(m0 + r*mr + i, k0 + kk) at [r][kk][i], zero past M.
                loop(c64(0), mpanels, "ar", [&](llvm::Value* r) {
                    llvm::Value* row0 = b_.CreateAdd(m0, b_.CreateMul(r, c64(mr)));
                    llvm::Value* ivalid = umin(c64(mr), b_.CreateSub(c64(M), row0));
                    llvm::Value* panel = fptr(apack, b_.CreateMul(r, c64(kKc * mr)));
                    loop(c64(0), ivalid, "ai", [&](llvm::Value* i) {
                        loop(c64(0), kc, "ak", [&](llvm::Value* kk) {
                            std::vector<llvm::Value*> at = idx;
                            at[p.m] = b_.CreateAdd(row0, i);
                            set_k(at, b_.CreateAdd(k0, kk));
                            Memo memo;
                            b_.CreateStore(value(*p.a, at, memo), fptr(panel, b_.CreateAdd(b_.CreateMul(kk, c64(mr)), i)));
                        }, true);
                    }, true);
                    loop(ivalid, c64(mr), "az", [&](llvm::Value* i) {
                        loop(c64(0), kc, "azk", [&](llvm::Value* kk) {
                            b_.CreateStore(cf(0), fptr(panel, b_.CreateAdd(b_.CreateMul(kk, c64(mr)), i)));
                        });
                    });
                });
                // The micro-kernels: B panel outside (it stays in L1), A panels inside.
                loop(c64(0), npanels, "q", [&](llvm::Value* q) {
                    llvm::Value* bpanel = fptr(bpack, b_.CreateMul(q, c64(kKc * nr)));
                    loop(c64(0), mpanels, "r", [&](llvm::Value* r) {
                        llvm::Value* apanel = fptr(apack, b_.CreateMul(r, c64(kKc * mr)));
                        llvm::Value* c = fptr(cbuf, b_.CreateAdd(b_.CreateMul(r, c64(mr * kNc)), b_.CreateMul(q, c64(nr))));
                        auto cvec = [&](int64_t i, int64_t v) { return fptr(c, c64(i * kNc + v * vl)); };
                        for (int64_t i = 0; i < mr; ++i) {
                            for (int64_t v = 0; v < nr / vl; ++v) {
                                b_.CreateStore(b_.CreateAlignedLoad(vt, cvec(i, v), llvm::Align(4 * vl)), acc[size_t(i)][size_t(v)]);
                            }
                        }
                        loop(c64(0), kc, "kk", [&](llvm::Value* kk) {
                            std::vector<llvm::Value*> bv;
                            llvm::Value* brow = fptr(bpanel, b_.CreateMul(kk, c64(nr)));
                            for (int64_t v = 0; v < nr / vl; ++v) bv.push_back(b_.CreateAlignedLoad(vt, fptr(brow, c64(v * vl)), llvm::Align(4 * vl)));
                            llvm::Value* arow = fptr(apanel, b_.CreateMul(kk, c64(mr)));
                            for (int64_t i = 0; i < mr; ++i) {
                                llvm::Value* a = b_.CreateVectorSplat(unsigned(vl), b_.CreateLoad(f32_, fptr(arow, c64(i))));
                                for (int64_t v = 0; v < nr / vl; ++v) {
                                    llvm::AllocaInst* slot = acc[size_t(i)][size_t(v)];
                                    llvm::Value* sum = b_.CreateIntrinsic(llvm::Intrinsic::fma, {vt}, {a, bv[size_t(v)], b_.CreateLoad(vt, slot)});
                                    b_.CreateStore(sum, slot);
                                }
                            }
                        });
                        for (int64_t i = 0; i < mr; ++i) {
                            for (int64_t v = 0; v < nr / vl; ++v) {
                                b_.CreateAlignedStore(b_.CreateLoad(vt, acc[size_t(i)][size_t(v)]), cvec(i, v), llvm::Align(4 * vl));
                            }
                        }
                    });
                });
            });
            // The epilogue: whatever lies above the sum, at each valid element of the tile.
            loop(c64(0), mlen, "em", [&](llvm::Value* i) {
                loop(c64(0), nlen, "en", [&](llvm::Value* j) {
                    std::vector<llvm::Value*> at = idx;
                    at[p.m] = b_.CreateAdd(m0, i);
                    at[p.n] = b_.CreateAdd(n0, j);
                    store_above_sum(at, b_.CreateLoad(f32_, fptr(cbuf, b_.CreateAdd(b_.CreateMul(i, c64(kNc)), j))));
                });
            });
        });
    }

    // Whether the loads under the reduction walk memory more contiguously along the output's
    // inner axis than along the last reduce axis: then the inner-axis loop goes innermost
    // (matmul: B's rows and A's broadcast; column sums). Strides 0 and +-1 count as contiguous.
    bool prefers_inner_axis(const Expr& red, size_t inner) const {
        int along_inner = 0, along_reduce = 0;
        size_t last_reduce = size_t(k_.reduce_axes.back());
        std::function<void(const Expr&)> visit = [&](const Expr& e) {
            if (e.kind == ExprKind::load) {
                const View& v = e.view.views().back();
                auto good = [&](size_t d) { return e.view.views().size() == 1 && std::abs(v.strides[d]) <= 1; };
                along_inner += good(inner);
                along_reduce += good(last_reduce);
            }
            for (const ExprRef& s : e.src) visit(*s);
        };
        visit(*red.src[0]);
        return along_inner > along_reduce;
    }

    llvm::Constant* c64(int64_t v) { return llvm::ConstantInt::get(i64_, uint64_t(v), true); }
    llvm::Constant* c32(int32_t v) { return llvm::ConstantInt::get(i32_, uint64_t(int64_t(v)), true); }
    llvm::Constant* cf(double v) { return llvm::ConstantFP::get(f32_, v); }
    llvm::Value* umin(llvm::Value* a, llvm::Value* b) { return b_.CreateSelect(b_.CreateICmpULT(a, b), a, b); }
    llvm::Value* umax(llvm::Value* a, llvm::Value* b) { return b_.CreateSelect(b_.CreateICmpUGT(a, b), a, b); }

    llvm::Type* storage_type(DType t) {
        if (is_half(t)) return b_.getInt16Ty();
        return t == DType::float32 ? static_cast<llvm::Type*>(f32_) : t == DType::int32 ? i32_ : i8_;
    }
    // Every float type computes in float32.
    llvm::Type* value_type(DType t) { return is_float(t) ? static_cast<llvm::Type*>(f32_) : t == DType::int32 ? i32_ : i1_; }
    llvm::Value* zero(DType t) { return llvm::Constant::getNullValue(value_type(t)); }

    llvm::AllocaInst* entry_alloca(llvm::Type* type, const char* name) {
        llvm::IRBuilder<> at(entry_, entry_->begin());
        return at.CreateAlloca(type, nullptr, name);
    }

    // for (i = lo; i < hi; ++i) body(i), signed 64-bit.
    // plain: neither vectorized nor unrolled by the O3 pipeline (loops where that only costs
    // compile time and code size).
    void loop(llvm::Value* lo, llvm::Value* hi, const char* name, const std::function<void(llvm::Value*)>& body, bool plain = false) {
        counted_loop(lo, hi, 1, name, body, plain);
    }

    // for (i = lo; i < hi; i += step) body(i): a GPU work-item's share of a row.
    void strided_loop(llvm::Value* lo, llvm::Value* hi, int64_t step, const char* name, const std::function<void(llvm::Value*)>& body) {
        counted_loop(lo, hi, step, name, body, false);
    }

    void counted_loop(llvm::Value* lo, llvm::Value* hi, int64_t step, const char* name, const std::function<void(llvm::Value*)>& body,
                      bool plain) {
        llvm::AllocaInst* counter = entry_alloca(i64_, name);
        b_.CreateStore(lo, counter);
        auto* cond = llvm::BasicBlock::Create(ctx_, std::string(name) + ".cond", fn_);
        auto* blk = llvm::BasicBlock::Create(ctx_, std::string(name) + ".body", fn_);
        auto* done = llvm::BasicBlock::Create(ctx_, std::string(name) + ".end", fn_);
        b_.CreateBr(cond);
        b_.SetInsertPoint(cond);
        llvm::Value* i = b_.CreateLoad(i64_, counter);
        b_.CreateCondBr(b_.CreateICmpSLT(i, hi), blk, done);
        b_.SetInsertPoint(blk);
        body(i);
        b_.CreateStore(b_.CreateAdd(i, c64(step), "", true, true), counter);
        llvm::BranchInst* latch = b_.CreateBr(cond);
        if (plain) {
            llvm::Metadata* no_vectorize[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                                              llvm::ConstantAsMetadata::get(b_.getFalse())};
            llvm::Metadata* no_unroll[] = {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")};
            llvm::Metadata* ops[] = {nullptr, llvm::MDNode::get(ctx_, no_vectorize), llvm::MDNode::get(ctx_, no_unroll)};
            llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
            md->replaceOperandWith(0, md);  // a loop ID refers to itself
            latch->setMetadata(llvm::LLVMContext::MD_loop, md);
        }
        b_.SetInsertPoint(done);
    }

    // The element index `st` maps idx to, and whether it is valid (nullptr: always).
    std::pair<llvm::Value*, llvm::Value*> index(const ShapeTracker& st, std::vector<llvm::Value*> idx) {
        llvm::Value* valid = nullptr;
        auto both = [&](llvm::Value* c) { valid = valid ? b_.CreateAnd(valid, c) : c; };
        llvm::Value* addr = nullptr;
        const auto& views = st.views();
        for (size_t vi = views.size(); vi-- > 0;) {
            const View& v = views[vi];
            for (size_t d = 0; d < v.shape.size(); ++d) {
                auto [lo, hi] = v.mask_of(d);
                if (lo >= hi) {
                    both(b_.getFalse());
                    continue;
                }
                if (lo > 0) both(b_.CreateICmpSGE(idx[d], c64(lo)));
                if (hi < v.shape[d]) both(b_.CreateICmpSLT(idx[d], c64(hi)));
            }
            addr = c64(v.offset);
            for (size_t d = 0; d < v.shape.size(); ++d) {
                if (v.strides[d] != 0) addr = b_.CreateAdd(addr, b_.CreateMul(idx[d], c64(v.strides[d])));
            }
            if (vi == 0) break;
            // A contiguous view below maps its row-major index to itself: skip the unravel
            // (divisions) and the ravel that would undo it (a reshape of a broadcast, as in a
            // matmul operand fused from the previous layer, leaves such a view).
            while (vi > 0 && views[vi - 1].is_contiguous()) --vi;
            if (vi == 0) break;
            // Unravel into the row-major index of the view below. A valid position's index lies in
            // [0, numel(below)); below 2^31 the divisions are 32-bit (a 64-bit one by a constant is
            // a long multiply-high sequence on a GPU: conv2d's padded windows spent most of their
            // instructions there). A masked position's index may not fit, but its load is not
            // made (the address is selected to 0) and its value is 0 whatever the index says.
            const Shape& below = views[vi - 1].shape;
            idx.assign(below.size(), c64(0));
            if (numel(below) < (int64_t(1) << 31)) {
                llvm::Value* rest = b_.CreateTrunc(addr, i32_);
                for (size_t d = below.size(); d-- > 0;) {
                    if (below[d] != 1) idx[d] = b_.CreateSExt(b_.CreateSRem(rest, c32(int32_t(below[d]))), i64_);
                    rest = b_.CreateSDiv(rest, c32(int32_t(below[d])));
                }
                continue;
            }
            llvm::Value* rest = addr;
            for (size_t d = below.size(); d-- > 0;) {
                if (below[d] != 1) idx[d] = b_.CreateSRem(rest, c64(below[d]));
                rest = b_.CreateSDiv(rest, c64(below[d]));
            }
        }
        return {addr, valid};
    }

    llvm::Value* to_value(llvm::Value* stored, DType t) {
        if (t == DType::float16) return half_to_float(stored);
        if (t == DType::bfloat16) return bfloat_to_float(stored);
        return t == DType::boolean ? b_.CreateICmpNE(stored, llvm::ConstantInt::get(i8_, 0)) : stored;
    }

    llvm::Value* to_storage(llvm::Value* v, DType t) {
        if (t == DType::float16) return float_to_half(v);
        if (t == DType::bfloat16) return float_to_bfloat(v);
        return t == DType::boolean ? b_.CreateZExt(v, i8_) : v;
    }

    // x (float32) rounded to the nearest value of the 16-bit float type t.
    llvm::Value* round_to(llvm::Value* x, DType t) {
        return t == DType::float16 ? half_to_float(float_to_half(x)) : bfloat_to_float(float_to_bfloat(x));
    }

    // The conversions are integer code (no F16C/AVX512-BF16, no libgcc helpers: the CPU loader
    // resolves none), branch-free so that they vectorize.
    llvm::Value* bfloat_to_float(llvm::Value* bits16) { return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(bits16, i32_), c32(16)), f32_); }

    llvm::Value* float_to_bfloat(llvm::Value* f) {
        llvm::Value* bits = b_.CreateBitCast(f, i32_);
        // Round to nearest even on the 16 bits dropped; NaN stays NaN (quiet bit set).
        llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, c32(16)), c32(1));
        llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(bits, b_.CreateAdd(c32(0x7fff), lsb)), c32(16));
        llvm::Value* nan = b_.CreateOr(b_.CreateLShr(bits, c32(16)), c32(0x40));
        return b_.CreateTrunc(b_.CreateSelect(b_.CreateFCmpUNO(f, f), nan, rounded), b_.getInt16Ty());
    }

    // binary16 -> binary32: move exponent and mantissa into place and rebias; infinities/NaNs
    // get the all-ones exponent, subnormals are normalized by one float subtraction.
    llvm::Value* half_to_float(llvm::Value* bits16) {
        llvm::Value* h = b_.CreateZExt(bits16, i32_);
        llvm::Value* sign = b_.CreateShl(b_.CreateAnd(h, c32(0x8000)), c32(16));
        llvm::Value* o = b_.CreateShl(b_.CreateAnd(h, c32(0x7fff)), c32(13));
        llvm::Value* exp = b_.CreateAnd(o, c32(0x0f800000));
        o = b_.CreateAdd(o, c32((127 - 15) << 23));
        llvm::Value* special = b_.CreateAdd(o, c32((128 - 16) << 23));
        llvm::Value* sub_f = b_.CreateFSub(b_.CreateBitCast(b_.CreateAdd(o, c32(1 << 23)), f32_), b_.CreateBitCast(c32(113 << 23), f32_));
        llvm::Value* subnormal = b_.CreateBitCast(sub_f, i32_);
        o = b_.CreateSelect(b_.CreateICmpEQ(exp, c32(0x0f800000)), special, b_.CreateSelect(b_.CreateICmpEQ(exp, c32(0)), subnormal, o));
        return b_.CreateBitCast(b_.CreateOr(o, sign), f32_);
    }

    // binary32 -> binary16, round to nearest even: overflow to infinity, NaN to a quiet NaN,
    // results below 2^-14 through one float addition that rounds them into the subnormal grid.
    llvm::Value* float_to_half(llvm::Value* f) {
        llvm::Value* bits = b_.CreateBitCast(f, i32_);
        llvm::Value* sign = b_.CreateAnd(bits, c32(int32_t(0x80000000u)));
        llvm::Value* a = b_.CreateXor(bits, sign);
        llvm::Value* inf_nan = b_.CreateSelect(b_.CreateICmpUGT(a, c32(0x7f800000)), c32(0x7e00), c32(0x7c00));
        const int32_t denorm_magic = ((127 - 15) + (23 - 10) + 1) << 23;
        llvm::Value* sub = b_.CreateSub(
            b_.CreateBitCast(b_.CreateFAdd(b_.CreateBitCast(a, f32_), b_.CreateBitCast(c32(denorm_magic), f32_)), i32_), c32(denorm_magic));
        llvm::Value* odd = b_.CreateAnd(b_.CreateLShr(a, c32(13)), c32(1));
        llvm::Value* normal = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(a, c32(int32_t(((15u - 127u) << 23) + 0xfffu))), odd), c32(13));
        llvm::Value* o = b_.CreateSelect(b_.CreateICmpUGE(a, c32((127 + 16) << 23)), inf_nan,
                                         b_.CreateSelect(b_.CreateICmpULT(a, c32(113 << 23)), sub, normal));
        return b_.CreateTrunc(b_.CreateOr(o, b_.CreateLShr(sign, c32(16))), b_.getInt16Ty());
    }

    void store(llvm::Value* v, llvm::Value* at) {
        DType t = k_.output_dtype;
        v = to_storage(v, t);
        auto* st = b_.CreateStore(v, b_.CreateGEP(storage_type(t), out_, at));
        st->setAlignment(llvm::Align(dtype_bytes(t)));
    }

    using Memo = std::unordered_map<const Expr*, llvm::Value*>;

    llvm::Value* value(const Expr& e, const std::vector<llvm::Value*>& idx, Memo& memo) {
        if (auto it = memo.find(&e); it != memo.end()) return it->second;
        if (auto it = row_cache_.find(&e); it != row_cache_.end()) {
            llvm::Type* t = value_type(e.dtype);
            llvm::Value* v = b_.CreateLoad(t, b_.CreateGEP(t, it->second, idx.back()));
            memo.emplace(&e, v);
            return v;
        }
        llvm::Value* v = compute(e, idx, memo);
        // A 16-bit float result is rounded to its type at once, whether stored or fused into
        // the next op (loads are exact already; casts round themselves).
        if (is_half(e.dtype) && e.kind != ExprKind::load && !(e.kind == ExprKind::alu && e.op == Op::cast)) v = round_to(v, e.dtype);
        memo.emplace(&e, v);
        return v;
    }

    llvm::Value* compute(const Expr& e, const std::vector<llvm::Value*>& idx, Memo& memo) {
        switch (e.kind) {
            case ExprKind::constant:
                if (is_float(e.dtype)) return cf(e.value);
                if (e.dtype == DType::int32) return c32(int32_t(e.value));
                return e.value != 0 ? b_.getTrue() : b_.getFalse();
            case ExprKind::load: {
                auto [addr, valid] = index(e.view, idx);
                if (valid) addr = b_.CreateSelect(valid, addr, c64(0));
                auto* ld = b_.CreateLoad(storage_type(e.dtype), b_.CreateGEP(storage_type(e.dtype), in_[e.input], addr));
                ld->setAlignment(llvm::Align(dtype_bytes(e.dtype)));
                llvm::Value* v = to_value(ld, e.dtype);
                return valid ? b_.CreateSelect(valid, v, zero(e.dtype)) : v;
            }
            case ExprKind::masked: {
                llvm::Value* inner = value(*e.src[0], idx, memo);
                auto [addr, valid] = index(e.view, idx);
                (void)addr;
                return valid ? b_.CreateSelect(valid, inner, zero(e.dtype)) : inner;
            }
            case ExprKind::reduce: return reduce(e);
            case ExprKind::row_reduce: return row_value(e, idx);
            case ExprKind::alu: {
                std::vector<llvm::Value*> s;
                for (const ExprRef& src : e.src) s.push_back(value(*src, idx, memo));
                return alu(e, s);
            }
        }
        throw Error("", "compiler: unknown expression kind");
    }

    // The reduction's loops at the current output index: acc = init; for each reduce index: acc op= src.
    llvm::Value* reduce_init(const Expr& e) {
        DType t = e.dtype;
        if (e.op == Op::reduce_sum) return zero(t);
        if (is_float(t)) return llvm::ConstantFP::getInfinity(f32_, true);
        if (t == DType::int32) return c32(INT32_MIN);
        return b_.getFalse();
    }

    llvm::Value* reduce_combine(const Expr& e, llvm::Value* a, llvm::Value* x) {
        DType t = e.dtype;
        if (e.op != Op::reduce_sum && is_float(t)) {
            // maxnum ignores NaN: so does replacing a NaN by -inf first. Then neither operand is
            // ever NaN (the accumulator starts at -inf), and saying so (nnan, and nsz: maxnum
            // may return either zero anyway) lets the loop vectorizer keep one maximum per lane.
            llvm::Value* clean = b_.CreateSelect(b_.CreateFCmpUNO(x, x), llvm::ConstantFP::getInfinity(f32_, true), x);
            auto* m = llvm::cast<llvm::Instruction>(b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, a, clean));
            llvm::FastMathFlags fmf;
            fmf.setNoNaNs();
            fmf.setNoSignedZeros();
            m->setFastMathFlags(fmf);
            return m;
        }
        if (e.op != Op::reduce_sum) return maximum(t, a, x);
        if (t == DType::int32) return b_.CreateAdd(a, x);
        if (t == DType::boolean) return b_.CreateOr(a, x);
        // Reassociation lets the vectorizer keep one partial sum per lane.
        auto* add = llvm::cast<llvm::Instruction>(b_.CreateFAdd(a, x));
        llvm::FastMathFlags fmf;
        fmf.setAllowReassoc();
        add->setFastMathFlags(fmf);
        return add;
    }

    llvm::Value* reduce(const Expr& e) {
        if (reduced_) return reduced_;  // computed by the interchanged loops
        DType t = e.dtype;
        llvm::Type* vt = value_type(t);
        llvm::AllocaInst* acc = entry_alloca(vt, "acc");
        b_.CreateStore(reduce_init(e), acc);
        std::vector<llvm::Value*> idx = out_index_;
        std::function<void(size_t)> nest = [&](size_t level) {
            if (level == k_.reduce_axes.size()) {
                Memo below;
                llvm::Value* x = value(*e.src[0], idx, below);
                b_.CreateStore(reduce_combine(e, b_.CreateLoad(vt, acc), x), acc);
                return;
            }
            size_t d = size_t(k_.reduce_axes[level]);
            loop(c64(0), c64(k_.full_shape[d]), "r", [&](llvm::Value* j) {
                idx[d] = j;
                nest(level + 1);
            });
        };
        nest(0);
        return b_.CreateLoad(vt, acc);
    }

    // The row reductions under e (not those nested in another one), each once.
    static std::vector<const Expr*> row_reduces(const Expr& e) {
        std::vector<const Expr*> out;
        std::unordered_map<const Expr*, bool> seen;
        std::function<void(const Expr&)> visit = [&](const Expr& x) {
            if (!seen.emplace(&x, true).second) return;
            if (x.kind == ExprKind::row_reduce) {
                out.push_back(&x);
                return;
            }
            for (const ExprRef& s : x.src) visit(*s);
        };
        visit(e);
        return out;
    }

    // A row reduction at the row of idx (its last axis is ignored), emitted once per row:
    // first the row reductions it depends on, then its loop over the row.
    llvm::Value* row_value(const Expr& e, const std::vector<llvm::Value*>& idx) {
        if (auto it = row_values_.find(&e); it != row_values_.end()) return it->second;
        for (const Expr* r : row_reduces(*e.src[0])) row_value(*r, idx);
        llvm::Type* vt = value_type(e.dtype);
        llvm::AllocaInst* acc = entry_alloca(vt, "rowacc");
        b_.CreateStore(reduce_init(e), acc);
        // What is reduced is often used again at the same row index (softmax's exp(x - max)
        // is summed, then divided by the sum): keep the row of values on the stack instead
        // of computing them twice (a plain load is cheaper to repeat: the row is in cache).
        const Expr& src = *e.src[0];
        llvm::AllocaInst* keep = nullptr;
        if (cpu_ && src.kind != ExprKind::load && src.kind != ExprKind::constant && uses(src) > 1 && !row_cache_.count(&src) &&
            e.row == k_.full_shape.back()) {
            llvm::Type* st = value_type(src.dtype);
            keep = entry_alloca(llvm::ArrayType::get(st, uint64_t(e.row)), "rowkeep");
            keep->setAlignment(llvm::Align(64));
            private_bytes_ += uint64_t(e.row) * 4 + 64;
        }
        if (!row_slots_.empty()) {
            // The row in registers (emit_gpu_rows): this item's positions, then the workgroup's tree.
            llvm::Value* partial = reduce_init(e);
            for (RowSlot& slot : row_slots_) {
                llvm::Value* x = reduce_combine(e, partial, value(src, slot.idx, slot.memo));
                partial = slot.valid ? b_.CreateSelect(slot.valid, x, partial) : x;
            }
            llvm::Value* v = workgroup_reduce(e, partial);
            row_values_.emplace(&e, v);
            return v;
        }
        // A GPU workgroup's items take the row's elements block-strided, then combine (emit_gpu_rows).
        strided_loop(item_ ? item_ : c64(0), c64(e.row), item_ ? kAmdgpuBlock : 1, "row_r", [&](llvm::Value* j) {
            std::vector<llvm::Value*> at = idx;
            at.back() = j;
            Memo below;
            llvm::Value* x = value(src, at, below);
            if (keep) b_.CreateStore(x, b_.CreateGEP(value_type(src.dtype), keep, j));
            b_.CreateStore(reduce_combine(e, b_.CreateLoad(vt, acc), x), acc);
        });
        if (keep) row_cache_.emplace(&src, keep);
        llvm::Value* v = b_.CreateLoad(vt, acc);
        if (item_) v = workgroup_reduce(e, v);
        row_values_.emplace(&e, v);
        return v;
    }

    // How many expressions of the kernel use e as a source.
    int uses(const Expr& e) {
        if (uses_.empty()) {
            std::unordered_map<const Expr*, bool> seen;
            std::function<void(const Expr&)> visit = [&](const Expr& x) {
                if (!seen.emplace(&x, true).second) return;
                for (const ExprRef& s : x.src) {
                    ++uses_[s.get()];
                    visit(*s);
                }
            };
            visit(*k_.root);
        }
        auto it = uses_.find(&e);
        return it == uses_.end() ? 0 : it->second;
    }

    llvm::Value* maximum(DType t, llvm::Value* a, llvm::Value* b) {
        if (is_float(t)) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, a, b);
        if (t == DType::int32) return b_.CreateSelect(b_.CreateICmpSGT(a, b), a, b);
        return b_.CreateOr(a, b);
    }

    llvm::Value* alu(const Expr& e, const std::vector<llvm::Value*>& s) {
        DType st = e.src.empty() ? e.dtype : e.src[0]->dtype;
        bool f = is_float(st);
        switch (e.op) {
            case Op::neg: return f ? b_.CreateFNeg(s[0]) : b_.CreateSub(zero(st), s[0]);
            case Op::exp2: return exp2(s[0]);
            case Op::log2: return log2(s[0]);
            case Op::sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, s[0]);
            case Op::recip: return b_.CreateFDiv(cf(1.0), s[0]);
            case Op::logical_not: return b_.CreateNot(s[0]);
            case Op::cast: return cast(s[0], st, e.dtype);
            case Op::add: return f ? b_.CreateFAdd(s[0], s[1]) : st == DType::boolean ? b_.CreateOr(s[0], s[1]) : b_.CreateAdd(s[0], s[1]);
            case Op::sub: return f ? b_.CreateFSub(s[0], s[1]) : b_.CreateSub(s[0], s[1]);
            case Op::mul: return f ? b_.CreateFMul(s[0], s[1]) : st == DType::boolean ? b_.CreateAnd(s[0], s[1]) : b_.CreateMul(s[0], s[1]);
            case Op::div: {
                // By a row reduction (softmax's sum): one division per row, a multiplication
                // per element (the reciprocal is loop-invariant and hoisted; within 1 ulp).
                if (f && e.src[1]->kind == ExprKind::row_reduce) return b_.CreateFMul(s[0], b_.CreateFDiv(cf(1.0), s[1]));
                if (f) return b_.CreateFDiv(s[0], s[1]);
                // x86 idiv traps on a zero divisor and on INT32_MIN / -1: both yield 0 / x instead.
                llvm::Value* bad = b_.CreateOr(b_.CreateICmpEQ(s[1], zero(st)),
                                               b_.CreateAnd(b_.CreateICmpEQ(s[0], c32(INT32_MIN)), b_.CreateICmpEQ(s[1], c32(-1))));
                llvm::Value* q = b_.CreateSDiv(b_.CreateSelect(bad, zero(st), s[0]), b_.CreateSelect(bad, c32(1), s[1]));
                return b_.CreateSelect(b_.CreateICmpEQ(s[1], c32(-1)), b_.CreateSub(zero(st), s[0]), q);
            }
            case Op::max: return maximum(st, s[0], s[1]);
            case Op::cmp_lt: return f ? b_.CreateFCmpOLT(s[0], s[1]) : st == DType::int32 ? b_.CreateICmpSLT(s[0], s[1]) : b_.CreateICmpULT(s[0], s[1]);
            case Op::cmp_eq: return f ? b_.CreateFCmpOEQ(s[0], s[1]) : b_.CreateICmpEQ(s[0], s[1]);
            case Op::cmp_ne: return f ? b_.CreateFCmpUNE(s[0], s[1]) : b_.CreateICmpNE(s[0], s[1]);
            case Op::logical_and: return b_.CreateAnd(s[0], s[1]);
            case Op::logical_or: return b_.CreateOr(s[0], s[1]);
            case Op::where: return b_.CreateSelect(s[0], s[1], s[2]);
            case Op::reduce_sum:
            case Op::reduce_max: break;
        }
        throw Error("", fmt::format("compiler: {} is not an elementwise op", op_name(e.op)));
    }

    llvm::Value* cast(llvm::Value* v, DType from, DType to) {
        if (from == to) return v;
        if (to == DType::boolean) return is_float(from) ? b_.CreateFCmpUNE(v, cf(0)) : b_.CreateICmpNE(v, zero(from));
        if (is_float(to)) {
            llvm::Value* x = is_float(from) ? v : from == DType::int32 ? b_.CreateSIToFP(v, f32_) : b_.CreateUIToFP(v, f32_);
            return is_half(to) ? round_to(x, to) : x;
        }
        // to int32; fptosi.sat saturates (NaN -> 0) instead of being undefined out of range.
        if (is_float(from)) return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i32_, f32_}, {v});
        return b_.CreateZExt(v, i32_);
    }

    // 2^x without a libm call (the CPU loader resolves none): x = n + f with n an integer and
    // |f| <= 1/2, 2^f by its Taylor series to degree 7 (error < 1e-8), 2^n in the exponent bits.
    llvm::Value* exp2(llvm::Value* x) {
        llvm::Value* xc = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, x, cf(-126.0)), cf(127.0));
        llvm::Value* t = b_.CreateFAdd(xc, cf(0.5));
        llvm::Value* n = b_.CreateFPToSI(t, i32_);
        n = b_.CreateSelect(b_.CreateFCmpOGT(b_.CreateSIToFP(n, f32_), t), b_.CreateSub(n, c32(1)), n);
        llvm::Value* frac = b_.CreateFSub(xc, b_.CreateSIToFP(n, f32_));
        double coef = 1.0;
        std::vector<double> c;
        for (int k = 0; k <= 7; ++k) {
            c.push_back(coef);
            coef *= std::log(2.0) / (k + 1);
        }
        llvm::Value* p = cf(c[7]);
        for (int k = 6; k >= 0; --k) p = b_.CreateFAdd(b_.CreateFMul(p, frac), cf(c[size_t(k)]));
        llvm::Value* scale = b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(n, c32(127)), c32(23)), f32_);
        llvm::Value* r = b_.CreateFMul(p, scale);
        r = b_.CreateSelect(b_.CreateFCmpOGE(x, cf(128.0)), llvm::ConstantFP::getInfinity(f32_), r);
        r = b_.CreateSelect(b_.CreateFCmpOLT(x, cf(-150.0)), cf(0.0), r);
        return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, r);
    }

    // log2(x) without libm: x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln(m) = 2 atanh(s) with
    // s = (m-1)/(m+1), |s| < 0.172, by its series to s^9 (error < 1e-8).
    llvm::Value* log2(llvm::Value* x) {
        llvm::Value* tiny = b_.CreateFCmpOLT(x, cf(1.17549435e-38));  // subnormal: scale by 2^23 first
        llvm::Value* xs = b_.CreateSelect(tiny, b_.CreateFMul(x, cf(8388608.0)), x);
        llvm::Value* bits = b_.CreateBitCast(xs, i32_);
        llvm::Value* e = b_.CreateSub(b_.CreateAnd(b_.CreateLShr(bits, c32(23)), c32(0xff)), c32(127));
        e = b_.CreateSelect(tiny, b_.CreateSub(e, c32(23)), e);
        llvm::Value* m = b_.CreateBitCast(b_.CreateOr(b_.CreateAnd(bits, c32(0x7fffff)), c32(0x3f800000)), f32_);
        llvm::Value* big = b_.CreateFCmpOGT(m, cf(1.41421356));
        m = b_.CreateSelect(big, b_.CreateFMul(m, cf(0.5)), m);
        e = b_.CreateSelect(big, b_.CreateAdd(e, c32(1)), e);
        llvm::Value* s = b_.CreateFDiv(b_.CreateFSub(m, cf(1.0)), b_.CreateFAdd(m, cf(1.0)));
        llvm::Value* s2 = b_.CreateFMul(s, s);
        llvm::Value* p = cf(1.0 / 9);
        for (int k = 7; k >= 1; k -= 2) p = b_.CreateFAdd(b_.CreateFMul(p, s2), cf(1.0 / k));
        llvm::Value* ln_m = b_.CreateFMul(b_.CreateFMul(cf(2.0), s), p);
        llvm::Value* r = b_.CreateFAdd(b_.CreateSIToFP(e, f32_), b_.CreateFMul(ln_m, cf(1.0 / std::log(2.0))));
        r = b_.CreateSelect(b_.CreateFCmpOEQ(x, cf(0.0)), llvm::ConstantFP::getInfinity(f32_, true), r);
        r = b_.CreateSelect(b_.CreateFCmpOEQ(x, llvm::ConstantFP::getInfinity(f32_)), x, r);
        return b_.CreateSelect(b_.CreateFCmpULT(x, cf(0.0)), llvm::ConstantFP::getNaN(f32_), r);
    }

    llvm::LLVMContext& ctx_;
    llvm::Module& module_;
    const Kernel& k_;
    llvm::IRBuilder<> b_;
    llvm::Type *i1_, *i8_, *i32_, *i64_, *f32_;
    llvm::PointerType* ptr_;
    llvm::Function* fn_ = nullptr;
    llvm::BasicBlock* entry_ = nullptr;
    llvm::Value* out_ = nullptr;
    std::vector<llvm::Value*> in_;
    std::vector<llvm::Value*> out_index_;
    llvm::Value* reduced_ = nullptr;  // the reduction's value at the current output element, when precomputed
    Memo above_;
    Memo row_values_;  // row reductions of the row being emitted
    std::unordered_map<const Expr*, llvm::AllocaInst*> row_cache_;  // values kept per row index, by expression
    std::unordered_map<const Expr*, int> uses_;
    uint64_t private_bytes_ = 0;
    TileShape tile_;
    bool cpu_ = false;  // a CPU workgroup (a stack of its own), not a GPU work-item
    bool amd_ = false;  // a GPU kernel for AMDGPU (else NVPTX)
    llvm::Value* item_ = nullptr;  // the work-item id when a GPU workgroup computes a row together
    // A GPU row held in registers (emit_gpu_rows): per position, the index, whether it lies in
    // the row (nullptr: always), and the values computed there.
    struct RowSlot {
        std::vector<llvm::Value*> idx;
        llvm::Value* valid = nullptr;
        Memo memo;
    };
    std::vector<RowSlot> row_slots_;
    static constexpr int64_t kRowSlots = 16;  // elements per work-item: rows up to 4096 in registers
};

std::string module_text(const llvm::Module& module) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os, nullptr);
    return text;
}

}  // namespace

void initialize_llvm_targets() {
    static std::once_flag once;
    std::call_once(once, [] {
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        LLVMInitializeAMDGPUTargetInfo();
        LLVMInitializeAMDGPUTarget();
        LLVMInitializeAMDGPUTargetMC();
        LLVMInitializeAMDGPUAsmPrinter();
        LLVMInitializeNVPTXTargetInfo();
        LLVMInitializeNVPTXTarget();
        LLVMInitializeNVPTXTargetMC();
        LLVMInitializeNVPTXAsmPrinter();
    });
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const Target& target) {
    initialize_llvm_targets();
    std::string error;
    const llvm::Target* llvm_target = llvm::TargetRegistry::lookupTarget(target.triple, error);
    if (!llvm_target) throw Error("", fmt::format("compiler: no LLVM target for {}: {}", target.triple, error));
    llvm::TargetOptions options;
    std::unique_ptr<llvm::TargetMachine> machine(llvm_target->createTargetMachine(
        target.triple, target.cpu, target.features, options, llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
    if (!machine) throw Error("", fmt::format("compiler: LLVM cannot target {} cpu {}", target.triple, target.cpu));
    return machine;
}

llvm::Function* build_kernel_function(llvm::Module& module, const Kernel& kernel, const Target& target, KernelFlavor flavor,
                                      uint64_t* private_bytes, const TileShape& tile) {
    Emitter e(module, kernel);
    e.set_tile(tile);
    llvm::Function* fn = flavor == KernelFlavor::cpu ? e.emit_cpu(target) : e.emit_gpu(target, flavor);
    if (private_bytes) *private_bytes = e.private_bytes();
    return fn;
}

bool is_blocked_matmul(const Kernel& kernel, const Target& target) {
    llvm::LLVMContext ctx;
    llvm::Module module(kernel.name(), ctx);
    return Emitter(module, kernel).blocked_matmul(target);
}

std::vector<std::byte> optimize_and_emit(llvm::Module& module, llvm::TargetMachine& machine, const Kernel& kernel, bool assembly) {
    std::string verify;
    llvm::raw_string_ostream verify_os(verify);
    if (llvm::verifyModule(module, &verify_os)) {
        throw Error("", fmt::format("compiler: generated invalid LLVM IR ({}) for kernel\n{}\n{}", verify, kernel.key(), module_text(module)));
    }
    // The default O3 pipeline: inlining, loop rotation, the loop and SLP vectorizers, unrolling.
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder passes(&machine);
    passes.registerModuleAnalyses(mam);
    passes.registerCGSCCAnalyses(cgam);
    passes.registerFunctionAnalyses(fam);
    passes.registerLoopAnalyses(lam);
    passes.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager pipeline = passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    pipeline.run(module, mam);

    llvm::SmallVector<char, 0> object;
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager codegen;
    if (machine.addPassesToEmitFile(codegen, os, nullptr, assembly ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile)) {
        throw Error("", fmt::format("compiler: LLVM cannot emit objects for {}", machine.getTargetTriple().str()));
    }
    codegen.run(module);
    std::vector<std::byte> out(object.size());
    std::memcpy(out.data(), object.data(), object.size());
    return out;
}

std::string llvm_version() { return LLVM_VERSION_STRING; }

}  // namespace baregpu::compiler
