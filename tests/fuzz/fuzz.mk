# tests/fuzz/fuzz.mk - libFuzzer harnesses (tests/fuzz/fuzz_*.c), built with
# clang -fsanitize=fuzzer,address,undefined against the device/ sources.
# Included by the top-level Makefile, or used alone from the repository root:
#
#   make -f tests/fuzz/fuzz.mk fuzz [FUZZ_SECONDS=30]   build, replay the
#        regression inputs, then fuzz each harness for FUZZ_SECONDS seconds
#        starting from its seed corpus; fails if any harness crashes
#   make -f tests/fuzz/fuzz.mk fuzz-regress   only replay tests/fuzz/regress/<name>/*
#   make -f tests/fuzz/fuzz.mk fuzz-seeds     rewrite the seed corpora that come
#        from the library's own encoders (chunk, prog, devcmd)
#
# A crash leaves its input in $(FUZZ_BUILD)/crashes/<name>-crash-*: copy it to
# tests/fuzz/regress/<name>/ so that it is replayed from then on.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_BUILD   ?= build-fuzz
FUZZ_PKGS    := liburing libnvme libxxhash
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := -O1 -g -std=gnu11 -D_GNU_SOURCE -I. -fno-omit-frame-pointer $(FUZZ_SAN) \
                $(shell pkg-config --cflags $(FUZZ_PKGS) 2>/dev/null)
FUZZ_LDLIBS  := $(shell pkg-config --libs $(FUZZ_PKGS) 2>/dev/null) -lrte_bpf -lrte_eal -lpthread -lm
# the harnesses need only the device layer and the planner's parser (no SQLite)
FUZZ_LIB_SRC := $(filter-out %_main.c,$(wildcard device/*.c device/*/*.c)) planner/parse.c
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)
# libFuzzer: bounded run, per-input timeout, exact artifact names
FUZZ_FLAGS   ?= -timeout=20 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
FUZZ_ENV     := ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: fuzz fuzz-build fuzz-regress fuzz-seeds

fuzz-build: $(FUZZ_BINS)

# DPDK's BPF library headers, for the one file that includes them
$(FUZZ_BUILD)/obj/device/engine/bpf_rt.o: FUZZ_CFLAGS += \
  $(patsubst -I%,-isystem %,$(filter -I%dpdk,$(shell pkg-config --cflags libdpdk 2>/dev/null))) -include rte_config.h

$(FUZZ_BUILD)/obj/%.o: %.c $(wildcard device/*.h device/*/*.h planner/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJ) $(FUZZ_LDLIBS)

# Replay every saved crash input: each must now pass.
fuzz-regress: $(FUZZ_BINS)
	@fail=0; for n in $(FUZZ_NAMES); do \
	  d=tests/fuzz/regress/$$n; [ -d $$d ] || continue; \
	  files=$$(find $$d -type f | sort); [ -n "$$files" ] || continue; \
	  if $(FUZZ_ENV) $(FUZZ_BUILD)/fuzz_$$n -runs=0 $$files > $(FUZZ_BUILD)/regress-$$n.log 2>&1; \
	  then echo "PASS fuzz-regress $$n ($$(echo $$files | wc -w) inputs)"; \
	  else echo "FAIL fuzz-regress $$n: see $(FUZZ_BUILD)/regress-$$n.log"; tail -n 30 $(FUZZ_BUILD)/regress-$$n.log; fail=1; fi; \
	done; exit $$fail

# Fuzz each harness for FUZZ_SECONDS, from a working copy of its seed corpus
# (new interesting inputs stay in $(FUZZ_BUILD)/corpus, not in the tree).
fuzz: fuzz-regress
	@mkdir -p $(FUZZ_BUILD)/crashes
	@fail=0; for n in $(FUZZ_NAMES); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$n; cp -n tests/fuzz/corpus/$$n/* $(FUZZ_BUILD)/corpus/$$n/ 2>/dev/null; \
	  echo "fuzz $$n for $(FUZZ_SECONDS) s"; \
	  if $(FUZZ_ENV) $(FUZZ_BUILD)/fuzz_$$n $(FUZZ_FLAGS) -max_total_time=$(FUZZ_SECONDS) \
	       -artifact_prefix=$(FUZZ_BUILD)/crashes/$$n- $(FUZZ_BUILD)/corpus/$$n > $(FUZZ_BUILD)/fuzz-$$n.log 2>&1; \
	  then echo "PASS fuzz $$n: $$(grep -E 'stat::number_of_executed_units' $(FUZZ_BUILD)/fuzz-$$n.log | sed 's/.*: *//') runs, corpus $$(ls $(FUZZ_BUILD)/corpus/$$n | wc -l)"; \
	  else echo "FAIL fuzz $$n: crash input in $(FUZZ_BUILD)/crashes/ (copy it to tests/fuzz/regress/$$n/); log $(FUZZ_BUILD)/fuzz-$$n.log"; \
	       grep -E -A 12 'ERROR|runtime error|deadly signal|timeout' $(FUZZ_BUILD)/fuzz-$$n.log | head -40; fail=1; fi; \
	done; exit $$fail

$(FUZZ_BUILD)/gen_seeds: tests/fuzz/gen_seeds.c $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_LIB_OBJ) $(FUZZ_LDLIBS)

fuzz-seeds: $(FUZZ_BUILD)/gen_seeds
	@mkdir -p tests/fuzz/corpus/chunk tests/fuzz/corpus/prog tests/fuzz/corpus/devcmd
	$(FUZZ_BUILD)/gen_seeds tests/fuzz/corpus
