#ifndef STRATA_FUZZ_SHIM_H
#define STRATA_FUZZ_SHIM_H
#include <stddef.h>
#include <stdint.h>

/// What libFuzzer calls with each input.
typedef int (*StrataFuzzCallback)(const uint8_t *data, size_t size);

/// Whether libFuzzer's driver is linked in (`scripts/fuzz.sh` links it; a plain build does not, and
/// `strata-fuzz` then only replays the files it is given).
int strata_fuzz_has_driver(void);

/// Runs libFuzzer's driver (`LLVMFuzzerRunDriver`) with the command line; -1 when it is not linked.
int strata_fuzz_run_driver(int *argc, char ***argv, StrataFuzzCallback callback);

#endif
