/*
 * teexec.h - the public C API of libteexec.
 *
 * This is the only header a user includes: #include <teexec/teexec.h>, and
 * build with `pkg-config --cflags --libs teexec`. docs/api.md documents
 * every function (ownership, threads, blocking); examples/ has programs to
 * copy. Conventions:
 *
 *  - Opaque handles with create/destroy pairs; every destroy accepts NULL.
 *  - Every fallible call returns a teexec_status pointer: NULL means success.
 *    A non-NULL status is owned by the caller and released with
 *    teexec_status_destroy(). It carries a code, a message and, where one
 *    applies, the name of the file and of the graph node involved.
 *  - Out-parameters come last and are set to NULL (or 0) on failure.
 *  - The library never exits, aborts or prints; diagnostics go to the log
 *    callback installed with teexec_set_log_callback().
 *  - A teexec_model is immutable after load: any number of threads may read
 *    it at once. A teexec_session is used by one thread at a time.
 *
 * Each declaration states who owns what and what is thread-safe.
 */
#ifndef TEEXEC_TEEXEC_H
#define TEEXEC_TEEXEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TEEXEC_API __declspec(dllexport)
#elif defined(__GNUC__)
#define TEEXEC_API __attribute__((visibility("default")))
#else
#define TEEXEC_API
#endif

/* ------------------------------------------------------------------ */
/* Version                                                             */
/* ------------------------------------------------------------------ */

#define TEEXEC_VERSION_MAJOR 0
#define TEEXEC_VERSION_MINOR 1
#define TEEXEC_VERSION_PATCH 0

/* The library's version as (major << 16) | (minor << 8) | patch.
 * Thread-safe. May differ from the TEEXEC_VERSION_* of the header a program
 * was compiled with when the shared library is newer. */
TEEXEC_API unsigned teexec_version(void);

/* The version as a static string, e.g. "0.1.0". Never NULL; do not free. */
TEEXEC_API const char *teexec_version_string(void);

/* ------------------------------------------------------------------ */
/* Status                                                              */
/* ------------------------------------------------------------------ */

typedef enum teexec_code {
    TEEXEC_OK = 0,
    TEEXEC_ERR_INVALID_ARGUMENT = 1, /* the caller passed a bad argument     */
    TEEXEC_ERR_BAD_MODEL = 2,        /* the model or an input file is wrong */
    TEEXEC_ERR_LIMIT = 3,            /* a load budget was exceeded          */
    TEEXEC_ERR_IO = 4,               /* a file could not be read or written */
    TEEXEC_ERR_UNSUPPORTED = 5,      /* valid, but teexec cannot run it     */
    TEEXEC_ERR_DEVICE = 6,           /* a CUDA/cuBLASLt/cuDNN failure       */
    TEEXEC_ERR_NO_MEMORY = 7,        /* an allocation failed                */
    TEEXEC_ERR_INTERNAL = 8,         /* a bug in teexec: please report it   */
    TEEXEC_ERR_CANCELLED = 9,        /* the run was cancelled (run options) */
    TEEXEC_ERR_OUT_OF_DEVICE_MEMORY = 10, /* a CUDA session does not fit: over its
                                           * device-memory limit, or the device is full */
    TEEXEC_ERR_COMM = 11             /* a rank failed or a collective timed out */
} teexec_code;

typedef struct teexec_status teexec_status;

/* Accessors. Each accepts NULL (meaning success): code TEEXEC_OK, message "",
 * node/file NULL. Returned strings are owned by the status and live until it
 * is destroyed. */
TEEXEC_API teexec_code teexec_status_code(const teexec_status *status);
TEEXEC_API const char *teexec_status_message(const teexec_status *status);
/* Name of the graph node the error concerns, or NULL. */
TEEXEC_API const char *teexec_status_node(const teexec_status *status);
/* Path of the file the error concerns, or NULL. */
TEEXEC_API const char *teexec_status_file(const teexec_status *status);
/* Releases a status. Accepts NULL. */
TEEXEC_API void teexec_status_destroy(teexec_status *status);
/* A short constant name for a code, e.g. "bad model", "cancelled". Never NULL. */
TEEXEC_API const char *teexec_code_name(teexec_code code);

/* ------------------------------------------------------------------ */
/* Logging                                                             */
/* ------------------------------------------------------------------ */

typedef enum teexec_log_level {
    TEEXEC_LOG_ERROR = 0,
    TEEXEC_LOG_WARNING = 1,
    TEEXEC_LOG_INFO = 2,
    TEEXEC_LOG_DEBUG = 3
} teexec_log_level;

typedef void (*teexec_log_fn)(void *user_data, teexec_log_level level,
                              const char *message);

/* Installs a process-wide log callback (NULL: discard all messages, the
 * default) and the most verbose level delivered. The callback may be called
 * from any thread that uses the library and must be thread-safe itself.
 * Setting the callback is not synchronized with concurrent library calls:
 * set it before using the library from several threads.
 *
 * During a run given run options with a tag (teexec_run_options_set_tag),
 * every message the library logs on the running thread is delivered as
 * `run "<tag>": <message>`; at TEEXEC_LOG_DEBUG each session run also logs
 * one message when it starts (after its inputs are checked). */
TEEXEC_API void teexec_set_log_callback(teexec_log_fn fn, void *user_data,
                                        teexec_log_level max_level);

/* ------------------------------------------------------------------ */
/* Data types (numbered as ONNX's TensorProto.DataType)                */
/* ------------------------------------------------------------------ */

typedef enum teexec_dtype {
    TEEXEC_DTYPE_UNDEFINED = 0,
    TEEXEC_DTYPE_FLOAT = 1,
    TEEXEC_DTYPE_UINT8 = 2,
    TEEXEC_DTYPE_INT8 = 3,
    TEEXEC_DTYPE_UINT16 = 4,
    TEEXEC_DTYPE_INT16 = 5,
    TEEXEC_DTYPE_INT32 = 6,
    TEEXEC_DTYPE_INT64 = 7,
    TEEXEC_DTYPE_STRING = 8,
    TEEXEC_DTYPE_BOOL = 9,
    TEEXEC_DTYPE_FLOAT16 = 10,
    TEEXEC_DTYPE_DOUBLE = 11,
    TEEXEC_DTYPE_UINT32 = 12,
    TEEXEC_DTYPE_UINT64 = 13,
    TEEXEC_DTYPE_COMPLEX64 = 14,
    TEEXEC_DTYPE_COMPLEX128 = 15,
    TEEXEC_DTYPE_BFLOAT16 = 16,
    TEEXEC_DTYPE_FLOAT8E4M3FN = 17,
    TEEXEC_DTYPE_FLOAT8E4M3FNUZ = 18,
    TEEXEC_DTYPE_FLOAT8E5M2 = 19,
    TEEXEC_DTYPE_FLOAT8E5M2FNUZ = 20,
    TEEXEC_DTYPE_UINT4 = 21,
    TEEXEC_DTYPE_INT4 = 22,
    TEEXEC_DTYPE_FLOAT4E2M1 = 23,
    TEEXEC_DTYPE_FLOAT8E8M0 = 24,
    TEEXEC_DTYPE_UINT2 = 25,
    TEEXEC_DTYPE_INT2 = 26,
    TEEXEC_DTYPE_COUNT = 27
} teexec_dtype;

/* Lower-case ONNX name of a dtype ("float", "bfloat16", "float8e4m3fn", ...);
 * "undefined" for values out of range. Never NULL, static. */
TEEXEC_API const char *teexec_dtype_name(teexec_dtype dtype);

/* Storage bits per element (1..64; 4 for FP4/INT4, 2 for INT2); 0 for
 * STRING, UNDEFINED and values out of range. */
TEEXEC_API unsigned teexec_dtype_bits(teexec_dtype dtype);

/* ------------------------------------------------------------------ */
/* Models                                                              */
/* ------------------------------------------------------------------ */

typedef struct teexec_model teexec_model;

/* Budgets applied while loading. Zero in any field means "the default"
 * (given in brackets). A model over a budget is refused with
 * TEEXEC_ERR_LIMIT and a message naming the budget. */
typedef struct teexec_load_options {
    uint64_t max_file_bytes;        /* model file size        [2 GiB - 1]   */
    uint64_t max_external_bytes;    /* all external data      [1 TiB]       */
    uint64_t max_tensor_count;      /* tensors in the model   [1,000,000]   */
    uint64_t max_tensor_elements;   /* elements in one tensor [2^40]        */
    uint32_t max_rank;              /* dims of one tensor     [32, at most 32] */
    uint32_t max_attributes;        /* attributes on one node [4096]        */
    uint32_t max_nesting_depth;     /* nested graphs/messages [32]          */
    uint32_t max_nodes;             /* nodes in all graphs    [10,000,000]  */
} teexec_load_options;

/* Loads an ONNX model file. External data is read relative to the file's
 * folder and never outside it. `options` may be NULL (all defaults).
 * On success *out_model owns the model; release with teexec_model_destroy().
 * Thread-safe (each call creates an independent model). */
TEEXEC_API teexec_status *teexec_model_load_file(
    const char *path, const teexec_load_options *options,
    teexec_model **out_model);

/* Loads a model from a serialized ModelProto in memory. The bytes are copied
 * as needed; the caller may free `data` after return. External data is
 * resolved against `base_dir`; pass NULL to refuse any external data.
 * Thread-safe. */
TEEXEC_API teexec_status *teexec_model_load_memory(
    const void *data, size_t size, const char *base_dir,
    const teexec_load_options *options, teexec_model **out_model);

/* Releases a model. Accepts NULL. Every session and trainer created from the
 * model must have been destroyed first. */
TEEXEC_API void teexec_model_destroy(teexec_model *model);

/* Bytes of this model's weights on CUDA devices now, over all devices:
 * each (device, compute dtype) holds one copy, uploaded by the first CUDA
 * session that needs it, shared by every inference session (and every
 * input shape of each), and freed with the last of them. A trainer's
 * parameters are its own and are not counted. 0 without CUDA. Any thread. */
TEEXEC_API size_t teexec_model_device_weight_bytes(const teexec_model *model);

/* --- introspection: all getters are thread-safe on a loaded model; the
 * strings and arrays they return are owned by the model and live until
 * teexec_model_destroy(). --- */

/* Producer name/version and model domain as written in the file ("" when
 * absent). */
TEEXEC_API const char *teexec_model_producer_name(const teexec_model *model);
TEEXEC_API const char *teexec_model_producer_version(const teexec_model *model);
TEEXEC_API int64_t teexec_model_ir_version(const teexec_model *model);
/* The path the model was loaded from, or NULL for a model loaded from memory. */
TEEXEC_API const char *teexec_model_path(const teexec_model *model);

/* One imported operator set. */
typedef struct teexec_opset {
    const char *domain; /* "" is the default ONNX domain ("ai.onnx") */
    int64_t version;
} teexec_opset;

TEEXEC_API size_t teexec_model_opset_count(const teexec_model *model);
/* Returns NULL when index is out of range. */
TEEXEC_API const teexec_opset *teexec_model_opset(const teexec_model *model,
                                                  size_t index);

/* A graph input or output. rank is -1 when the shape is unknown. For each
 * dim d: dims[d] >= 0 is a fixed extent; dims[d] == -1 is symbolic
 * (dim_params[d] names it) or unknown (dim_params[d] == NULL).
 * elem_kind says whether the value is a tensor, a sequence, an optional,
 * a map or a sparse tensor; dtype is the (innermost) element type. */
typedef enum teexec_value_kind {
    TEEXEC_VALUE_TENSOR = 0,
    TEEXEC_VALUE_SEQUENCE = 1,
    TEEXEC_VALUE_OPTIONAL = 2,
    TEEXEC_VALUE_MAP = 3,
    TEEXEC_VALUE_SPARSE_TENSOR = 4,
    TEEXEC_VALUE_OTHER = 5
} teexec_value_kind;

typedef struct teexec_value_info {
    const char *name;
    teexec_value_kind kind;
    teexec_dtype dtype;
    int32_t rank;
    const int64_t *dims;
    const char *const *dim_params;
} teexec_value_info;

/* Graph inputs, excluding those that are also initializers (they are
 * parameters with defaults, listed by teexec_model_param_stats). */
TEEXEC_API size_t teexec_model_input_count(const teexec_model *model);
TEEXEC_API const teexec_value_info *teexec_model_input(const teexec_model *model,
                                                       size_t index);
TEEXEC_API size_t teexec_model_output_count(const teexec_model *model);
TEEXEC_API const teexec_value_info *teexec_model_output(const teexec_model *model,
                                                        size_t index);

/* Op histogram of the main graph (nested graphs and function bodies
 * included), one entry per (domain, op_type), sorted by domain then op. */
typedef struct teexec_op_count {
    const char *domain;
    const char *op_type;
    uint64_t count;
} teexec_op_count;

TEEXEC_API size_t teexec_model_op_count(const teexec_model *model);
TEEXEC_API const teexec_op_count *teexec_model_op(const teexec_model *model,
                                                  size_t index);

/* Initializer statistics: total count and, per dtype, tensors, elements and
 * bytes (bytes as stored, sub-byte types packed). */
typedef struct teexec_param_stats {
    uint64_t count;
    uint64_t elements;
    uint64_t bytes;
    uint64_t count_by_dtype[TEEXEC_DTYPE_COUNT];
    uint64_t elements_by_dtype[TEEXEC_DTYPE_COUNT];
    uint64_t bytes_by_dtype[TEEXEC_DTYPE_COUNT];
} teexec_param_stats;

TEEXEC_API void teexec_model_param_stats(const teexec_model *model,
                                         teexec_param_stats *out_stats);

/* External data files the model references (relative paths as written,
 * each listed once) with the bytes the model reads from each. */
typedef struct teexec_external_file {
    const char *location;
    uint64_t bytes;
    uint64_t tensors;
} teexec_external_file;

TEEXEC_API size_t teexec_model_external_file_count(const teexec_model *model);
TEEXEC_API const teexec_external_file *teexec_model_external_file(
    const teexec_model *model, size_t index);

/* Model-local functions (FunctionProto), kept as they were written. */
typedef struct teexec_function_info {
    const char *domain;
    const char *name;
    const char *overload; /* "" when absent */
    uint64_t node_count;
    uint64_t input_count;
    uint64_t output_count;
} teexec_function_info;

TEEXEC_API size_t teexec_model_function_count(const teexec_model *model);
TEEXEC_API const teexec_function_info *teexec_model_function(
    const teexec_model *model, size_t index);

/* Number of nodes in the main graph (not counting nested graphs). */
TEEXEC_API uint64_t teexec_model_node_count(const teexec_model *model);

/* ================================================================== */
/* Tensors and sessions (inference)                                    */
/* ================================================================== */

/* ------------------------------------------------------------------ */
/* Tensors                                                             */
/* ------------------------------------------------------------------ */

/* A host tensor: dtype, shape (row-major, C order) and a buffer of
 * elements stored as ONNX raw_data stores them (little-endian; FLOAT16 and
 * BFLOAT16 as 16-bit patterns, BOOL one byte 0/1, 4-bit types packed two per
 * byte). STRING tensors are not supported by this API.
 *
 * A tensor either owns its buffer (created by copying or allocating) or
 * borrows the caller's (teexec_tensor_create_borrowed: the caller keeps the
 * memory alive and unchanged while the tensor is in use and frees it after
 * teexec_tensor_destroy).
 *
 * Thread-safety: a tensor may be read from several threads at once; writing
 * its data while another thread reads it (or a session runs with it) is a
 * data race. */
typedef struct teexec_tensor teexec_tensor;

/* A new tensor owning a zero-filled buffer. dims may be NULL when rank is 0
 * (a scalar). On success *out_tensor is owned by the caller. */
TEEXEC_API teexec_status *teexec_tensor_create(teexec_dtype dtype, int32_t rank,
                                               const int64_t *dims,
                                               teexec_tensor **out_tensor);

/* A new tensor owning a copy of `data`; data_bytes must equal the storage
 * size of the shape (teexec_tensor_byte_size of the result). */
TEEXEC_API teexec_status *teexec_tensor_create_copy(teexec_dtype dtype, int32_t rank,
                                                    const int64_t *dims,
                                                    const void *data, size_t data_bytes,
                                                    teexec_tensor **out_tensor);

/* A new tensor that borrows `data` (not copied, never freed by teexec);
 * data_bytes must equal the storage size of the shape. */
TEEXEC_API teexec_status *teexec_tensor_create_borrowed(teexec_dtype dtype, int32_t rank,
                                                        const int64_t *dims, void *data,
                                                        size_t data_bytes,
                                                        teexec_tensor **out_tensor);

/* Reads a tensor from a file: ".npy" (NumPy format v1/v2/v3, C order) or
 * ".pb" (a serialized ONNX TensorProto), chosen by the extension. Errors name
 * the file. On success *out_tensor is owned by the caller. Thread-safe. */
TEEXEC_API teexec_status *teexec_tensor_load_file(const char *path,
                                                  teexec_tensor **out_tensor);

/* Writes a tensor to `path` as ".npy" or ".pb" by the extension; `name` is
 * stored as the TensorProto's name for .pb (may be NULL). The file is
 * replaced if it exists. Thread-safe for distinct paths. */
TEEXEC_API teexec_status *teexec_tensor_save_file(const teexec_tensor *tensor,
                                                  const char *path, const char *name);

/* A new tensor holding `tensor` converted to `dtype` with ONNX Cast
 * semantics (round to nearest even; out-of-range to integers as Cast does).
 * Owned by the caller. */
TEEXEC_API teexec_status *teexec_tensor_cast(const teexec_tensor *tensor,
                                             teexec_dtype dtype,
                                             teexec_tensor **out_tensor);

/* Accessors; each accepts only a valid tensor. dims has rank entries and
 * lives as long as the tensor. data is never NULL (a zero-element tensor
 * still has a valid pointer). */
TEEXEC_API teexec_dtype teexec_tensor_dtype(const teexec_tensor *tensor);
TEEXEC_API int32_t teexec_tensor_rank(const teexec_tensor *tensor);
TEEXEC_API const int64_t *teexec_tensor_dims(const teexec_tensor *tensor);
TEEXEC_API uint64_t teexec_tensor_element_count(const teexec_tensor *tensor);
TEEXEC_API size_t teexec_tensor_byte_size(const teexec_tensor *tensor);
TEEXEC_API void *teexec_tensor_data(teexec_tensor *tensor);
TEEXEC_API const void *teexec_tensor_data_const(const teexec_tensor *tensor);

/* Releases a tensor (and its buffer when owned). Accepts NULL. */
TEEXEC_API void teexec_tensor_destroy(teexec_tensor *tensor);

/* ------------------------------------------------------------------ */
/* Session options                                                     */
/* ------------------------------------------------------------------ */

typedef enum teexec_device {
    TEEXEC_DEVICE_AUTO = 0, /* the GPU when a usable one exists, else the CPU */
    TEEXEC_DEVICE_CPU = 1,
    TEEXEC_DEVICE_CUDA = 2
} teexec_device;

/* Device tensors: a teexec_tensor whose data is CUDA device memory, for
 * CUDA sessions to read as inputs and return as outputs without a host
 * copy (run options set_device_outputs). teexec_tensor_data returns the
 * device address (never dereference it on the host); dtype, rank, dims and
 * sizes read as for host tensors. Only CUDA sessions accept them: CPU
 * sessions, trainers, teexec_tensor_save_file and teexec_tensor_cast refuse
 * them with TEEXEC_ERR_INVALID_ARGUMENT. Without the CUDA backend (or a
 * device) creating one fails (TEEXEC_ERR_UNSUPPORTED / _DEVICE).
 *
 * Ordering: teexec never orders a device tensor's contents with the
 * caller's work except through a run's stream (run options
 * set_cuda_stream); fill an input on that stream (or finish filling it
 * before the run), and read an output on it (or after the run returned or
 * teexec_session_wait). */

/* New device memory on the current CUDA device (contents undefined),
 * freed by teexec_tensor_destroy (cudaFree: waits for the device). */
TEEXEC_API teexec_status *teexec_tensor_create_device(teexec_dtype dtype, int32_t rank,
                                                      const int64_t *dims,
                                                      teexec_tensor **out_tensor);
/* A device tensor over the caller's device memory (cudaMalloc'd or
 * managed; borrowed: never freed by teexec, it must outlive the tensor and
 * any run reading it); data_bytes must equal the shape's storage size. */
TEEXEC_API teexec_status *teexec_tensor_create_device_borrowed(teexec_dtype dtype, int32_t rank,
                                                               const int64_t *dims,
                                                               void *device_data,
                                                               size_t data_bytes,
                                                               teexec_tensor **out_tensor);
/* TEEXEC_DEVICE_CUDA for a device tensor, TEEXEC_DEVICE_CPU otherwise. */
TEEXEC_API teexec_device teexec_tensor_device(const teexec_tensor *tensor);
/* A new host tensor holding a copy of `tensor` (a device or host tensor).
 * For a device tensor the copy waits for the legacy default stream only:
 * after a run with set_no_sync, call teexec_session_wait first. */
TEEXEC_API teexec_status *teexec_tensor_to_host(const teexec_tensor *tensor,
                                                teexec_tensor **out_tensor);

/* Options are an opaque object with setters, so new options can be added
 * without breaking callers. Defaults: device AUTO, threads 0 (the OpenBLAS
 * default), every symbolic input dim 1 at planning time.
 * An options object is not thread-safe to modify; a session copies what it
 * needs at creation, so the options may be destroyed right after. */
typedef struct teexec_session_options teexec_session_options;

TEEXEC_API teexec_status *teexec_session_options_create(teexec_session_options **out_options);
TEEXEC_API void teexec_session_options_destroy(teexec_session_options *options);
TEEXEC_API teexec_status *teexec_session_options_set_device(teexec_session_options *options,
                                                            teexec_device device);
/* Threads for the multi-threaded kernels (GEMM, and on the CPU the
 * attention forward, which uses as many as OpenBLAS has); 0 = library
 * default. OpenBLAS's thread count is process-wide: a session created with
 * a non-zero value sets it for every session in the process. */
TEEXEC_API teexec_status *teexec_session_options_set_threads(teexec_session_options *options,
                                                             int threads);
/* The value a symbolic input dim takes for the plan made at session
 * creation (later runs may bind other values; each new input-shape
 * signature is planned once and cached). Setting a name again replaces it. */
TEEXEC_API teexec_status *teexec_session_options_set_dim(teexec_session_options *options,
                                                         const char *dim_name, int64_t value);
/* Shape buckets: runs pad the symbolic input dim `dim_name` with zeros at
 * its end up to a multiple of `multiple` (set_dim_multiple) or to the
 * smallest listed size that holds it (set_dim_buckets: 1 to 64 sizes > 0,
 * any order; a run over the largest is refused with
 * TEEXEC_ERR_INVALID_ARGUMENT naming the dim and its bound), so variable
 * traffic reuses a few plans and CUDA graphs; outputs whose declared dims
 * name the dim are cut back to the size given. The declared size
 * (set_dim) is planned at its bucket. Zero padding is right only where
 * positions along the dim do not affect each other's outputs (batch rows)
 * or only later ones (a causal sequence): the caller chooses the dims.
 * Padding copies host inputs; a device input or device outputs whose dim
 * needs padding are refused (TEEXEC_ERR_UNSUPPORTED): give them at a
 * bucket size. Setting a dim again replaces its bucket. */
TEEXEC_API teexec_status *teexec_session_options_set_dim_multiple(teexec_session_options *options,
                                                                  const char *dim_name,
                                                                  int64_t multiple);
TEEXEC_API teexec_status *teexec_session_options_set_dim_buckets(teexec_session_options *options,
                                                                 const char *dim_name,
                                                                 const int64_t *sizes,
                                                                 size_t n_sizes);
/* The quantization recipe a session runs the model's Linears under:
 * "none" (default), "fp8-delayed", "fp8-current", "fp8-block", "mxfp8",
 * "nvfp4", with grad formats and options as teexec_plan_options_set_recipe.
 * CPU sessions run every recipe (the plan's fuser groups, bit-exact CPU
 * quantizers, FP32 GEMMs on the dequantized operands; fp8-delayed state
 * per session, rolled after each run); CPU trainers accept "none" only
 * (TEEXEC_ERR_UNSUPPORTED at creation). */
TEEXEC_API teexec_status *teexec_session_options_set_recipe(teexec_session_options *options,
                                                            const char *recipe);
/* Deterministic mode: only kernels whose results do not depend on
 * scheduling (no float atomics); a model with an op that has no such
 * kernel on the chosen device is refused at creation, naming the op.
 * Default: off, or on when the environment variable TEEXEC_DETERMINISTIC
 * is "1" when the options are created. */
TEEXEC_API teexec_status *teexec_session_options_set_deterministic(teexec_session_options *options,
                                                                   int deterministic);
/* CUDA graphs (CUDA sessions): each input-shape signature's run is
 * captured once and replayed; a new signature is captured anew. Default on;
 * 0 launches every kernel each run. */
TEEXEC_API teexec_status *teexec_session_options_set_cuda_graphs(teexec_session_options *options,
                                                                 int enabled);
/* Per-kernel timing (CUDA sessions): events around every fuser group and
 * kernel, summed over runs; read with teexec_session_profile. Costs time;
 * disables CUDA graphs. Default off. */
TEEXEC_API teexec_status *teexec_session_options_set_profile(teexec_session_options *options,
                                                             int enabled);
/* The CUDA stream (a cudaStream_t) a CUDA session queues its work on, for
 * callers that order teexec's work with their own; NULL (default): the
 * session makes its own non-blocking stream. The stream must outlive the
 * session. A run still returns only when its work on the stream is done.
 * CPU sessions ignore it. */
TEEXEC_API teexec_status *teexec_session_options_set_cuda_stream(teexec_session_options *options,
                                                                 void *stream);
/* The compute dtype of float activations and parameters (CUDA sessions):
 * FLOAT, BFLOAT16 or FLOAT16 cast the model's float tensors; UNDEFINED
 * (default) keeps the model's own. Inputs and outputs keep the model's
 * dtypes. CPU sessions run the model's own dtypes: any other value than
 * UNDEFINED is refused at creation (TEEXEC_ERR_UNSUPPORTED). */
TEEXEC_API teexec_status *teexec_session_options_set_dtype(teexec_session_options *options,
                                                           teexec_dtype dtype);
/* A cap on the device memory a CUDA session holds, in bytes; 0 (default):
 * none. Counted: the memory each of its executors (one per input-shape
 * signature) allocates for itself -- activations, saved buffers, scratch,
 * the cuBLASLt workspace -- and the model's weights it reads, in full even
 * when other sessions share them on the device (so whether a session fits
 * does not depend on what else runs). Not counted: the CUDA context, the
 * cuBLASLt / cuDNN handles, captured graphs. A session or a new signature
 * that does not fit is refused before it allocates, with
 * TEEXEC_ERR_OUT_OF_DEVICE_MEMORY and a message giving the bytes it needs
 * and the limit (a device that is simply full gives the same code); what
 * it allocated is freed and the session (for a run) stays usable. Reaching
 * the 4-signature bound, the executor about to be dropped does not count.
 * CPU sessions ignore it. */
TEEXEC_API teexec_status *teexec_session_options_set_device_memory_limit(
    teexec_session_options *options, size_t bytes);
/* The tensor-parallel group (docs/multi-gpu.md) this session's te.ops
 * communication ops run over (each rank runs its own session on its own
 * part of the model, all calling run together): AllReduce sums its input
 * over the group's ranks, AllGather / ReduceScatter gather / sum-and-split
 * along dim 0 over world_size ranks (their attribute, which must be the
 * group's size). NULL (default) or a world of one: the identity. A CPU
 * session takes a "threads" communicator; a CUDA session an "nccl" one
 * (AllReduce only; the rank's GPU becomes the calling thread's current
 * device for creation and runs; no CUDA graphs then). Borrowed: it must
 * outlive the session. */
struct teexec_comm;
TEEXEC_API teexec_status *teexec_session_options_set_comm(teexec_session_options *options,
                                                          struct teexec_comm *comm);

/* ------------------------------------------------------------------ */
/* Sessions                                                            */
/* ------------------------------------------------------------------ */

/* A session runs one model on one device. It is prepared completely when
 * created: every node is resolved to a kernel, shapes and types are inferred
 * for the model's declared input shapes (symbolic dims as set in the options,
 * else 1) and buffers are planned. A model with ops the device cannot run is
 * refused with TEEXEC_ERR_UNSUPPORTED and one message listing all of them:
 * `unsupported op X (domain "d", opset N); unsupported op Y ...`.
 *
 * Thread-safety: a session is used by one thread at a time (runs on one
 * session must not overlap); different sessions, even of the same model, may
 * run concurrently. The model must outlive the session. */
typedef struct teexec_session teexec_session;

/* `options` may be NULL (defaults). On success *out_session is owned by the
 * caller; release with teexec_session_destroy(). */
TEEXEC_API teexec_status *teexec_session_create(const teexec_model *model,
                                                const teexec_session_options *options,
                                                teexec_session **out_session);

/* Runs the model once. Every graph input (as listed by teexec_model_input)
 * must be given exactly once by name; tensors are only read during the call.
 * Symbolic dims are bound from the given inputs; a new input-shape signature
 * is planned on first use and cached for later runs.
 *
 * A CUDA session may be called with n_inputs 0 after a first run: it runs
 * again on that run's inputs, which stay on the device (no host transfer;
 * what a benchmark or a repeated evaluation wants). CPU sessions need every
 * input each time. A CPU session keeps the large buffers (256 KiB and up)
 * that a run frees for its next run, which saves faulting in fresh pages;
 * it holds at most one run's worth, and teexec_session_destroy frees them.
 *
 * output_names selects n_outputs graph outputs by name; NULL means all graph
 * outputs in model order (then n_outputs must equal
 * teexec_model_output_count). On success out_tensors[i] receives a new
 * tensor owned by the caller (teexec_tensor_destroy); on failure every
 * out_tensors[i] is set to NULL. Errors name the input, output or node. */
TEEXEC_API teexec_status *teexec_session_run(teexec_session *session, size_t n_inputs,
                                             const char *const *input_names,
                                             const teexec_tensor *const *input_tensors,
                                             size_t n_outputs,
                                             const char *const *output_names,
                                             teexec_tensor **out_tensors);

/* ------------------------------------------------------------------ */
/* Run options                                                         */
/* ------------------------------------------------------------------ */

/* Per-run settings for teexec_session_run_with / teexec_trainer_step_with:
 * a tag, a cancellation flag, and for CUDA session runs a stream, device
 * outputs and no host wait (below).
 *
 * Cancellation: teexec_run_options_cancel() may be called from any thread,
 * also while runs using the options are in flight (several runs, even of
 * different sessions, may share one options object: one cancel stops them
 * all). A run checks the flag when it starts and, on the CPU, before every
 * node; a CUDA run checks it before launching its work on the device and,
 * with CUDA graphs off, before every kernel launch. A captured CUDA graph
 * is replayed as one launch that cannot be interrupted: a cancel arriving
 * during the replay takes effect at the next run. A cancelled run returns
 * TEEXEC_ERR_CANCELLED, its message saying where it stopped ("before node
 * X", with the node also in teexec_status_node, or "before the run
 * started"), and produces no outputs; the session stays usable and its
 * next run gives the same outputs as if the cancelled run never happened.
 * The flag is sticky: every later run with the same options is cancelled
 * at its start until teexec_run_options_reset() clears it.
 *
 * Tag: a string copied into the options, put on the log messages of the
 * run (see teexec_set_log_callback) and before the message of a failed
 * run's status: `run "<tag>": <message>`.
 *
 * Thread-safety: cancel, reset and is_cancelled are safe from any thread at
 * any time; set_tag and destroy only while no run uses the options. */
typedef struct teexec_run_options teexec_run_options;

/* A new options object: no tag, not cancelled. Owned by the caller. */
TEEXEC_API teexec_status *teexec_run_options_create(teexec_run_options **out_options);
/* Releases it. Accepts NULL. No run may be using it. */
TEEXEC_API void teexec_run_options_destroy(teexec_run_options *options);
/* Sets (a copy of) the tag, at most 255 bytes; NULL removes it. */
TEEXEC_API teexec_status *teexec_run_options_set_tag(teexec_run_options *options,
                                                     const char *tag);
/* Asks every run using these options to stop. Any thread; never blocks. */
TEEXEC_API teexec_status *teexec_run_options_cancel(teexec_run_options *options);
/* Clears the cancel flag, so the options can serve the next runs. Any
 * thread; a run already in flight may or may not see the reset. */
TEEXEC_API teexec_status *teexec_run_options_reset(teexec_run_options *options);
/* CUDA runs (CPU sessions ignore these, but for device outputs, which they
 * refuse). Set them while no run uses the options.
 * cuda_stream: a caller's cudaStream_t the run is queued in order with:
 * it starts after the work queued on that stream so far, and work queued
 * there afterwards waits for it (events, no host wait). NULL (default): no
 * ordering with the caller's streams. The stream must outlive the run. */
TEEXEC_API teexec_status *teexec_run_options_set_cuda_stream(teexec_run_options *options,
                                                             void *stream);
/* Outputs as device tensors (new device memory per output and run, on the
 * session's device; the caller destroys them) instead of host copies.
 * Default 0. */
TEEXEC_API teexec_status *teexec_run_options_set_device_outputs(teexec_run_options *options,
                                                                int enabled);
/* The run returns once its work is queued, without waiting for the device;
 * needs device outputs when any output is asked for (INVALID_ARGUMENT
 * otherwise). Wait with teexec_session_wait, or order on cuda_stream.
 * Default 0: a run returns when the device has finished. */
TEEXEC_API teexec_status *teexec_run_options_set_no_sync(teexec_run_options *options,
                                                         int enabled);
/* A per-run profile: the run times its own work, read after it with
 * teexec_session_run_profile. On the CPU, the wall time of each fuser
 * group and standard node; on CUDA, the event time of each kernel, the run
 * launched kernel by kernel (waiting for each) instead of replayed as its
 * CUDA graph, so it is slower than an unprofiled run and the next
 * unprofiled run replays (or first captures) the graph as usual; outputs
 * are the same either way. Any session, created with or without
 * options_set_profile. Training steps ignore it. Default 0. */
TEEXEC_API teexec_status *teexec_run_options_set_profile(teexec_run_options *options,
                                                         int enabled);
/* 1 while the cancel flag is set, else 0 (also for NULL). Any thread. */
TEEXEC_API int teexec_run_options_is_cancelled(const teexec_run_options *options);

/* teexec_session_run with run options (NULL: none, exactly
 * teexec_session_run). */
TEEXEC_API teexec_status *teexec_session_run_with(teexec_session *session,
                                                  const teexec_run_options *run_options,
                                                  size_t n_inputs,
                                                  const char *const *input_names,
                                                  const teexec_tensor *const *input_tensors,
                                                  size_t n_outputs,
                                                  const char *const *output_names,
                                                  teexec_tensor **out_tensors);

/* teexec_session_run_with writing outputs into the caller's tensors (ONNX
 * Runtime's IOBinding, TensorRT's bound output addresses). outputs[j]
 * given (non-NULL) is bound: it must have exactly output j's dtype and
 * dims and is overwritten; it stays the caller's. outputs[j] NULL gets a
 * new tensor as teexec_session_run_with would give (host, or a device
 * tensor with run options set_device_outputs), owned by the caller; on
 * failure those are NULL again.
 *
 * A host tensor can be bound on every session; a device tensor
 * (teexec_tensor_create_device / _borrowed) on the session's device on a
 * CUDA session: it is written on the device in the run's stream order
 * (nothing allocated, no host transfer), so a run on device inputs into
 * bound device outputs makes neither an allocation nor a host copy: the
 * loop a serving stack runs. With set_no_sync every output must stay on
 * the device (bound device tensors, or new ones with set_device_outputs);
 * it is complete once teexec_session_wait returns (or in cuda_stream
 * order).
 *
 * A wrong dtype, dims or device of a bound tensor, a bound output asked
 * for twice, or two outputs bound to one tensor: TEEXEC_ERR_INVALID_ARGUMENT
 * naming the output, before any output is written; an output whose dim a
 * shape bucket padded can only be cut into a host tensor. A run that fails
 * may have written some bound outputs. */
TEEXEC_API teexec_status *teexec_session_run_into(teexec_session *session,
                                                  const teexec_run_options *run_options,
                                                  size_t n_inputs,
                                                  const char *const *input_names,
                                                  const teexec_tensor *const *input_tensors,
                                                  size_t n_outputs,
                                                  const char *const *output_names,
                                                  teexec_tensor **outputs);

/* The device a session runs on: "cpu" or "cuda". Static string. */
TEEXEC_API const char *teexec_session_device_name(const teexec_session *session);

/* Number of input-shape signatures currently planned. Creating a session
 * plans the model's declared input shapes (symbolic dims from
 * options_set_dim, 1 otherwise), so this is 1 after creation when the
 * model declares them and the first run with those shapes plans nothing;
 * each new signature a run brings is planned by that run. A CPU session
 * keeps at most 32 signatures, a CUDA session 4 (one executor each); one
 * more drops the signature planned longest ago (oldest insert first: using
 * a signature does not keep it), and running a dropped signature again
 * plans it anew. */
TEEXEC_API size_t teexec_session_plan_count(const teexec_session *session);

/* The profile gathered so far (options_set_profile): a text table, one row
 * per fuser group and kernel with calls, total and mean milliseconds, and
 * each row's share; `*out_text` is owned by the caller (teexec_string_free).
 * TEEXEC_ERR_INVALID_ARGUMENT when the session was not created with
 * profiling. */
TEEXEC_API teexec_status *teexec_session_profile(const teexec_session *session, char **out_text);

/* The profile of the session's last successful run made with run options
 * set_profile: a text table, one row per fuser group or kernel (in the
 * order first run) with its calls, total and mean milliseconds and share,
 * then the rows' sum and the run's wall time; `*out_text` is owned by the
 * caller (teexec_string_free). A later profiled run replaces it; runs
 * without the option and failed runs leave it. TEEXEC_ERR_INVALID_ARGUMENT
 * when no profiled run has succeeded yet. The session-wide profile
 * (teexec_session_profile) is another table, summed over every run. */
TEEXEC_API teexec_status *teexec_session_run_profile(const teexec_session *session,
                                                     char **out_text);

/* Waits until every run queued on a CUDA session (runs with
 * set_no_sync) has finished on the device; returns at once for a CPU
 * session. One thread at a time per session, like a run. */
TEEXEC_API teexec_status *teexec_session_wait(teexec_session *session);

/* The device memory a CUDA session holds now: *weight_bytes the model's
 * weights its executors read (one copy per device and dtype, shared with
 * every other session of the model on that device: the same bytes are
 * reported by each of them and held once), *own_bytes what its executors
 * allocated for themselves (activations, buffers, scratch, workspace; per
 * session and per input-shape signature). The counts of
 * options_set_device_memory_limit. Either pointer may be NULL. A CPU
 * session reports 0 and 0. Does not block. */
TEEXEC_API teexec_status *teexec_session_device_memory(const teexec_session *session,
                                                       size_t *weight_bytes, size_t *own_bytes);

/* Releases a session and everything it allocated. Accepts NULL. */
TEEXEC_API void teexec_session_destroy(teexec_session *session);

/* ================================================================== */
/* Generation                                                          */
/* ================================================================== */

/* A generator runs a decoder language model token by token over a batch of
 * sequences: append prompt tokens to each sequence, then step (run the
 * model on what is new, choose one next token per sequence, append it),
 * read the last logits, rewind. It owns a session of the model.
 *
 * The model is recognized by its inputs and outputs:
 *  - input_ids [batch, seq] (int64 or int32), optionally attention_mask
 *    [batch, total] and position_ids [batch, seq]; an output logits
 *    [batch, seq, vocab] (float, float16 or bfloat16; [batch, 1, vocab]
 *    also works);
 *  - with the KV-cache convention of Hugging Face Optimum exports, inputs
 *    past_key_values.N.key / .value [batch, kv_heads, past, head_dim] (GQA:
 *    kv_heads below the query heads is fine; kv_heads and head_dim must be
 *    declared) and outputs present.N.key / .value holding past + new.
 * Any other graph input is refused (TEEXEC_ERR_UNSUPPORTED, naming it).
 *
 * Modes: RECOMPUTE runs the whole of every sequence at each step (the
 * reference; a model with a fixed seq dim runs at that length, tokens
 * first, padding after, so any causal decoder works); a KV model runs in
 * it with an empty past each time. KV_CACHE feeds only the new tokens and
 * keeps the present tensors' new columns as the next past (on the device
 * for a CUDA session with past buckets, else on the host), padding the
 * past to a bucket so that decode steps repeat input shapes (past_bucket). AUTO picks KV_CACHE when the model has
 * past_key_values inputs.
 *
 * Batching: sequence i is row i; rows of different lengths run together.
 * In KV_CACHE mode new tokens go into shared cache columns, each row's
 * right-aligned, and the columns a row does not use are masked through
 * attention_mask (which the model must then have) with position_ids
 * counting each row's own tokens. Sampling draws from a counter-based
 * generator keyed by (seed, sequence, position), so a sequence's tokens
 * do not depend on which others share its batch.
 *
 * Errors leave the generator as it was: a bad token id (negative, or not
 * below the vocabulary once the logits' size is known), too many tokens
 * for max_length, a sequence index not below max_batch, a failed run.
 * Thread-safety: one thread at a time; the model must outlive it. */
typedef struct teexec_generator teexec_generator;

typedef enum teexec_generate_mode {
    TEEXEC_GENERATE_AUTO = 0,
    TEEXEC_GENERATE_RECOMPUTE = 1,
    TEEXEC_GENERATE_KV_CACHE = 2
} teexec_generate_mode;

typedef struct teexec_generator_options {
    /* the session: device [AUTO], recipe [NULL = "none"], dtype
     * [UNDEFINED], threads [0], as the session options of the same names */
    teexec_device device;
    const char *recipe;
    teexec_dtype dtype;
    int threads;
    teexec_generate_mode mode; /* [AUTO] */
    size_t max_batch;          /* sequences [1]; at most a fixed batch dim */
    size_t max_length;         /* tokens per sequence (KV_CACHE: cache
                                  columns) [0 = the model's fixed seq dim,
                                  else 4096] */
    int64_t pad_id;            /* the id fed at padded positions [0] */
    /* KV_CACHE: the past is fed padded with masked columns to a capacity
     * of this many columns, doubled as the cache grows (at most max_length
     * rounded up to it), that holds the run's new tokens too: consecutive
     * decode steps repeat one input shape (one plan, and on CUDA one
     * captured graph, per capacity; only the new tokens' columns of the
     * presents are kept; the first run's past is one masked bucket, not
     * empty) [0 = 64 when the model takes attention_mask and
     * position_ids, else 1 = no padding; > 1 needs both inputs] */
    size_t past_bucket;
    /* sampling: temperature [0 = greedy], top_k [0 = off], top_p [1 = off],
     * seed [0] */
    double temperature;
    uint32_t top_k;
    double top_p;
    uint64_t seed;
    /* the session profiles its runs (teexec_session_options_set_profile;
     * read with teexec_session_profile on teexec_generator_session; CUDA
     * graphs are then off) [0] */
    int profile;
} teexec_generator_options;

/* Fills *options with the defaults in brackets above. */
TEEXEC_API void teexec_generator_options_init(teexec_generator_options *options);

/* Creates a generator (and its session) for `model`; `options` NULL means
 * the defaults, and is copied. TEEXEC_ERR_UNSUPPORTED when the model has no
 * input_ids or logits, an input the generator cannot fill, or (KV_CACHE)
 * past inputs without matching present outputs or undeclared kv_heads /
 * head_dim. On success *out_generator is owned by the caller. */
TEEXEC_API teexec_status *teexec_generator_create(const teexec_model *model,
                                                  const teexec_generator_options *options,
                                                  teexec_generator **out_generator);

/* Appends `count` tokens to sequence `sequence` (< max_batch). They run at
 * the next compute or step. Refused, changing nothing: an id < 0 or >= the
 * vocabulary, a sequence out of range, more tokens than max_length. */
TEEXEC_API teexec_status *teexec_generator_append(teexec_generator *generator, size_t sequence,
                                                  const int64_t *ids, size_t count);

/* Runs the model on every token appended since the last run (the prefill
 * after a prompt), making each changed sequence's last logits current.
 * Nothing to run: returns at once. */
TEEXEC_API teexec_status *teexec_generator_compute(teexec_generator *generator);

/* One decode step over the batch (rows 0 .. teexec_generator_batch - 1,
 * each with at least one token): compute, choose one token per row with
 * the sampling options, append it. out_ids (n_ids >= the batch) gets the
 * tokens; may be NULL when n_ids is 0. */
TEEXEC_API teexec_status *teexec_generator_step(teexec_generator *generator, int64_t *out_ids,
                                                size_t n_ids);

/* Copies the last logits of `sequence` (as float, `count` >= the
 * vocabulary) to out. TEEXEC_ERR_INVALID_ARGUMENT when they are not
 * current (tokens appended since, or never computed). */
TEEXEC_API teexec_status *teexec_generator_logits(const teexec_generator *generator,
                                                  size_t sequence, float *out, size_t count);

/* Keeps the first `length` tokens of every sequence (longer ones are cut;
 * shorter ones are kept as they are). A cut sequence's last kept token is
 * run again at the next compute, so its logits become current again. */
TEEXEC_API teexec_status *teexec_generator_rewind(teexec_generator *generator, size_t length);

/* The tokens of a sequence (prompt and generated): *out_ids lives until the
 * next call that changes the generator. Empty for an unused sequence. */
TEEXEC_API teexec_status *teexec_generator_tokens(const teexec_generator *generator,
                                                  size_t sequence, const int64_t **out_ids,
                                                  size_t *out_count);

/* Rows in use: one more than the highest sequence with a token (0 when
 * none). */
TEEXEC_API size_t teexec_generator_batch(const teexec_generator *generator);
/* The vocabulary (the logits' last dim); 0 until known (declared in the
 * model or seen in a first run). */
TEEXEC_API size_t teexec_generator_vocab_size(const teexec_generator *generator);
/* The mode in use: RECOMPUTE or KV_CACHE (never AUTO). */
TEEXEC_API teexec_generate_mode teexec_generator_mode(const teexec_generator *generator);
/* The session's device: "cpu" or "cuda". Static string. */
TEEXEC_API const char *teexec_generator_device_name(const teexec_generator *generator);
/* The generator's own session, for introspection (teexec_session_plan_count,
 * teexec_session_profile); owned by the generator, valid until it is
 * destroyed. */
TEEXEC_API const teexec_session *teexec_generator_session(const teexec_generator *generator);
/* Model runs so far (compute calls that ran something). */
TEEXEC_API uint64_t teexec_generator_run_count(const teexec_generator *generator);

/* Releases a generator and its session. Accepts NULL. */
TEEXEC_API void teexec_generator_destroy(teexec_generator *generator);

/* ================================================================== */
/* The TE operation domain ("te.ops")                                  */
/* ================================================================== */

typedef enum teexec_te_ops_format {
    TEEXEC_TE_OPS_TABLE = 0,   /* a compact text table, one line per op */
    TEEXEC_TE_OPS_MARKDOWN = 1 /* the full spec, exactly docs/te-ops.md */
} teexec_te_ops_format;

/* The spec of every op of domain te.ops (version 1), generated from the
 * library's op registry. A static NUL-terminated string built once on the
 * first call and owned by the library (never free it); NULL only if memory
 * ran out while building it, or for an unknown format. Thread-safe. */
TEEXEC_API const char *teexec_te_ops_text(teexec_te_ops_format format);

/* ================================================================== */
/* Communicators (several ranks: data and tensor parallelism)          */
/* ================================================================== */

/* One rank of a group that runs collectives (docs/multi-gpu.md). Two
 * backends: "threads" (world_size ranks in this process, one thread each,
 * host buffers, sums in rank order 0..W-1 so every rank and every run gets
 * the same bits) and "nccl" (libnccl.so.2 loaded at run time, device
 * buffers on the rank's GPU; CUDA builds only). A collective that waits
 * longer than the group's timeout, or any rank's teexec_comm_abort, fails
 * the group: that call and every later one on every rank return
 * TEEXEC_ERR_COMM with the first failure's reason, never a hang. Each rank
 * is used by one thread at a time; the ranks of a group run concurrently. */
typedef struct teexec_comm teexec_comm;

/* world_size thread ranks into out_comms[0..world_size) (rank i at index
 * i). timeout_ms <= 0: 60000. Each rank is released with
 * teexec_comm_destroy; the shared state goes with the last. */
TEEXEC_API teexec_status *teexec_comm_create_threads(int world_size, int timeout_ms,
                                                     teexec_comm **out_comms);
/* One NCCL rank of a group spread over processes (one per GPU, on one or
 * several hosts): rank 0 writes NCCL's unique id to the file `rendezvous`
 * (a temporary file renamed into place), the others poll for it up to
 * timeout_ms; then ncclCommInitRank on CUDA device `device`, after which
 * rank 0 removes the file (remove one a failed run left first). World size 1
 * needs no file (NULL). TEEXEC_ERR_UNSUPPORTED in a build without CUDA,
 * TEEXEC_ERR_DEVICE when NCCL cannot be loaded. */
TEEXEC_API teexec_status *teexec_comm_create_nccl(int world_size, int rank, int device,
                                                  const char *rendezvous, int timeout_ms,
                                                  teexec_comm **out_comm);
/* world_size NCCL ranks in this process on devices[0..world_size)
 * (NULL = 0..world_size-1) through ncclCommInitAll, rank i at index i. */
TEEXEC_API teexec_status *teexec_comm_create_nccl_threads(int world_size, const int *devices,
                                                          int timeout_ms,
                                                          teexec_comm **out_comms);
/* CUDA devices visible to this process (0 without CUDA or a GPU). */
TEEXEC_API int teexec_comm_gpu_count(void);
TEEXEC_API int teexec_comm_rank(const teexec_comm *comm);
TEEXEC_API int teexec_comm_world_size(const teexec_comm *comm);
/* "threads" or "nccl". Static string. */
TEEXEC_API const char *teexec_comm_backend_name(const teexec_comm *comm);
/* Collectives over `count` elements of dtype FLOAT, DOUBLE or BFLOAT16
 * (bf16 sums in fp32, rounded once), host buffers for "threads", device
 * buffers for "nccl"; every rank calls the same collectives in the same
 * order. send may equal recv (all-reduce), or be recv + rank * count
 * (all-gather). all_reduce_sum: recv[i] = sum over ranks of send[i].
 * all_gather: recv (world_size * count) = the ranks' sends in rank order.
 * reduce_scatter: send has world_size * count; recv (count) = the sum of
 * block `rank` over the ranks. */
TEEXEC_API teexec_status *teexec_comm_all_reduce_sum(teexec_comm *comm, teexec_dtype dtype,
                                                     const void *send, void *recv, size_t count);
TEEXEC_API teexec_status *teexec_comm_all_gather(teexec_comm *comm, teexec_dtype dtype,
                                                 const void *send, void *recv, size_t count);
TEEXEC_API teexec_status *teexec_comm_reduce_scatter(teexec_comm *comm, teexec_dtype dtype,
                                                     const void *send, void *recv, size_t count);
/* Returns once every rank has called it (or the group failed). */
TEEXEC_API teexec_status *teexec_comm_barrier(teexec_comm *comm);
/* Fails the group with `reason` (NULL: "aborted"), so every rank's pending
 * and later collectives return TEEXEC_ERR_COMM instead of waiting. */
TEEXEC_API void teexec_comm_abort(teexec_comm *comm, const char *reason);
/* Releases one rank. Accepts NULL. */
TEEXEC_API void teexec_comm_destroy(teexec_comm *comm);

/* ================================================================== */
/* Training                                                            */
/* ================================================================== */

/* A trainer runs a model (its lowered copy: the same graph a session runs)
 * forward keeping what backward needs, applies a loss to one output, walks
 * backward to every trainable initializer (a float initializer of more
 * than one element whose value reaches the loss; integer initializers,
 * shape constants, scalars and masks are not trainable; see `freeze`) and
 * steps an optimizer. Parameters, gradients and saved models use the
 * user's initializer names and layouts. Parameters are kept by the trainer (FP32 master copies for
 * bf16/fp16 weights); the model is only read and must outlive the trainer.
 * A trainer is used by one thread at a time. */
typedef struct teexec_trainer teexec_trainer;

typedef enum teexec_loss_kind {
    TEEXEC_LOSS_MSE = 0,          /* mean((output - target)^2); data "target" */
    TEEXEC_LOSS_CROSS_ENTROPY = 1 /* mean softmax cross-entropy over the last
                                     dim of the logits; int64 data "labels" */
} teexec_loss_kind;

typedef enum teexec_optimizer_kind {
    TEEXEC_OPTIMIZER_ADAMW = 0, /* decoupled weight decay, as torch.optim.AdamW */
    TEEXEC_OPTIMIZER_SGD = 1    /* momentum, L2 weight decay, as torch.optim.SGD */
} teexec_optimizer_kind;

typedef struct teexec_train_options {
    teexec_loss_kind loss;
    const char *loss_output;   /* model output the loss reads; NULL = the first */
    int64_t ignore_index;      /* cross-entropy label to skip [-100] */
    teexec_optimizer_kind optimizer;
    double lr;                 /* [1e-3] */
    double weight_decay;       /* [0.01] */
    double momentum;           /* SGD [0] */
    double beta1, beta2, eps;  /* AdamW [0.9, 0.999, 1e-8] */
    /* Learning-rate schedule, as nanoGPT's: for the step with index s (0 =
     * the trainer's first), lr * (s + 1) / warmup_steps while s <
     * warmup_steps; then, with decay_steps > warmup_steps, a cosine from lr
     * down to min_lr reached at s = decay_steps and held after it; else lr.
     * [0, 0, 0: lr at every step] */
    int64_t warmup_steps;
    int64_t decay_steps;
    double min_lr;
    /* Gradient-norm clipping, as torch.nn.utils.clip_grad_norm_: when > 0,
     * every gradient is multiplied by min(1, clip_grad_norm / (N + 1e-6)),
     * N the 2-norm over all trainable gradients of the step (after the data
     * parallel average), before the optimizer reads it. teexec_trainer_grad
     * still returns the gradient before clipping. A non-finite N makes the
     * update non-finite, as in PyTorch. [0: off] */
    double clip_grad_norm;
    uint64_t seed;             /* for ops that draw random numbers [0] */
    /* Initializers to keep fixed: a comma-separated list of names or shell
     * patterns ("*.bias,wte"), matched against the user's initializer names
     * [NULL = train every parameter]. Scalars and mask-like constants
     * (non-finite or |x| >= 1e30) are never trained. */
    const char *freeze;
    /* Where and how (the same meanings as the session options):
     * device [AUTO: the GPU when usable], recipe [NULL = "none"; a CPU
     * trainer runs every recipe through its training fuser plan: bit-exact
     * CPU quantizers, FP32 GEMMs on the dequantized operands, fp8-delayed
     * state per trainer rolled after each step, NVFP4 stochastic rounding
     * seeded by seed and the step], dtype [UNDEFINED = the model's], deterministic
     * [0, or 1 when TEEXEC_DETERMINISTIC=1], cuda_graphs [1], profile [0]. */
    teexec_device device;
    const char *recipe;
    teexec_dtype dtype;
    int deterministic;
    int cuda_graphs;
    int profile;
    /* Data parallelism (docs/multi-gpu.md): this trainer is rank
     * teexec_comm_rank(comm) of teexec_comm_world_size(comm) [NULL: one
     * rank]; the communicator is borrowed and must outlive the trainer.
     * The CPU trainer takes a "threads" one; the CUDA trainer an "nccl"
     * one (its steps make the rank's GPU the calling thread's current
     * device) or a "threads" one (gradients averaged through the host:
     * several trainers on one GPU). Each step's tensors are the
     * global batch: inputs whose dim 0 equals the label's (B) are cut to
     * this rank's rows [r*B/W, (r+1)*B/W), B % W == 0; with dp_local_batch
     * they are this rank's share already. Gradients are averaged over the
     * ranks (weighted by each rank's counted elements) in buckets of
     * dp_bucket_mb [25] MiB after the backward (no overlap on the CPU);
     * every rank reports the global loss and holds the same parameters;
     * teexec_trainer_save_model writes on rank 0 only. zero1 [0]: each rank
     * keeps optimizer state for its part of the parameters only, updates
     * it, and the updated values are all-gathered (ZeRO stage 1; CPU
     * trainers only). The CUDA trainer averages gradients and losses
     * equally over the ranks (NCCL's ncclAvg), the global batch's when
     * every rank counts as many elements. Every rank must step the same
     * number of times. */
    teexec_comm *comm;
    int dp_local_batch;
    double dp_bucket_mb;
    int zero1;
} teexec_train_options;

/* Fills *options with the defaults in brackets above. */
TEEXEC_API void teexec_train_options_init(teexec_train_options *options);

/* Creates a trainer. Fails with TEEXEC_ERR_UNSUPPORTED naming the op when an
 * op on the path from a parameter to the loss has no backward rule, and
 * with TEEXEC_ERR_INVALID_ARGUMENT for bad options. `options` is copied
 * (loss_output included). On success *out owns the trainer. */
TEEXEC_API teexec_status *teexec_trainer_create(const teexec_model *model,
                                                const teexec_train_options *options,
                                                teexec_trainer **out_trainer);

/* One step: forward on the named tensors (every model input, plus "target"
 * for MSE or "labels" for cross-entropy), loss, backward, optimizer update.
 * *out_loss (may be NULL) gets the loss before the update, NaN on failure. Tensors are
 * borrowed for the call only. A CUDA trainer may be called with count 0
 * after a first step: it steps again on that step's tensors, which stay on
 * the device. */
TEEXEC_API teexec_status *teexec_trainer_step(teexec_trainer *trainer, size_t count,
                                              const char *const *names,
                                              const teexec_tensor *const *tensors,
                                              double *out_loss);

/* teexec_trainer_step with run options (NULL: exactly teexec_trainer_step).
 * A CPU trainer checks the cancel flag when the step starts, after the
 * forward and after the backward, never during the optimizer update: a
 * cancelled step changes no parameter. A CUDA trainer checks it only when
 * the step starts (the step is then one launch on the device: forward,
 * backward and update). */
TEEXEC_API teexec_status *teexec_trainer_step_with(teexec_trainer *trainer,
                                                   const teexec_run_options *run_options,
                                                   size_t count, const char *const *names,
                                                   const teexec_tensor *const *tensors,
                                                   double *out_loss);

/* Trainable initializers, in the model's initializer order. The name lives
 * as long as the trainer; NULL when index is out of range. */
TEEXEC_API size_t teexec_trainer_param_count(const teexec_trainer *trainer);
TEEXEC_API const char *teexec_trainer_param_name(const teexec_trainer *trainer, size_t index);

/* The gradient of the last step's loss with respect to the trainable
 * initializer or float model input `name`, with that value's name, dtype
 * and layout exactly as in the model. A new tensor owned by the caller.
 * TEEXEC_ERR_INVALID_ARGUMENT for a name without a gradient or before the
 * first step. */
TEEXEC_API teexec_status *teexec_trainer_grad(const teexec_trainer *trainer, const char *name,
                                              teexec_tensor **out_tensor);

/* The current value of a trainable initializer (a copy owned by the caller). */
TEEXEC_API teexec_status *teexec_trainer_param(const teexec_trainer *trainer, const char *name,
                                               teexec_tensor **out_tensor);

/* Writes the model with its trainable initializers replaced by the trained
 * values to `path`: a temporary file in the same folder, fsynced, then
 * renamed over `path`, so a crash leaves either the old file or the new one.
 * Initializers are stored inline. */
TEEXEC_API teexec_status *teexec_trainer_save_model(const teexec_trainer *trainer,
                                                    const char *path);

/* "cpu" or "cuda". Static string. */
TEEXEC_API const char *teexec_trainer_device_name(const teexec_trainer *trainer);
/* As teexec_session_profile, for a trainer created with profile = 1. */
TEEXEC_API teexec_status *teexec_trainer_profile(const teexec_trainer *trainer, char **out_text);
/* Device memory a CUDA trainer holds, in bytes, once it has stepped: its
 * executor's one allocation (parameters, FP32 masters, optimizer moments,
 * gradients, activations and saved tensors, the GEMM workspace) and its
 * small state -- what it allocated itself, comparable to PyTorch's
 * max_memory_allocated (CUDA context and library handles not counted).
 * 0 for a CPU trainer or before the first step. */
TEEXEC_API size_t teexec_trainer_device_bytes(const teexec_trainer *trainer);

/* Releases a trainer. Accepts NULL. */
TEEXEC_API void teexec_trainer_destroy(teexec_trainer *trainer);

/* Training data: the arrays of a NumPy .npz file (stored or deflated
 * members), by name ("x.npy" is array "x"). The dataset owns its tensors;
 * the pointers it returns live until teexec_dataset_destroy. Read-only use
 * from several threads is fine. */
typedef struct teexec_dataset teexec_dataset;

TEEXEC_API teexec_status *teexec_dataset_load_npz(const char *path, teexec_dataset **out_dataset);
TEEXEC_API size_t teexec_dataset_count(const teexec_dataset *dataset);
/* NULL when index is out of range. */
TEEXEC_API const char *teexec_dataset_name(const teexec_dataset *dataset, size_t index);
TEEXEC_API const teexec_tensor *teexec_dataset_tensor(const teexec_dataset *dataset, size_t index);
/* Releases a dataset. Accepts NULL. */
TEEXEC_API void teexec_dataset_destroy(teexec_dataset *dataset);

/* ================================================================== */
/* Planning and conversion                                             */
/* ================================================================== */

/* What a plan is made for. Defaults: recipe "none", device "cpu",
 * inference, not deterministic, every symbolic input dim 1, parameters
 * trainable, model inputs needing no gradient. Not thread-safe to modify;
 * calls copy what they need, so the options may be destroyed right after. */
typedef struct teexec_plan_options teexec_plan_options;

TEEXEC_API teexec_status *teexec_plan_options_create(teexec_plan_options **out_options);
TEEXEC_API void teexec_plan_options_destroy(teexec_plan_options *options);
/* "none", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8", "nvfp4",
 * optionally with a grad format and ",key=value" options. Grads follow TE's
 * recipes: fp8-delayed and fp8-current are HYBRID (E4M3 forward, E5M2
 * grads) unless ":e4m3", mxfp8 is E4M3 unless ":hybrid", the others E4M3
 * (FP8) or E2M1 (NVFP4). Options (see
 * `teexec plan --help`). TEEXEC_ERR_INVALID_ARGUMENT naming the accepted
 * values otherwise. */
TEEXEC_API teexec_status *teexec_plan_options_set_recipe(teexec_plan_options *options,
                                                         const char *recipe);
/* The device planned for: "cpu", "sm_90" (H100/H200), "sm_100" (B200), or a
 * name those aliases accept ("h200", "b200"). */
TEEXEC_API teexec_status *teexec_plan_options_set_device(teexec_plan_options *options,
                                                         const char *device);
/* Non-zero: plan a training step (forward + backward). */
TEEXEC_API teexec_status *teexec_plan_options_set_training(teexec_plan_options *options,
                                                           int training);
/* Non-zero: only kernels whose results do not depend on scheduling. */
TEEXEC_API teexec_status *teexec_plan_options_set_deterministic(teexec_plan_options *options,
                                                                int deterministic);
TEEXEC_API teexec_status *teexec_plan_options_set_dim(teexec_plan_options *options,
                                                      const char *dim_name, int64_t value);
/* teexec_model_convert only: write the weights as ONNX external data, in
 * OUT's folder as "<OUT's file name>.data" (every initializer of 64 KiB and
 * more), even when the model would fit one file. Without it, external data
 * is written only for a model over protobuf's 2 GiB. */
TEEXEC_API teexec_status *teexec_plan_options_set_external_data(teexec_plan_options *options,
                                                                int external_data);
/* Convert only: the decoder's KV-cache attention (past_key_values inputs,
 * present outputs, lowered to DotProductAttention) is written in
 * DotProductAttention's cache mode: the caches become state inputs
 * kv_cache.N.{key,value} [batch, capacity, h_kv, d] that a session keeps
 * and the op appends to in place, a new input cache_len [batch] int64
 * says how many tokens each row holds, and the past, present and
 * attention_mask go (docs/te-ops.md). batch and capacity both 0: off (the
 * default). UNSUPPORTED at convert time for a model of another form. */
TEEXEC_API teexec_status *teexec_plan_options_set_kv_cache(teexec_plan_options *options,
                                                           int64_t batch, int64_t capacity);

typedef enum teexec_plan_format {
    TEEXEC_PLAN_TEXT = 0,    /* groups, layouts, quantization, memory */
    TEEXEC_PLAN_EXPLAIN = 1, /* the same plus every declined fusion and pattern, with why */
    TEEXEC_PLAN_JSON = 2,    /* one JSON object with everything EXPLAIN shows */
    TEEXEC_PLAN_DOT = 3      /* a Graphviz digraph: a cluster per group with its forward and
                                backward layouts, quantized operands as labelled edges,
                                declined fusions with their reasons */
} teexec_plan_format;

/* Lowers the model (standard ONNX subgraphs -> te.ops), plans it for
 * `options` (NULL = defaults) and describes the plan. *out_text is a new
 * NUL-terminated string; release it with teexec_string_free(). Thread-safe
 * for distinct calls (the model is only read). */
TEEXEC_API teexec_status *teexec_model_plan(const teexec_model *model,
                                            const teexec_plan_options *options,
                                            teexec_plan_format format, char **out_text);

/* Writes the lowered and planned model to `path` (atomically: temporary
 * file, fsync, rename): te.ops nodes, each fuser group of te.ops ops as a
 * model-local function in domain te.fused whose body uses only te.ops ops,
 * the plan's quantization decisions as attributes, the original
 * initializer names kept. A model over protobuf's 2 GiB (or any, with
 * teexec_plan_options_set_external_data) keeps its weights in
 * "<path>.data" beside it, written first, also atomically, and named
 * relative to the model as ONNX's external data. Converting the result
 * again writes the same bytes.
 * `summary` (may be NULL) gets a new string saying what was lowered and
 * grouped (release with teexec_string_free). */
TEEXEC_API teexec_status *teexec_model_convert(const teexec_model *model,
                                               const teexec_plan_options *options,
                                               const char *path, char **summary);

/* Writes rank `rank` of a `world_size`-way tensor-parallel split of a te.ops
 * model to `path` (atomically), the layout TE uses (docs/multi-gpu.md):
 * each main-graph chain Linear(W1) -> [Bias, plain activation, Dropout,
 * ConstantScale, Identity]* -> Linear(W2), its weights initializers read
 * once and its hidden size H a multiple of world_size, keeps rows
 * [r*H/W, (r+1)*H/W) of W1 and the chain's biases (column parallel) and
 * the same columns of W2 (row parallel), with a te.ops AllReduce inserted
 * on W2's output; everything else is replicated. Run the ranks' sessions
 * with a communicator (teexec_session_options_set_comm). *out_n_split
 * (may be NULL) gets the number of chains split; TEEXEC_ERR_UNSUPPORTED
 * when there is none. */
TEEXEC_API teexec_status *teexec_model_split_tensor_parallel(const teexec_model *model,
                                                             int world_size, int rank,
                                                             const char *path, int *out_n_split);

/* Releases a string the library returned. Accepts NULL. */
TEEXEC_API void teexec_string_free(char *text);

#ifdef __cplusplus
}
#endif

#endif /* TEEXEC_TEEXEC_H */
