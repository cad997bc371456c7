import Foundation
import Logging
@_spi(StrataInternals) import Strata

/// One coverage-guided fuzz target: a parser of bytes from outside, and the properties its answers
/// must have (not only "no crash": a round trip gives back what was encoded, a parse is idempotent, a
/// redacted string holds no secret).
///
/// `strata-fuzz NAME` runs it under libFuzzer; `strata-fuzz NAME FILE…` (or a build without libFuzzer)
/// replays inputs, as `StrataFuzzTargetsTests` does with every committed corpus.
public struct FuzzTarget: Sendable {
    /// The name on the command line, and the folder of its corpus (`Tools/Fuzz/Corpus/NAME`).
    public let name: String
    /// What it feeds, and what it checks.
    public let summary: String
    /// Sets up what the target needs for the whole run (a server, a folder) and returns what runs one
    /// input. Called once per process.
    let start: @Sendable () async throws -> FuzzRunner
    /// Inputs worth starting from (`strata-fuzz TARGET --write-seeds FOLDER` writes them; the corpus
    /// committed under `Tools/Fuzz/Corpus` began with them).
    public let seeds: @Sendable () -> [(name: String, bytes: [UInt8])]

    init(
        name: String, seeds: @escaping @Sendable () -> [(name: String, bytes: [UInt8])] = { [] }, summary: String,
        start: @escaping @Sendable () async throws -> FuzzRunner
    ) {
        self.name = name
        self.summary = summary
        self.seeds = seeds
        self.start = start
    }

    /// A target that needs no setup.
    init(
        name: String, seeds: @escaping @Sendable () -> [(name: String, bytes: [UInt8])] = { [] }, summary: String,
        run: @escaping @Sendable ([UInt8]) throws(PropertyViolation) -> Void
    ) {
        self.init(name: name, seeds: seeds, summary: summary) { FuzzRunner(run: run) }
    }

    /// Starts what the target needs; `stop()` the runner when done.
    public func makeRunner() async throws -> FuzzRunner { try await start() }
}

/// What runs one input of a started ``FuzzTarget``.
public struct FuzzRunner: Sendable {
    /// Runs one input; throws when an answer breaks a property of the parser.
    public let run: @Sendable ([UInt8]) throws(PropertyViolation) -> Void
    /// Stops what the target started.
    public let stop: @Sendable () async -> Void

    init(run: @escaping @Sendable ([UInt8]) throws(PropertyViolation) -> Void, stop: @escaping @Sendable () async -> Void = {}) {
        self.run = run
        self.stop = stop
    }
}

/// A parser's answer broke one of its properties: the fuzzer stops on it and keeps the input.
public struct PropertyViolation: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Fails with `message` unless `condition` holds.
func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(PropertyViolation) {
    if !condition { throw PropertyViolation(message()) }
}

/// Every fuzz target, by name.
public enum FuzzTargets {
    public static let all: [FuzzTarget] = HeaderTargets.all + StorageTargets.all + ArgumentTargets.all + ServerTargets.all

    public static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }
}

/// Structure-aware reading of a fuzz input: the first bytes choose shapes and sizes, the rest is
/// content. Reading past the end gives zeros and empty strings, so every input is a valid program.
struct FuzzReader {
    private let bytes: [UInt8]
    private var position = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { position >= bytes.count }

    mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func bool() -> Bool { byte() & 1 == 1 }

    /// A number in `range`, from one or two bytes.
    mutating func int(in range: ClosedRange<Int>) -> Int {
        let span = range.upperBound - range.lowerBound + 1
        let raw = span > 256 ? Int(byte()) << 8 | Int(byte()) : Int(byte())
        return range.lowerBound + raw % span
    }

    mutating func uint64() -> UInt64 {
        (0..<8).reduce(0) { value, _ in value << 8 | UInt64(byte()) }
    }

    /// Up to `maxCount` bytes: a length byte, then that many bytes (fewer at the end of the input).
    mutating func bytes(maxCount: Int) -> [UInt8] {
        let count = min(int(in: 0...maxCount), bytes.count - min(position, bytes.count))
        defer { position += count }
        return Array(bytes[position..<position + count])
    }

    /// A string of up to `maxCount` bytes, decoded as UTF-8 (invalid bytes repaired).
    mutating func string(maxCount: Int) -> String {
        String(decoding: bytes(maxCount: maxCount), as: UTF8.self)
    }

    /// One of `choices`.
    mutating func pick<Element>(_ choices: [Element]) -> Element {
        choices[int(in: 0...choices.count - 1)]
    }

    /// What is left of the input.
    mutating func rest() -> [UInt8] {
        defer { position = bytes.count }
        return position < bytes.count ? Array(bytes[position...]) : []
    }
}

/// Runs `body` to its end from synchronous code (libFuzzer calls each input synchronously).
func blocking<Result: Sendable>(_ body: @escaping @Sendable () async -> Result) -> Result {
    let done = DispatchSemaphore(value: 0)
    let box = Locked<Result?>(nil)
    Task {
        let result = await body()
        box.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return box.withLock { $0 }!
}

extension Logger {
    /// A logger that drops everything: a fuzz run reports through its properties, not its logs.
    static var quiet: Logger { Logger(label: "strata-fuzz", factory: { _ in SwiftLogNoOpLogHandler() }) }
}
