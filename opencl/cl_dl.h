/*
** cl_dl.h -- the OpenCL ICD loader (libOpenCL.so.1) loaded on first use
** (dlopen), not linked: libtide.so loads on a host without any OpenCL, where
** the "opencl" device is simply absent (tide.opencl.is_available() is false).
** cl.h includes this after <CL/cl.h>: each cl* function tide calls becomes a
** pointer in the table ocl_api, resolved with dlsym by ocl_load (cl_dl.c),
** which every entry into the device runs first (listing or opening devices).
** CLBlast is loaded the same way, by cl_blas.c, at the first float matmul.
** Both lists are checked by the build: a name defined below but missing from
** OCL_FNS fails to compile, a call to a function in neither fails the link of
** libtide.so (-z defs).
*/
#ifndef CL_DL_H
#define CL_DL_H

#define OCL_FNS(_) \
  _(BuildProgram) \
  _(CreateBuffer) \
  _(CreateCommandQueue) \
  _(CreateContext) \
  _(CreateKernel) \
  _(CreateProgramWithBinary) \
  _(CreateProgramWithSource) \
  _(EnqueueCopyBuffer) \
  _(EnqueueFillBuffer) \
  _(EnqueueNDRangeKernel) \
  _(EnqueueReadBuffer) \
  _(EnqueueWriteBuffer) \
  _(Finish) \
  _(GetDeviceIDs) \
  _(GetDeviceInfo) \
  _(GetEventInfo) \
  _(GetEventProfilingInfo) \
  _(GetPlatformIDs) \
  _(GetPlatformInfo) \
  _(GetProgramBuildInfo) \
  _(GetProgramInfo) \
  _(ReleaseEvent) \
  _(ReleaseKernel) \
  _(ReleaseMemObject) \
  _(ReleaseProgram) \
  _(SetKernelArg) \
  _(WaitForEvents)

typedef struct OclApi {
#define OCL_FIELD(f) __typeof__(cl##f) *f;
  OCL_FNS(OCL_FIELD)
#undef OCL_FIELD
} OclApi;
extern OclApi ocl_api;

/* 0 once the ICD loader is loaded (TIDE_OPENCL_LIB names another file, default
** libOpenCL.so.1), else an error naming it. */
int ocl_load(void);
/* dlopen of name (RTLD_NOW | RTLD_LOCAL) and dlsym of n symbols into fns; 0 or
** an error "opencl: <name> not found (<hint>); <what still works> (<dlerror>)". */
int ocl_dl(const char *name, const char *hint, const char *const *syms, void **fns, int n);

#define clBuildProgram (ocl_api.BuildProgram)
#define clCreateBuffer (ocl_api.CreateBuffer)
#define clCreateCommandQueue (ocl_api.CreateCommandQueue)
#define clCreateContext (ocl_api.CreateContext)
#define clCreateKernel (ocl_api.CreateKernel)
#define clCreateProgramWithBinary (ocl_api.CreateProgramWithBinary)
#define clCreateProgramWithSource (ocl_api.CreateProgramWithSource)
#define clEnqueueCopyBuffer (ocl_api.EnqueueCopyBuffer)
#define clEnqueueFillBuffer (ocl_api.EnqueueFillBuffer)
#define clEnqueueNDRangeKernel (ocl_api.EnqueueNDRangeKernel)
#define clEnqueueReadBuffer (ocl_api.EnqueueReadBuffer)
#define clEnqueueWriteBuffer (ocl_api.EnqueueWriteBuffer)
#define clFinish (ocl_api.Finish)
#define clGetDeviceIDs (ocl_api.GetDeviceIDs)
#define clGetDeviceInfo (ocl_api.GetDeviceInfo)
#define clGetEventInfo (ocl_api.GetEventInfo)
#define clGetEventProfilingInfo (ocl_api.GetEventProfilingInfo)
#define clGetPlatformIDs (ocl_api.GetPlatformIDs)
#define clGetPlatformInfo (ocl_api.GetPlatformInfo)
#define clGetProgramBuildInfo (ocl_api.GetProgramBuildInfo)
#define clGetProgramInfo (ocl_api.GetProgramInfo)
#define clReleaseEvent (ocl_api.ReleaseEvent)
#define clReleaseKernel (ocl_api.ReleaseKernel)
#define clReleaseMemObject (ocl_api.ReleaseMemObject)
#define clReleaseProgram (ocl_api.ReleaseProgram)
#define clSetKernelArg (ocl_api.SetKernelArg)
#define clWaitForEvents (ocl_api.WaitForEvents)

#endif
