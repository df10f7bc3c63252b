/*
** rt_ops.h -- the op table: the single source of truth for every op's id, name,
** kind, arity, property flags, shape/dtype rule (meta), eager kernel and
** derivative rule. Adding an op = one row here + its kernel + its grad rule.
*/
#ifndef RT_OPS_H
#define RT_OPS_H

/* Kinds */
#define RT_K_EW     0   /* elementwise, broadcasting */
#define RT_K_RED    1   /* reduction over attrs.dims */
#define RT_K_ROW    2   /* row-wise normalizers over one dim (softmax) */
#define RT_K_CONTR  3   /* contraction (BLAS) */
#define RT_K_MOVE   4   /* movement: views and copies */
#define RT_K_INDEX  5   /* gather/scatter/concat */
#define RT_K_ATTN   6   /* fused attention (rt_attn.c; opencl/cl_attn.c) */
#define RT_K_SORT   7   /* sorting and searching (rt_sort.c; CPU only: OpenCL copies to the host and back) */
#define RT_K_SCAN   8   /* scans along attrs.i[0] (rt_scan.c; compiled plans run them as eager steps; OpenCL as RT_K_SORT) */

/* Flags: algebraic properties and dtype rules. */
#define RT_F_COMM     0x001  /* commutative */
#define RT_F_ASSOC    0x002  /* associative */
#define RT_F_FLOAT    0x004  /* integer/bool inputs compute in the default float dtype */
#define RT_F_BOOLOUT  0x008  /* result is bool (comparisons, logical) */
#define RT_F_VIEW     0x010  /* result aliases the first input's storage */
#define RT_F_NODIFF   0x020  /* result never requires grad */
#define RT_F_NOBOOL   0x040  /* bool inputs are rejected */
#define RT_F_FLOATIN  0x080  /* inputs must be floating point */
#define RT_F_LONGOUT  0x100  /* result is int64 (arg reductions) */
#define RT_F_ATTRTYPE 0x200  /* result dtype is attrs.scalar_type (cast) */
#define RT_F_NOPROMO  0x400  /* inputs keep their own dtypes (index, where's cond) */

/* _(NAME, kind, arity, flags, meta, kernel, grad)
** arity -1 = variadic (cat). grad 0 = no derivative (with RT_F_NODIFF). */
#define RT_OPDEF(_) \
  /* -- elementwise unary */ \
  _(NEG,        EW, 1, RT_F_NOBOOL,              ew, ew, neg) \
  _(ABS,        EW, 1, RT_F_NOBOOL,              ew, ew, abs) \
  _(SIGN,       EW, 1, RT_F_NOBOOL,              ew, ew, zero) \
  _(EXP,        EW, 1, RT_F_FLOAT,               ew, ew, exp) \
  _(LOG,        EW, 1, RT_F_FLOAT,               ew, ew, log) \
  _(LOG1P,      EW, 1, RT_F_FLOAT,               ew, ew, log1p) \
  _(EXPM1,      EW, 1, RT_F_FLOAT,               ew, ew, expm1) \
  _(SQRT,       EW, 1, RT_F_FLOAT,               ew, ew, sqrt) \
  _(RSQRT,      EW, 1, RT_F_FLOAT,               ew, ew, rsqrt) \
  _(SIN,        EW, 1, RT_F_FLOAT,               ew, ew, sin) \
  _(COS,        EW, 1, RT_F_FLOAT,               ew, ew, cos) \
  _(TAN,        EW, 1, RT_F_FLOAT,               ew, ew, tan) \
  _(TANH,       EW, 1, RT_F_FLOAT,               ew, ew, tanh) \
  _(SIGMOID,    EW, 1, RT_F_FLOAT,               ew, ew, sigmoid) \
  _(RELU,       EW, 1, RT_F_NOBOOL,              ew, ew, relu) \
  _(GELU,       EW, 1, RT_F_FLOAT,               ew, ew, gelu) \
  _(SILU,       EW, 1, RT_F_FLOAT,               ew, ew, silu) \
  _(ERF,        EW, 1, RT_F_FLOAT,               ew, ew, erf) \
  _(FLOOR,      EW, 1, RT_F_NOBOOL,              ew, ew, zero) \
  _(CEIL,       EW, 1, RT_F_NOBOOL,              ew, ew, zero) \
  _(ROUND,      EW, 1, RT_F_NOBOOL,              ew, ew, zero) \
  _(CLAMP,      EW, 1, RT_F_NOBOOL,              ew, ew, clamp) \
  _(CAST,       EW, 1, RT_F_ATTRTYPE,            ew, ew, cast) \
  _(LOGICAL_NOT,EW, 1, RT_F_BOOLOUT|RT_F_NODIFF|RT_F_NOPROMO, ew, ew, 0) \
  /* -- elementwise binary; ORDER CMP: EQ NE LT LE GT GE */ \
  _(ADD,        EW, 2, RT_F_COMM|RT_F_ASSOC,     ew, ew, add) \
  _(SUB,        EW, 2, RT_F_NOBOOL,              ew, ew, sub) \
  _(MUL,        EW, 2, RT_F_COMM|RT_F_ASSOC,     ew, ew, mul) \
  _(DIV,        EW, 2, RT_F_FLOAT,               ew, ew, div) \
  _(POW,        EW, 2, RT_F_NOBOOL,              ew, ew, pow) \
  _(MINIMUM,    EW, 2, RT_F_COMM|RT_F_ASSOC,     ew, ew, minmax) \
  _(MAXIMUM,    EW, 2, RT_F_COMM|RT_F_ASSOC,     ew, ew, minmax) \
  _(ATAN2,      EW, 2, RT_F_FLOAT,               ew, ew, atan2) \
  _(HYPOT,      EW, 2, RT_F_FLOAT,               ew, ew, hypot) \
  _(FMOD,       EW, 2, RT_F_NOBOOL,              ew, ew, fmod) \
  _(REMAINDER,  EW, 2, RT_F_NOBOOL,              ew, ew, fmod) \
  _(EQ,         EW, 2, RT_F_COMM|RT_F_BOOLOUT|RT_F_NODIFF, ew, ew, 0) \
  _(NE,         EW, 2, RT_F_COMM|RT_F_BOOLOUT|RT_F_NODIFF, ew, ew, 0) \
  _(LT,         EW, 2, RT_F_BOOLOUT|RT_F_NODIFF, ew, ew, 0) \
  _(LE,         EW, 2, RT_F_BOOLOUT|RT_F_NODIFF, ew, ew, 0) \
  _(GT,         EW, 2, RT_F_BOOLOUT|RT_F_NODIFF, ew, ew, 0) \
  _(GE,         EW, 2, RT_F_BOOLOUT|RT_F_NODIFF, ew, ew, 0) \
  _(LOGICAL_AND,EW, 2, RT_F_COMM|RT_F_BOOLOUT|RT_F_NODIFF|RT_F_NOPROMO, ew, ew, 0) \
  _(LOGICAL_OR, EW, 2, RT_F_COMM|RT_F_BOOLOUT|RT_F_NODIFF|RT_F_NOPROMO, ew, ew, 0) \
  /* -- elementwise ternary: where(cond, a, b) */ \
  _(WHERE,      EW, 3, 0,                        ew, ew, where) \
  /* -- reductions over attrs.dims (ndims -1 = all), attrs.keepdim */ \
  _(SUM,        RED, 1, 0,                       red, red, sum) \
  _(MEAN,       RED, 1, RT_F_FLOAT,              red, red, mean) \
  _(PROD,       RED, 1, 0,                       red, red, prod) \
  _(MAX,        RED, 1, 0,                       red, red, maxmin) \
  _(MIN,        RED, 1, 0,                       red, red, maxmin) \
  _(ARGMAX,     RED, 1, RT_F_LONGOUT|RT_F_NODIFF,red, red, 0) \
  _(ARGMIN,     RED, 1, RT_F_LONGOUT|RT_F_NODIFF,red, red, 0) \
  _(VAR,        RED, 1, RT_F_FLOAT,              red, red, var) \
  _(STD,        RED, 1, RT_F_FLOAT,              red, red, std) \
  _(LOGSUMEXP,  RED, 1, RT_F_FLOAT,              red, red, logsumexp) \
  _(NORM,       RED, 1, RT_F_FLOAT,              red, red, norm) \
  /* -- row-wise over attrs.i[0] */ \
  _(SOFTMAX,    ROW, 1, RT_F_FLOAT,              row, row, softmax) \
  _(LOG_SOFTMAX,ROW, 1, RT_F_FLOAT,              row, row, log_softmax) \
  /* -- scans along attrs.i[0]; attrs.flags & 1: from the end (rt_scan.c) */ \
  _(CUMSUM,     SCAN, 1, 0,                      scan, scan, cumsum) \
  _(CUMPROD,    SCAN, 1, 0,                      scan, scan, cumprod) \
  _(CUMMAX,     SCAN, 1, 0,                      scan, scan, cummaxmin) \
  _(CUMMIN,     SCAN, 1, 0,                      scan, scan, cummaxmin) \
  _(CUMARGMAX,  SCAN, 1, RT_F_LONGOUT|RT_F_NODIFF, scan, scan, 0) \
  _(CUMARGMIN,  SCAN, 1, RT_F_LONGOUT|RT_F_NODIFF, scan, scan, 0) \
  _(LOGCUMSUMEXP, SCAN, 1, RT_F_FLOAT,           scan, scan, logcumsumexp) \
  /* -- contraction */ \
  _(MATMUL,     CONTR, 2, RT_F_NOBOOL,           matmul, matmul, matmul) \
  /* -- attention (rt_attn.c): q, k, v[, mask]; attrs.i[0] causal, attrs.s[0] scale */ \
  _(SDPA,       ATTN, -1, RT_F_FLOATIN,          sdpa, sdpa, sdpa) \
  _(SDPA_BACKWARD, ATTN, -1, RT_F_FLOATIN|RT_F_NODIFF, sdpa_backward, sdpa_backward, 0) \
  /* -- movement: views (no copy) and the one copy */ \
  _(VIEW,       MOVE, 1, RT_F_VIEW|RT_F_NOPROMO, view, view, view) \
  _(PERMUTE,    MOVE, 1, RT_F_VIEW|RT_F_NOPROMO, permute, view, permute) \
  _(EXPAND,     MOVE, 1, RT_F_VIEW|RT_F_NOPROMO, expand, view, expand) \
  _(SLICE,      MOVE, 1, RT_F_VIEW|RT_F_NOPROMO, slice, view, slice) \
  _(SELECT,     MOVE, 1, RT_F_VIEW|RT_F_NOPROMO, select, view, select) \
  _(COPY,       MOVE, 1, RT_F_NOPROMO,           ew, ew, copy) \
  /* -- indexing and concatenation */ \
  _(INDEX_SELECT, INDEX, 2, RT_F_NOPROMO,        index_select, index_select, index_select) \
  _(INDEX_ADD,  INDEX, 3, RT_F_NOPROMO,          index_add, index_add, index_add) \
  _(GATHER,     INDEX, 2, RT_F_NOPROMO,          gather, gather, gather) \
  _(SCATTER_ADD,INDEX, 3, RT_F_NOPROMO,          scatter_add, scatter_add, scatter_add) \
  _(SLICE_SCATTER, INDEX, 2, 0,                  slice_scatter, slice_scatter, slice_scatter) \
  _(CAT,        INDEX, -1, 0,                    cat, cat, cat) \
  /* -- sliding windows (rt_conv.c): im2col and its adjoint col2im */ \
  _(UNFOLD,     INDEX, 1, RT_F_FLOAT,            unfold, unfold, unfold) \
  _(FOLD,       INDEX, 1, RT_F_FLOAT,            fold, fold, fold) \
  /* -- sorting and searching (rt_sort.c): 0-based int64 indices; values are gathered */ \
  _(SORT,       SORT, 1, RT_F_LONGOUT|RT_F_NODIFF|RT_F_NOPROMO, sort, sort, 0) \
  _(TOPK,       SORT, 1, RT_F_LONGOUT|RT_F_NODIFF|RT_F_NOPROMO, topk, topk, 0) \
  _(MODE,       SORT, 1, RT_F_LONGOUT|RT_F_NODIFF|RT_F_NOPROMO, mode, mode, 0) \
  _(SEARCHSORTED, SORT, 2, RT_F_LONGOUT|RT_F_NODIFF, searchsorted, searchsorted, 0)

typedef enum {
#define RT_OPENUM(name, kind, arity, flags, meta, kern, grad) RT_OP_##name,
  RT_OPDEF(RT_OPENUM)
#undef RT_OPENUM
  RT_OP__MAX
} RtOp;

/* ORDER CMP: the comparison ops are consecutive, EQ first. */
_Static_assert(RT_OP_NE == RT_OP_EQ + 1 && RT_OP_LT == RT_OP_EQ + 2 &&
               RT_OP_LE == RT_OP_EQ + 3 && RT_OP_GT == RT_OP_EQ + 4 &&
               RT_OP_GE == RT_OP_EQ + 5, "ORDER CMP");

#endif
