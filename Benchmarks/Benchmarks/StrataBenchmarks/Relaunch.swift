import Benchmark
import BenchmarkFixtures
import Foundation
import Strata
import StrataTesting
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A new process serving the cached 1,000-item feed through a FileStore chain (`RelaunchStrata`) against
/// a new process that reads and decodes the same JSON (`RelaunchBaseline`). Whole-process wall time:
/// `posix_spawn` to `waitpid`, including the dynamic loader, Foundation's start-up and exit.
///
/// Both programs are executables of this package, built by `Benchmarks/compare` into the directory that
/// holds this benchmark (set `STRATA_BENCH_BIN` to look elsewhere). `Relaunch.strata` is the app as it
/// builds with Strata's default traits (URLSession on); `Relaunch.strata.nourlsession` the same program
/// built without the URLSession trait (a Linux server on AsyncHTTPClient), found in
/// `STRATA_BENCH_BIN_NOURLSESSION` (the row is skipped when that is not set). Each run must exit 0: the
/// program checks it served 1,000 articles.
func registerRelaunchBenchmarks() {
    let feed = BenchmarkFeed.make()
    let directory = Prepared<TemporaryDirectory>()
    let setup: Benchmark.BenchmarkSetupHook = {
        let temporary = try TemporaryDirectory(prefix: "strata-bench-relaunch")
        directory.set(temporary)
        try await FileStore<[Article]>(directory: temporary.appending("cache"))
            .insert(feed, for: Scenarios.feedKey, storedAt: Date())
        try JSONCodec<[Article]>().encode(feed).write(to: temporary.appending("feed.json"), options: .atomic)
    }
    let teardown: Benchmark.BenchmarkTeardownHook = { directory.value.remove() }
    // Mallocs are counted in this process only (the spawn), not in the children: compare does not show them.
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .throughput], maxDuration: .seconds(3), maxIterations: 200, setup: setup, teardown: teardown)

    Benchmark("Relaunch.strata", configuration: configuration) { _ in
        runToCompletion(helper("RelaunchStrata"), directory.value.appending("cache").path)
    }
    if let other = ProcessInfo.processInfo.environment["STRATA_BENCH_BIN_NOURLSESSION"] {
        Benchmark("Relaunch.strata.nourlsession", configuration: configuration) { _ in
            runToCompletion((other as NSString).appendingPathComponent("RelaunchStrata"), directory.value.appending("cache").path)
        }
    }
    Benchmark("Relaunch.baseline", configuration: configuration) { _ in
        runToCompletion(helper("RelaunchBaseline"), directory.value.appending("feed.json").path)
    }
}

/// The path of the helper executable `name`.
private func helper(_ name: String) -> String {
    let directory = ProcessInfo.processInfo.environment["STRATA_BENCH_BIN"]
        ?? Bundle.main.executableURL!.deletingLastPathComponent().path
    let path = directory + "/" + name
    guard FileManager.default.isExecutableFile(atPath: path) else {
        fatalError("\(path) is missing: build it with `swift build -c release --product \(name)` in Benchmarks/ (Benchmarks/compare does)")
    }
    return path
}

/// Spawns `path` with `argument` and waits for it; any exit status other than 0 stops the run.
private func runToCompletion(_ path: String, _ argument: String) {
    var argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), strdup(argument), nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, path, nil, nil, &argv, environ)
    guard spawned == 0 else { fatalError("posix_spawn \(path): \(String(cString: strerror(spawned)))") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 {
        guard errno == EINTR else { fatalError("waitpid \(path): \(String(cString: strerror(errno)))") }
    }
    guard status == 0 else { fatalError("\(path) \(argument) exited with status \(status)") }
}
