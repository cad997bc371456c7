import Foundation
import Strata
import StrataQueries

/// `SoakQueries [LOADS] [KEYS]`: a `QueryClient` through LOADS loads (a million by default) over KEYS
/// keys (1,000), on the real clock, with everything a long-lived app does to it: observers that come
/// and go, invalidations and refetches, the network going away and back, the app coming to the
/// foreground, queries dropped (a 1 ms `dropAfter`) and woken again, queries removed and made anew.
/// Prints `loads,seconds,rss_kib,queries` every LOADS/50 loads, to standard output, for
/// Benchmarks/soak/soak.sh, which fails when the resident memory grows past its budget after warm-up.
@main
enum SoakQueries {
    struct Counter: Loader {
        let loads: LoadCounter
        let value: Int

        func load(_ input: Void) async throws -> Int {
            loads.increment()
            return value &+ loads.count % 7
        }
    }

    /// How many loads ran (a lock: the soak does not measure its own contention).
    final class LoadCounter: Sendable {
        private let lock = NSLock()
        nonisolated(unsafe) private var value = 0

        func increment() { lock.withLock { value += 1 } }
        var count: Int { lock.withLock { value } }
    }

    static func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return -1 }
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    static func main() async throws {
        let arguments = CommandLine.arguments.dropFirst()
        let target = arguments.first.flatMap { Int($0) } ?? 1_000_000
        let keyCount = arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000
        let loads = LoadCounter()
        let queries = QueryClient()
        let policy = QueryPolicy(staleAfter: .milliseconds(50), refetchOnForeground: true, foregroundThrottle: .zero, dropAfter: .milliseconds(1))
        let start = ContinuousClock.now
        var random = SystemRandomNumberGenerator()
        let step = max(1, target / 50)
        var nextReport = 0
        var operations = 0
        print("loads,seconds,rss_kib,queries")
        while loads.count < target {
            let index = Int.random(in: 0..<keyCount, using: &random)
            let key: QueryKey = ["soak", .number(index)]
            let query = queries.query(key, policy: policy, chain: Counter(loads: loads, value: index))
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<40:
                // An observer that comes, sees a value, and goes.
                var iterator = query.snapshots().makeAsyncIterator()
                _ = await iterator.next()
            case 40..<70:
                query.refetch()
            case 70..<85:
                query.invalidate()
            case 85..<90:
                queries.invalidate(prefix: ["soak"])
            case 90..<93:
                queries.setOnline(false)
                queries.setOnline(true)
            case 93..<96:
                queries.enteredForeground()
            default:
                _ = queries.remove(key)
            }
            try await query.settled()
            operations += 1
            if loads.count >= nextReport {
                let seconds = start.duration(to: .now) / .seconds(1)
                print("\(loads.count),\(String(format: "%.1f", seconds)),\(residentKiB()),\(queries.keys.count)")
                nextReport += step
            }
        }
        let seconds = start.duration(to: .now) / .seconds(1)
        print("\(loads.count),\(String(format: "%.1f", seconds)),\(residentKiB()),\(queries.keys.count)")
        FileHandle.standardError.write(Data("SoakQueries: \(loads.count) loads, \(operations) operations in \(String(format: "%.0f", seconds)) s\n".utf8))
    }
}
