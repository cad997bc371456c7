import Foundation
@_spi(StrataInternals) import Strata

/// A concurrency stress test for any store: many tasks interleave inserts, retrieves, deletes and
/// refreshes on a few keys at once, through one or several instances of the store, and every read is
/// checked against everything written.
///
/// It checks that
/// - every read returns `nil` or a value that was written for that key, whole (a self-checking value
///   whose key, writer, step and body agree), with the `storedAt` and validators of one write or
///   refresh of that key — never a mix of two writes;
/// - no operation fails;
/// - afterwards every key takes a final write that every instance reads back, and a store with a
///   count limit holds no more entries than the limit.
///
/// It works on any store, whatever its key and value types: the stress writes self-checking
/// ``Value``s, and for a store of other types you say how a stress key and value map onto the store's
/// (`key:`, `value:`, `unwrap:`).
///
/// ```swift
/// let store = FileStore<StoreStress.Value>(directory: directory)
/// let report = try await StoreStress(tasks: 24, steps: 60).run(on: [store, FileStore(directory: directory)])
///
/// // A store of `Data` under `Int` keys:
/// let stress = StoreStress()
/// try await stress.run(
///     on: [myBlobStore], key: { stress.keys.firstIndex(of: $0)! },
///     value: { try! JSONEncoder().encode($0) }, unwrap: { try? JSONDecoder().decode(StoreStress.Value.self, from: $0) })
/// ```
public struct StoreStress: Sendable {
    /// A self-checking value: its checksum covers its key, writer, step and body.
    public struct Value: Codable, Hashable, Sendable {
        /// The key the value was written for.
        public var key: String
        /// The task that wrote it (`-1` for the final writes after the run).
        public var writer: Int
        /// The writer's step that wrote it.
        public var step: Int
        /// Filler derived from the writer and step: short, or ``StoreStress/largeValueSize`` long.
        public var body: String
        /// FNV-1a over the other fields.
        public var checksum: UInt64

        /// The value `writer` writes for `key` at `step`, with a body of `size` characters.
        public init(key: String, writer: Int, step: Int, size: Int) {
            self.key = key
            self.writer = writer
            self.step = step
            let letters = Array("abcdefghijklmnopqrstuvwxyzé✓")
            body = String((0..<size).map { index in
                let mixed = (index &* 31 &+ writer &* 7 &+ step) % letters.count
                return letters[mixed < 0 ? mixed + letters.count : mixed]
            })
            checksum = Self.checksum(key: key, writer: writer, step: step, body: body)
        }

        /// Whether the checksum matches the fields.
        public var isIntact: Bool {
            checksum == Self.checksum(key: key, writer: writer, step: step, body: body)
        }

        static func checksum(key: String, writer: Int, step: Int, body: String) -> UInt64 {
            var hash: UInt64 = 0xCBF2_9CE4_8422_2325
            for byte in "\(key)|\(writer)|\(step)|\(body)".utf8 {
                hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            }
            return hash
        }
    }

    /// What a run did.
    public struct Report: Sendable, CustomStringConvertible {
        /// Retrieves that found a value.
        public var hits = 0
        /// Retrieves that found nothing.
        public var misses = 0
        /// Inserts made.
        public var inserts = 0
        /// Deletes made.
        public var deletes = 0
        /// Refreshes made (whether or not an entry was there).
        public var refreshes = 0

        public var description: String {
            "\(hits) hits, \(misses) misses, \(inserts) inserts, \(deletes) deletes, \(refreshes) refreshes"
        }
    }

    /// Everything a run found wrong.
    public struct StressError: Error, CustomStringConvertible {
        /// One line per problem: the task, step and key, and what was wrong.
        public var problems: [String]
        public var description: String {
            "\(problems.count) problem(s) under concurrency:\n" + problems.prefix(20).joined(separator: "\n")
        }
    }

    /// How many tasks run at once.
    public var tasks: Int
    /// How many operations each task makes.
    public var steps: Int
    /// The keys the tasks share.
    public var keys: [String]
    /// The size of every eighth value's body (the others are 1–200 characters).
    public var largeValueSize: Int
    /// Seeds the tasks' choices of operation and key.
    public var seed: UInt64

    /// A stress of `tasks` tasks × `steps` operations on `keys`.
    public init(
        tasks: Int = 24, steps: Int = 60, keys: [String] = ["feed", "posts/1", "../../etc/passwd", "ключ 🔑"],
        largeValueSize: Int = 64 * 1024, seed: UInt64 = 7
    ) {
        self.tasks = tasks
        self.steps = steps
        self.keys = keys
        self.largeValueSize = largeValueSize
        self.seed = seed
    }

    /// The `storedAt` of an insert by `writer` at `step`.
    static func insertDate(writer: Int, step: Int) -> Date {
        Date(timeIntervalSinceReferenceDate: 800_000_000 + Double(writer * 100_000 + step))
    }

    /// The `storedAt` of the final writes after the run: later than every insert and refresh.
    static let finalDate = Date(timeIntervalSinceReferenceDate: 990_000_000)

    /// The `storedAt` of a refresh by `writer` at `step`.
    static func refreshDate(writer: Int, step: Int) -> Date {
        Date(timeIntervalSinceReferenceDate: 900_000_000 + Double(writer * 100_000 + step))
    }

    /// Runs the stress with tasks spread over `stores` (instances of one store: two `FileStore`s on one
    /// directory, two `SQLiteStore`s on one file, or one store) that keep ``Value``s under `String` keys.
    /// `count` reads how many entries the store holds, checked against `countLimit` at the end.
    /// - Throws: ``StressError`` listing every problem found.
    @discardableResult
    public func run<S: Store>(
        on stores: [S], countLimit: Int? = nil, count: (@Sendable () async throws -> Int)? = nil
    ) async throws -> Report where S.Key == String, S.Value == Value {
        try await run(on: stores, key: { $0 }, value: { $0 }, unwrap: { $0 }, countLimit: countLimit, count: count)
    }

    /// Runs the stress on a store of any key and value types.
    /// - Parameters:
    ///   - stores: instances of one store.
    ///   - storeKey: the store key for each of ``keys`` (distinct keys must map to distinct store keys).
    ///   - wrap: the store value that carries a stress value.
    ///   - unwrap: the stress value a store value carries, or `nil` when it carries none (reported as
    ///     a problem: the store returned something no write produced).
    ///   - countLimit: the store's count limit, checked with `count` at the end.
    ///   - count: how many entries the store holds (asked at the end, when `countLimit` is given).
    /// - Throws: ``StressError`` listing every problem found.
    @discardableResult
    public func run<S: Store>(
        on stores: [S],
        key storeKey: @escaping @Sendable (String) -> S.Key,
        value wrap: @escaping @Sendable (Value) -> S.Value,
        unwrap: @escaping @Sendable (S.Value) -> Value?,
        countLimit: Int? = nil, count: (@Sendable () async throws -> Int)? = nil
    ) async throws -> Report {
        precondition(!stores.isEmpty, "at least one store")
        precondition(Set(keys.map { "\(storeKey($0))" }).count == keys.count, "distinct keys must map to distinct store keys")
        let written = Locked<[String: Set<Value>]>([:])
        let problems = Locked<[String]>([])
        let report = Locked(Report())
        let keys = keys, steps = steps, largeValueSize = largeValueSize, seed = seed

        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<tasks {
                let store = stores[writer % stores.count]
                group.addTask {
                    var generator = SplitMix64(seed: seed &+ UInt64(writer) &* 0x9E37_79B9)
                    for step in 0..<steps {
                        let key = keys[Int(generator.next() % UInt64(keys.count))]
                        let roll = generator.next() % 100
                        do {
                            switch roll {
                            case 0..<40:
                                let stored = try await store.retrieve(storeKey(key))
                                let entry = stored.map { CacheEntry(value: unwrap($0.value), storedAt: $0.storedAt, validators: $0.validators) }
                                if let problem = Self.problem(with: entry, for: key, written: written) {
                                    problems.withLock { $0.append(problem) }
                                }
                                report.withLock { entry == nil ? ($0.misses += 1) : ($0.hits += 1) }
                            case 40..<70:
                                let size = step % 8 == 0 ? largeValueSize : 1 + Int(generator.next() % 200)
                                let value = Value(key: key, writer: writer, step: step, size: size)
                                written.withLock { _ = $0[key, default: []].insert(value) }
                                try await store.insert(
                                    wrap(value), for: storeKey(key), storedAt: Self.insertDate(writer: writer, step: step),
                                    validators: CacheValidators(etag: "i-\(writer)-\(step)"))
                                report.withLock { $0.inserts += 1 }
                            case 70..<85:
                                try await store.delete(storeKey(key))
                                report.withLock { $0.deletes += 1 }
                            default:
                                _ = try await store.refresh(
                                    storeKey(key), storedAt: Self.refreshDate(writer: writer, step: step),
                                    validators: CacheValidators(etag: "r-\(writer)-\(step)"))
                                report.withLock { $0.refreshes += 1 }
                            }
                        } catch {
                            problems.withLock { $0.append("task \(writer) step \(step) on '\(key)': \(error)") }
                        }
                    }
                }
            }
        }

        // Quiescent: every key takes a final write that every instance reads back.
        do {
            for key in keys {
                let final = Value(key: key, writer: -1, step: 0, size: 16)
                // Stored after every write of the run: a store that keeps the latest store time
                // (`NewestStoreTimeWins`) takes it too.
                try await stores[0].insert(wrap(final), for: storeKey(key), storedAt: Self.finalDate)
                for (index, store) in stores.enumerated() {
                    let read = try await store.retrieve(storeKey(key)).flatMap { unwrap($0.value) }
                    if read != final {
                        problems.withLock { $0.append("after the run, instance \(index) read \(String(describing: read)) for '\(key)' instead of the final write") }
                    }
                }
            }
            if let countLimit, let count {
                let held = try await count()
                if held > countLimit {
                    problems.withLock { $0.append("\(held) entries held with a count limit of \(countLimit)") }
                }
            }
        } catch {
            problems.withLock { $0.append("after the run: \(error)") }
        }

        let found = problems.withLock { $0 }
        guard found.isEmpty else { throw StressError(problems: found) }
        return report.withLock { $0 }
    }

    /// What is wrong with `entry` read for `key`, or `nil` when it is one that was written.
    static func problem(with entry: CacheEntry<Value?>?, for key: String, written: Locked<[String: Set<Value>]>) -> String? {
        guard let entry else { return nil }
        guard let value = entry.value else { return "'\(key)' read a value that carries no stress value" }
        guard value.isIntact else { return "'\(key)' read a damaged value (writer \(value.writer), step \(value.step))" }
        guard value.key == key else { return "'\(key)' read the value of '\(value.key)'" }
        guard written.withLock({ $0[key]?.contains(value) ?? false }) else {
            return "'\(key)' read a value never written (writer \(value.writer), step \(value.step))"
        }
        // The metadata comes from one operation: the value's own insert, or a refresh of this key.
        let tag = entry.validators.etag ?? ""
        let parts = tag.split(separator: "-")
        guard parts.count == 3, let writer = Int(parts[1]), let step = Int(parts[2]) else {
            return "'\(key)' read validators \(entry.validators) that no write set"
        }
        switch parts[0] {
        case "i":
            guard writer == value.writer, step == value.step, entry.storedAt == insertDate(writer: writer, step: step) else {
                return "'\(key)' read a mix: the value of writer \(value.writer) step \(value.step) with the metadata of insert \(tag) at \(entry.storedAt)"
            }
        case "r":
            guard entry.storedAt == refreshDate(writer: writer, step: step) else {
                return "'\(key)' read a mix: refresh \(tag) with storedAt \(entry.storedAt)"
            }
        default:
            return "'\(key)' read validators \(entry.validators) that no write set"
        }
        return nil
    }
}

