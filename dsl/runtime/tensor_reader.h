/*
 * What `_torch_tensors.cpp` hands `_fastpath.c` through a capsule: reading a PyTorch tensor's
 * layout in C++ (its TensorImpl fields, about 20 ns) instead of five attribute reads through
 * torch's Python API (dtype, shape, stride(), device, data_ptr(): about 400 ns a tensor).
 *
 * `read` fills `view` and returns 1 for a tensor or nn.Parameter (exact types: a subclass may
 * mean something else) that is dense, strided, of concrete sizes, with storage, of rank at
 * most `max_rank`; anything else returns 0 and the caller takes its general path. It never
 * raises and never runs Python code. `scalar_type` is the c10::ScalarType of a torch.dtype
 * object, -1 for anything else.
 */
#ifndef KDSL_TENSOR_READER_H
#define KDSL_TENSOR_READER_H

#define KDSL_TENSOR_READER_ABI 1
#define KDSL_TENSOR_READER_CAPSULE "dsl.runtime._torch_tensors.READER"
#define KDSL_MAX_RANK 8
#define KDSL_DEVICE_CUDA 1 /* c10::DeviceType::CUDA */

typedef struct {
    int rank;
    int scalar_type;
    int device_type;
    int device_index;
    unsigned long long address;
    long long sizes[KDSL_MAX_RANK];
    long long strides[KDSL_MAX_RANK];
} KdslTensorView;

typedef struct {
    int abi;
    int (*read)(PyObject *tensor, int max_rank, KdslTensorView *view);
    int (*scalar_type)(PyObject *dtype);
} KdslTensorReader;

#endif
