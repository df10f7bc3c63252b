/*
** cg_gccjit_dl.h -- libgccjit loaded when the first kernel is compiled
** (dlopen), not linked: libtide.so needs no compiler to load, and a host
** without libgccjit runs everything eagerly (and compiled kernels found in
** the disk cache). cg_gccjit.c includes this after <libgccjit.h>: each
** gcc_jit_* name it calls becomes a pointer in the table cg_gj, resolved with
** dlsym by cg_gccjit_load (cg_gccjit_dl.c). Both lists are checked by the
** build: a name defined below but missing from CG_GCCJIT_FNS fails to
** compile, and a call to a function missing from both fails the link of
** libtide.so (-z defs).
*/
#ifndef CG_GCCJIT_DL_H
#define CG_GCCJIT_DL_H
#include <libgccjit.h>

#define CG_GCCJIT_FNS(_) \
  _(block_add_assignment) \
  _(block_add_assignment_op) \
  _(block_add_comment) \
  _(block_add_eval) \
  _(block_add_extended_asm) \
  _(block_end_with_conditional) \
  _(block_end_with_jump) \
  _(block_end_with_void_return) \
  _(context_acquire) \
  _(context_add_command_line_option) \
  _(context_add_driver_option) \
  _(context_compile) \
  _(context_compile_to_file) \
  _(context_get_builtin_function) \
  _(context_get_first_error) \
  _(context_get_int_type) \
  _(context_get_type) \
  _(context_new_array_access) \
  _(context_new_array_type) \
  _(context_new_binary_op) \
  _(context_new_bitcast) \
  _(context_new_call) \
  _(context_new_cast) \
  _(context_new_comparison) \
  _(context_new_function) \
  _(context_new_param) \
  _(context_new_rvalue_from_double) \
  _(context_new_rvalue_from_int) \
  _(context_new_rvalue_from_long) \
  _(context_new_rvalue_from_vector) \
  _(context_new_unary_op) \
  _(context_one) \
  _(context_release) \
  _(context_set_bool_allow_unreachable_blocks) \
  _(context_set_bool_print_errors_to_stderr) \
  _(context_set_int_option) \
  _(context_zero) \
  _(extended_asm_add_clobber) \
  _(extended_asm_add_input_operand) \
  _(extended_asm_set_volatile_flag) \
  _(function_new_block) \
  _(function_new_local) \
  _(lvalue_as_rvalue) \
  _(lvalue_get_address) \
  _(param_as_rvalue) \
  _(result_get_code) \
  _(result_release) \
  _(rvalue_dereference) \
  _(type_get_aligned) \
  _(type_get_const) \
  _(type_get_pointer) \
  _(type_get_vector)

typedef struct CgGccjit {
#define CG_GJ_FIELD(f) __typeof__(gcc_jit_##f) *f;
  CG_GCCJIT_FNS(CG_GJ_FIELD)
#undef CG_GJ_FIELD
} CgGccjit;
extern CgGccjit cg_gj;

/* 0 when libgccjit is loaded (the first call loads it: TIDE_GCCJIT names
** another file, default libgccjit.so.0), else an error naming it. */
int cg_gccjit_load(void);

#define gcc_jit_block_add_assignment (cg_gj.block_add_assignment)
#define gcc_jit_block_add_assignment_op (cg_gj.block_add_assignment_op)
#define gcc_jit_block_add_comment (cg_gj.block_add_comment)
#define gcc_jit_block_add_eval (cg_gj.block_add_eval)
#define gcc_jit_block_add_extended_asm (cg_gj.block_add_extended_asm)
#define gcc_jit_block_end_with_conditional (cg_gj.block_end_with_conditional)
#define gcc_jit_block_end_with_jump (cg_gj.block_end_with_jump)
#define gcc_jit_block_end_with_void_return (cg_gj.block_end_with_void_return)
#define gcc_jit_context_acquire (cg_gj.context_acquire)
#define gcc_jit_context_add_command_line_option (cg_gj.context_add_command_line_option)
#define gcc_jit_context_add_driver_option (cg_gj.context_add_driver_option)
#define gcc_jit_context_compile (cg_gj.context_compile)
#define gcc_jit_context_compile_to_file (cg_gj.context_compile_to_file)
#define gcc_jit_context_get_builtin_function (cg_gj.context_get_builtin_function)
#define gcc_jit_context_get_first_error (cg_gj.context_get_first_error)
#define gcc_jit_context_get_int_type (cg_gj.context_get_int_type)
#define gcc_jit_context_get_type (cg_gj.context_get_type)
#define gcc_jit_context_new_array_access (cg_gj.context_new_array_access)
#define gcc_jit_context_new_array_type (cg_gj.context_new_array_type)
#define gcc_jit_context_new_binary_op (cg_gj.context_new_binary_op)
#define gcc_jit_context_new_bitcast (cg_gj.context_new_bitcast)
#define gcc_jit_context_new_call (cg_gj.context_new_call)
#define gcc_jit_context_new_cast (cg_gj.context_new_cast)
#define gcc_jit_context_new_comparison (cg_gj.context_new_comparison)
#define gcc_jit_context_new_function (cg_gj.context_new_function)
#define gcc_jit_context_new_param (cg_gj.context_new_param)
#define gcc_jit_context_new_rvalue_from_double (cg_gj.context_new_rvalue_from_double)
#define gcc_jit_context_new_rvalue_from_int (cg_gj.context_new_rvalue_from_int)
#define gcc_jit_context_new_rvalue_from_long (cg_gj.context_new_rvalue_from_long)
#define gcc_jit_context_new_rvalue_from_vector (cg_gj.context_new_rvalue_from_vector)
#define gcc_jit_context_new_unary_op (cg_gj.context_new_unary_op)
#define gcc_jit_context_one (cg_gj.context_one)
#define gcc_jit_context_release (cg_gj.context_release)
#define gcc_jit_context_set_bool_allow_unreachable_blocks (cg_gj.context_set_bool_allow_unreachable_blocks)
#define gcc_jit_context_set_bool_print_errors_to_stderr (cg_gj.context_set_bool_print_errors_to_stderr)
#define gcc_jit_context_set_int_option (cg_gj.context_set_int_option)
#define gcc_jit_context_zero (cg_gj.context_zero)
#define gcc_jit_extended_asm_add_clobber (cg_gj.extended_asm_add_clobber)
#define gcc_jit_extended_asm_add_input_operand (cg_gj.extended_asm_add_input_operand)
#define gcc_jit_extended_asm_set_volatile_flag (cg_gj.extended_asm_set_volatile_flag)
#define gcc_jit_function_new_block (cg_gj.function_new_block)
#define gcc_jit_function_new_local (cg_gj.function_new_local)
#define gcc_jit_lvalue_as_rvalue (cg_gj.lvalue_as_rvalue)
#define gcc_jit_lvalue_get_address (cg_gj.lvalue_get_address)
#define gcc_jit_param_as_rvalue (cg_gj.param_as_rvalue)
#define gcc_jit_result_get_code (cg_gj.result_get_code)
#define gcc_jit_result_release (cg_gj.result_release)
#define gcc_jit_rvalue_dereference (cg_gj.rvalue_dereference)
#define gcc_jit_type_get_aligned (cg_gj.type_get_aligned)
#define gcc_jit_type_get_const (cg_gj.type_get_const)
#define gcc_jit_type_get_pointer (cg_gj.type_get_pointer)
#define gcc_jit_type_get_vector (cg_gj.type_get_vector)

#endif
