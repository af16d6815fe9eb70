"""The C++ that every kdsl operator library (`dsl.torch.cpp_library`) carries before its
operators: torch's current CUDA stream without CUDA headers, `at::Tensor` -> `kdsl_tensor`,
the scalar conversions that refuse what the Python launcher refuses, and the `CUresult` check.

All of it but the stream getter's declaration sits in an anonymous namespace: a library defines
no symbol of its own but torch's registrations, so several load into one process.
"""

from __future__ import annotations

from dsl.export.c_types import DTYPE_CODES

# at::ScalarType enumerator -> kdsl dtype name (the element types both know)
SCALAR_TYPES = {
    "Bool": "bool", "Char": "i8", "Short": "i16", "Int": "i32", "Long": "i64", "Byte": "u8", "UInt16": "u16",
    "UInt32": "u32", "UInt64": "u64", "Half": "f16", "BFloat16": "bf16", "Float": "f32", "Double": "f64",
    "Float8_e4m3fn": "f8e4m3", "Float8_e5m2": "f8e5m2",
}
_CASES = "\n".join(f"    case at::ScalarType::{st}: return {DTYPE_CODES[name]}; // KDSL_{name.upper()}"
                   for st, name in SCALAR_TYPES.items())

SUPPORT = r"""// torch's current CUDA stream, from the AOTInductor C shim in libtorch_cuda.so; weak, so this library
// loads in a torch without CUDA too (it then defines the schemas, and no CUDA tensor ever reaches here)
extern "C" int32_t aoti_torch_get_current_cuda_stream(int32_t device_index, void **ret_stream)
    __attribute__((weak));

namespace {

using kdsl_stream_getter = int32_t (*)(int32_t, void **);

kdsl_stream_getter kdsl_find_stream_getter()
{
    if (aoti_torch_get_current_cuda_stream != nullptr)
        return &aoti_torch_get_current_cuda_stream;
    void *lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD); // loaded by torch, but not linked to us
    return lib != nullptr ? reinterpret_cast<kdsl_stream_getter>(dlsym(lib, "aoti_torch_get_current_cuda_stream"))
                          : nullptr;
}

CUstream kdsl_current_stream(const char *op, int64_t device)
{
    static const kdsl_stream_getter getter = kdsl_find_stream_getter();
    TORCH_CHECK(getter != nullptr, op, ": torch's current CUDA stream comes from aoti_torch_get_current_cuda_stream "
                "(libtorch_cuda.so), which this process has not loaded: is this torch built with CUDA?");
    void *stream = nullptr;
    const int32_t failed = getter(static_cast<int32_t>(device), &stream);
    TORCH_CHECK(failed == 0, op, ": aoti_torch_get_current_cuda_stream(", device, ") failed");
    return static_cast<CUstream>(stream);
}

int32_t kdsl_dtype_code(at::ScalarType type)
{
    switch (type) {
SCALAR_CASES
    default: return 0;
    }
}

// A tensor argument as the entry point takes it: as DLPack describes it, strides in elements
kdsl_tensor kdsl_tensor_of(const char *op, const char *name, const at::Tensor &t, bool written)
{
    TORCH_CHECK(t.defined(), op, ": argument '", name, "' is an undefined tensor");
    TORCH_CHECK(t.is_cuda(), op, ": argument '", name, "' is on ", t.device(), "; this operator (a kdsl C++ "
                "operator library) runs on CUDA tensors only");
    TORCH_CHECK(t.layout() == at::kStrided, op, ": argument '", name, "' has layout ", t.layout(),
                "; kdsl kernels take strided tensors");
    const int32_t code = kdsl_dtype_code(t.scalar_type());
    TORCH_CHECK(code != 0, op, ": argument '", name, "' has element type ", t.scalar_type(),
                ", which kdsl kernels do not take");
    TORCH_CHECK(t.dim() <= KDSL_MAX_RANK, op, ": argument '", name, "' has rank ", t.dim(),
                "; exported entry points take at most ", KDSL_MAX_RANK);
    kdsl_tensor k{};
    const void *data = written ? t.mutable_data_ptr() : t.const_data_ptr();
    k.data = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(data));
    k.dtype = code;
    k.rank = static_cast<int32_t>(t.dim());
    k.device = static_cast<int32_t>(t.get_device());
    for (int64_t d = 0; d < t.dim(); ++d) {
        k.shape[d] = t.size(d);
        k.strides[d] = t.stride(d);
    }
    return k;
}

// a schema float as the entry point's float: refused where it overflows one, as the Python launcher refuses it
float kdsl_to_float(const char *op, const char *name, double value)
{
    const float narrow = static_cast<float>(value);
    TORCH_CHECK(!(std::isinf(narrow) && !std::isinf(value)), op, ": argument '", name, "' is ", value,
                ", too large for a 32-bit float");
    return narrow;
}

// a schema SymInt as the entry point's integer type: refused outside its range, never wrapped around
template <typename T> T kdsl_to_int(const char *op, const char *name, int64_t value)
{
    using limits = std::numeric_limits<T>;
    const bool fits = value < 0 ? limits::is_signed && value >= static_cast<int64_t>(limits::min())
                                : static_cast<uint64_t>(value) <= static_cast<uint64_t>(limits::max());
    TORCH_CHECK(fits, op, ": argument '", name, "' is ", value, ", outside the range of the entry point's ",
                limits::is_signed ? "signed " : "unsigned ", sizeof(T) * 8, "-bit integer");
    return static_cast<T>(value);
}

void kdsl_check(const char *op, const char *entry, CUresult result, const char *(*error_string)(void))
{
    if (result == CUDA_SUCCESS)
        return;
    const char *why = error_string();
    TORCH_CHECK(false, op, ": the kdsl entry point ", entry, " failed (CUresult ", static_cast<int>(result), "): ",
                why != nullptr ? why : "");
}

} // namespace""".replace("SCALAR_CASES", _CASES)
