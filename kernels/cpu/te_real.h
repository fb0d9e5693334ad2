/*
 * te_real.h - the real type of one compilation pass of a TE op file.
 *
 * Each kernels/cpu/te_*.c writes its math once over REAL and compiles it
 * twice, float (TE_F64 == 0: the production path, FP32 math as Transformer
 * Engine does) and double (TE_F64 == 1: the FP64 path that finite-difference
 * tests need), by including itself with TE_F64 set. This header, included
 * at the top of each pass (no include guard on purpose), maps REAL, FN()
 * and the math functions to that pass's type. Constants are written K(x) so
 * float passes stay in float.
 */
#undef REAL
#undef FN
#undef K
#undef R_EXP
#undef R_TANH
#undef R_ERF
#undef R_SQRT
#undef R_SIN
#undef R_COS
#undef R_POW
#undef R_LOG
#undef R_FABS
#undef te_load
#undef te_store
#undef te_view
#undef TE_DTYPE
#undef te_gemm

#if TE_F64
#define REAL double
#define FN(name) name##_f64
#define R_EXP exp
#define R_TANH tanh
#define R_ERF erf
#define R_SQRT sqrt
#define R_SIN sin
#define R_COS cos
#define R_POW pow
#define R_LOG log
#define R_FABS fabs
#define te_load tx_te_load_f64
#define te_store tx_te_store_f64
#define te_view tx_te_view_f64
#define TE_DTYPE TEEXEC_DTYPE_DOUBLE
#define te_gemm tx_te_gemm_f64
#else
#define REAL float
#define FN(name) name##_f32
#define R_EXP expf
#define R_TANH tanhf
#define R_ERF erff
#define R_SQRT sqrtf
#define R_SIN sinf
#define R_COS cosf
#define R_POW powf
#define R_LOG logf
#define R_FABS fabsf
#define te_load tx_te_load_f32
#define te_store tx_te_store_f32
#define te_view tx_te_view_f32
#define TE_DTYPE TEEXEC_DTYPE_FLOAT
#define te_gemm tx_te_gemm_f32
#endif
#define K(x) ((REAL)(x))
