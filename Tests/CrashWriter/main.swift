// A helper process for the crash-safety tests: it writes to a store in a loop until it is killed.
// (Filled in by the crash-safety work; see Tests/StrataIntegrationTests/CrashSafetyTests.swift.)
