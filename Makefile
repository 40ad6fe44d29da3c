# csq - SQLite tables on an NVMe computational-storage device.
#
#   make            build build/csq.so (the extension), build/csq (the shell)
#   make deps       install the Debian packages csq needs (apt-get, as root)
#   make demo       the main job: load a TPC-H-like table, query it, show bytes moved
#   make test       every test; ends with "N passed, N failed"
#   make sanitize   the test suite under AddressSanitizer + UBSan
#   make bench      benchmarks (SF=0.1 by default: make bench SF=1)
#   make format     clang-format the tree

CC      ?= gcc
PKGS    := sqlite3 liburing libnvme libxxhash
DEBS    := build-essential pkg-config sqlite3 libsqlite3-dev liburing-dev libnvme-dev \
           libjson-c-dev libssl-dev libxxhash-dev python3 gnuplot-nox clang libclang-rt-14-dev \
           libfuzzer-14-dev qemu-system-x86 xz-utils zlib1g-dev libdpdk-dev
BUILD   ?= build
OPT     ?= -O2
# GCC's -O2 vectorizes only loops that need no runtime checks ("very cheap");
# the executor's loops over vectors of values need more (runtime alias and
# trip-count checks). Probed, so that a compiler without the flag still builds.
VECT    := $(shell $(CC) -fvect-cost-model=dynamic -Werror -x c -c /dev/null -o /dev/null 2>/dev/null \
             && echo -fvect-cost-model=dynamic)
CFLAGS  += $(OPT) $(VECT) -g -std=gnu11 -fPIC -Wall -Wextra -Werror -D_GNU_SOURCE -I. \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lrte_bpf -lrte_eal -lpthread -lm
# DPDK's BPF library (device/engine/bpf_rt.c, the one file that includes it):
# its headers as system headers (they are not -Wextra clean), its config first
DPDK_CFLAGS := $(patsubst -I%,-isystem %,$(filter -I%dpdk,$(shell pkg-config --cflags libdpdk 2>/dev/null))) \
               -include rte_config.h
SF      ?= 0.1

# Library sources: every .c of the layers, except programs (*_main.c);
# device/ keeps its files in rooms, one folder each (device/link/, ...).
LIB_SRC := $(filter-out %_main.c,$(wildcard ext/*.c vtab/*.c planner/*.c device/*.c device/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
# headers the library is built from; bench/ and tests/ headers only rebuild their own programs
HDRS    := $(wildcard ext/*.h vtab/*.h planner/*.h device/*.h device/*/*.h csq.h)
TEST_HDRS := $(wildcard tests/unit/*.h)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(filter-out %_main.c,$(wildcard bench/*.c))
BENCH_MAINS := $(wildcard bench/*_main.c)
BENCH_BIN := $(BENCH_MAINS:bench/%_main.c=$(BUILD)/bench/%)

SHELL_MAIN := $(wildcard ext/*_main.c)

.PHONY: all deps demo test sanitize bench format clean bpf-examples
all: $(BUILD)/csq.so $(BUILD)/libcsq.a $(if $(SHELL_MAIN),$(BUILD)/csq) $(BUILD)/csq-target

# header dependencies as the compiler finds them (-MMD), not every header
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<
-include $(LIB_OBJ:.o=.d)
$(BUILD)/obj/device/engine/bpf_rt.o: CFLAGS += $(DPDK_CFLAGS)

$(BUILD)/libcsq.a: $(LIB_OBJ)
	@rm -f $@; ar rcs $@ $^

# -z defs: a symbol missing from the extension is a link error, not a load error
$(BUILD)/csq.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-z,defs -o $@ $^ $(LDFLAGS) $(LDLIBS)

# the shell loads csq.so from beside itself, like any SQLite program would;
# of csq's own code it compiles only what a header holds (vtab/module_name.h)
$(BUILD)/csq: $(SHELL_MAIN) vtab/module_name.h $(BUILD)/csq.so
	$(CC) $(CFLAGS) -o $@ $(SHELL_MAIN) $(LDFLAGS) -lsqlite3

# the NVMe/TCP target daemon (device/target/)
$(BUILD)/csq-target: device/target/target_main.c $(BUILD)/libcsq.a $(HDRS)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libcsq.a $(LDFLAGS) $(LDLIBS)

# every unit test links what the tests share (tests/unit/helpers.c)
TEST_HELPERS := $(BUILD)/obj/tests/unit/helpers.o
-include $(TEST_HELPERS:.o=.d)
# only a pattern rule names it: without this make would delete it as intermediate
.SECONDARY: $(TEST_HELPERS)

$(BUILD)/tests/%: tests/unit/%.c $(TEST_HELPERS) $(BUILD)/libcsq.a $(HDRS) $(TEST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(TEST_HELPERS) $(BUILD)/libcsq.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%_main.c $(BENCH_SRC) $(wildcard bench/*.h) $(BUILD)/libcsq.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BENCH_SRC) $(BUILD)/libcsq.a $(LDFLAGS) $(LDLIBS)

deps:
	@sh tests/deps.sh $(DEBS)

demo: deps
	@$(MAKE) --no-print-directory all bench-bin
	@sh bench/demo.sh $(BUILD)

bench-bin: $(BENCH_BIN)

test: deps
	@$(MAKE) --no-print-directory all $(UNIT_BIN) $(BUILD)/tests/tcp_vm_guest $(BUILD)/tests/tcp_plain_host bench-bin bpf-examples
	@BUILD=$(BUILD) sh tests/run.sh

sanitize: deps
	@$(MAKE) --no-print-directory build/libcsq.a
	@$(MAKE) --no-print-directory BUILD=build-san OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	  LDFLAGS="-fsanitize=address,undefined" all test-bins-san
	@BUILD=build-san SANITIZE=1 sh tests/run.sh

test-bins-san: $(UNIT_BIN) $(BUILD)/tests/tcp_vm_guest $(BUILD)/tests/tcp_plain_host bench-bin bpf-examples

# the eBPF examples (examples/bpf/), compiled as a user would; test_bpf.py loads them
BPF_EX := $(patsubst examples/bpf/%.c,$(BUILD)/bpf/%.o,$(wildcard examples/bpf/*.c))
$(BUILD)/bpf/%.o: examples/bpf/%.c ext/csq_bpf.h
	@mkdir -p $(dir $@)
	clang -target bpf -O2 -I ext -c -o $@ $<
bpf-examples: $(BPF_EX)

bench: deps
	@$(MAKE) --no-print-directory all bench-bin
	@sh bench/run.sh $(BUILD) $(SF)

format:
	clang-format -i $(wildcard */*.c */*.h device/*/*.c device/*/*.h tests/*/*.c tests/*/*.h)

clean:
	rm -rf build build-san

# test_gen compiles the generator sources in directly
$(BUILD)/tests/test_gen: $(BENCH_SRC) $(wildcard bench/*.h)

# DPDK's BPF library and what it needs, for a static program (the eBPF runtime
# is in libcsq.a)
DPDK_STATIC := -Wl,--start-group -lrte_bpf -lrte_eal -lrte_kvargs -lrte_telemetry -lrte_mbuf \
               -lrte_mempool -lrte_ring -Wl,--end-group -lnuma -lbsd -lmd

# The nvme backend's VM test runs a static guest program inside QEMU
# (always from the plain build/libcsq.a: a static program cannot carry the sanitizers)
$(BUILD)/tests/nvme_vm_guest: tests/unit/nvme_vm_guest_main.c tests/unit/helpers.c build/libcsq.a $(HDRS) $(TEST_HDRS)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I. $(shell pkg-config --cflags libnvme) \
	  -static -o $@ $< tests/unit/helpers.c build/libcsq.a \
	  $(shell pkg-config --static --libs libnvme liburing libxxhash sqlite3) $(DPDK_STATIC) -lpthread -lm 2>&1 \
	  | grep -v 'statically linked applications requires at runtime' | grep -v 'in statically linked' ; test -x $@
$(BUILD)/tests/test_nvme_vm: $(BUILD)/tests/nvme_vm_guest

# tests/sql/test_tcp_vm.py runs this one on the host, against the guest's nvmet-tcp
$(BUILD)/tests/tcp_plain_host: tests/unit/tcp_plain_host_main.c $(BUILD)/libcsq.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libcsq.a $(LDFLAGS) $(LDLIBS)

# tests/sql/test_tcp_vm.py runs this static program in a guest whose kernel
# reaches csq-target over nvme-tcp: SQLite and csq whole, from build/libcsq.a
$(BUILD)/tests/tcp_vm_guest: tests/unit/tcp_vm_guest_main.c build/libcsq.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -I. $(shell pkg-config --cflags libnvme) \
	  -static -o $@ $< build/libcsq.a \
	  $(shell pkg-config --static --libs libnvme liburing libxxhash sqlite3) $(DPDK_STATIC) -lpthread -lm 2>&1 \
	  | grep -v 'statically linked applications requires at runtime' | grep -v 'in statically linked' ; test -x $@

# libFuzzer harnesses: make fuzz [FUZZ_SECONDS=30]
include tests/fuzz/fuzz.mk
