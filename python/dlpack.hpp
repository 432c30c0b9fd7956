// The DLPack ABI (v0.8) that __dlpack__ / from_dlpack exchange: the structs and codes as the
// public header dmlc/dlpack include/dlpack/dlpack.h defines them, and the capsule names of the
// Python protocol (data-apis.org, "Python specification for DLPack"). Layout is the ABI: the
// static_asserts check it against the sizes that header gives on 64-bit hosts.
#pragma once

#include <cstdint>

namespace baregpu::python::dlpack {

// DLDeviceType (dlpack.h): the ones baregpu's devices map to.
enum DeviceType : int32_t {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLOpenCL = 4,
    kDLROCM = 10,
};

// DLDataTypeCode (dlpack.h).
enum TypeCode : uint8_t {
    kDLInt = 0,
    kDLUInt = 1,
    kDLFloat = 2,
    kDLBfloat = 4,
    kDLBool = 6,
};

struct DLDevice {
    int32_t device_type;
    int32_t device_id;
};

struct DLDataType {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
};

struct DLTensor {
    void* data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t* shape;
    int64_t* strides;  // in elements; null: compact row-major
    uint64_t byte_offset;
};

struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(DLManagedTensor* self);
};

static_assert(sizeof(DLTensor) == 48 && sizeof(DLManagedTensor) == 64, "the DLPack ABI on a 64-bit host");

// The capsule's name before and after a consumer takes it (the Python protocol).
inline constexpr const char* kCapsuleName = "dltensor";
inline constexpr const char* kUsedCapsuleName = "used_dltensor";

}  // namespace baregpu::python::dlpack
