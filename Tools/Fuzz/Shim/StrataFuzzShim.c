#include "StrataFuzzShim.h"

// A weak reference: resolved when libclang_rt.fuzzer_no_main is linked whole (the fuzz build), null
// otherwise, so one executable serves both as the fuzzer and as the replayer of a corpus.
extern int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t))
    __attribute__((weak));

int strata_fuzz_has_driver(void) { return LLVMFuzzerRunDriver != 0; }

int strata_fuzz_run_driver(int *argc, char ***argv, StrataFuzzCallback callback) {
    if (LLVMFuzzerRunDriver == 0) return -1;
    return LLVMFuzzerRunDriver(argc, argv, callback);
}
