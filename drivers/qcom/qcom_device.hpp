// A Qualcomm Adreno GPU through KGSL as an HCQ device: two KGSL draw contexts (compute, and a
// second one that runs copies as dispatches of a small copy program), GPU memory allocated with
// GPUOBJ_ALLOC + USE_CPU_MAP and mapped at addresses inside a window this device reserves, so
// that the GPU address HCQ chose is the CPU address (SVM), and the 19.2 MHz always-on counter as
// the timestamp clock.
//
// Waiting: Device::sleep_for_signal sleeps in IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID with a
// finite timeout of at most a few ms (never the "infinite" 0xffffffff tinygrad passes); the
// caller's loop bounds the total by its own timeout. A wait that fails puts the device in its
// error state naming the context, the awaited timestamp and the last retired timestamp.
//
// Programs: KernelIsa::host (the simulated A630) takes the host x86-64 ELF objects of
// drivers/hostcode, placed behind a baregpu_host_program descriptor that SP_CS_BASE points at.
// KernelIsa::adreno (real hardware) would take the vendor OpenCL compiler's binaries: not
// implemented; load_program throws UnsupportedError, and without a copy program there is no copy
// queue (copy_in / copy_out throw UnsupportedError).
#pragma once

#include "drivers/qcom/kgsl_device.hpp"
#include "drivers/qcom/qcom_engine.hpp"
#include "drivers/qcom/svm_window.hpp"
#include "hcq/device.hpp"
#include "hcq/registry.hpp"

#include <map>
#include <memory>
#include <mutex>

namespace baregpu::qcom {

enum class KernelIsa { host, adreno };

struct QcomOptions {
    std::string name;                  // "sim-qcom:a630", "qcom:0"
    std::string path = "/dev/kgsl-3d0";
    KernelIsa isa = KernelIsa::adreno;
    uint64_t ring_bytes = 1ull << 20;  // per context: the command ring IBs are copied into
    uint64_t va_bytes = 16ull << 30;   // the reserved SVM window (at most what the SVM range holds)
    std::vector<SvmRange> svm_ranges = kgsl_svm_ranges();  // where the window may go, tried in order
    uint64_t memory_bytes = 0;         // what buffers may map at once (0: the window)
    uint64_t staging_bytes = 2ull << 20;
    uint32_t staging_slots = 4;
    uint32_t priority = 8;             // KGSL_CONTEXT_PRIORITY
};

std::string adreno_name(uint32_t chip_id);

class QcomDevice final : public hcq::Device, private hcq::MemoryBackend {
    struct Token {};

public:
    // Throws baregpu::Error when the device cannot be opened or an option is out of range.
    static std::shared_ptr<QcomDevice> create(std::shared_ptr<KgslSyscalls> sys, QcomOptions options);
    QcomDevice(Token, std::unique_ptr<KgslDevice> device, const kgsl::kgsl_devinfo& info, SvmWindow window, QcomOptions options);
    ~QcomDevice() override;

    const kgsl::kgsl_devinfo& device_info() const { return info_; }
    // "a630", "a730": from KGSL's chip_id.
    std::string chip() const { return adreno_name(info_.chip_id); }
    KgslDevice& kgsl() { return *kgsl_; }
    uint32_t compute_context() const { return compute_->context_id(); }
    // Where GPU objects go: [base, base + bytes) and the KGSL SVM range it lies in.
    const SvmWindow& svm_window() const { return window_; }

    // Host memory for the GPU (tinygrad's from_blob): cleans the CPU data cache for the range, then
    // IOCTL_KGSL_MAP_USER_MEM of the pages that hold it. Returns the GPU address of `host` (kernels
    // may be given it with KernelArgs::address). The memory must stay allocated until
    // release_user_memory, after every submission using it completed. Throws baregpu::Error when
    // KGSL refuses (EFAULT: not user memory KGSL can pin).
    GpuVirtualAddress import_user_memory(void* host, uint64_t bytes);
    // IOCTL_KGSL_SHAREDMEM_FREE of an import. Throws baregpu::Error for an address import_user_memory
    // did not return.
    void release_user_memory(GpuVirtualAddress address);

    void sleep_for_signal(const hcq::SignalSlot& slot, uint64_t target, uint64_t deadline_ns) override;
    void host_signal_written() noexcept override {}
    // Leave the error state: both KGSL contexts (invalidated by a fault, or hung) are replaced by
    // fresh ones; work in flight is lost. Throws baregpu::Error when KGSL refuses a new context.
    void recover() override;

private:
    std::shared_ptr<hcq::Program> load_program_impl(std::span<const std::byte> code_object, std::string_view kernel) override;
    std::byte* map_memory(GpuVirtualAddress va, uint64_t size, uint64_t page_size, const hcq::BufferOptions& options) override;
    void unmap_memory(GpuVirtualAddress va, uint64_t size, std::byte* cpu) noexcept override;
    std::shared_ptr<hcq::Program> load_host_program(std::span<const std::byte> code_object, std::string_view kernel);

    QcomOptions options_;
    std::unique_ptr<KgslDevice> kgsl_;
    kgsl::kgsl_devinfo info_{};
    SvmWindow window_;  // PROT_NONE reservation inside KGSL's SVM range
    std::mutex objects_mutex_;
    std::map<uint64_t, uint32_t> objects_;  // va -> GPU object id
    std::map<uint64_t, uint64_t> imports_;  // GPU address returned -> the KGSL gpuaddr of its pages (under objects_mutex_)
    uint32_t compute_ctx_ = 0, copy_ctx_ = 0;
    hcq::Buffer constants_;  // scratch dword at 0, the constant 1 at 64
    std::shared_ptr<hcq::Program> copy_program_;
    std::unique_ptr<QcomEngine> compute_, copy_;
};

// "a630" from a KGSL chip_id (core, major, minor bytes).
std::string adreno_name(uint32_t chip_id);

}  // namespace baregpu::qcom
