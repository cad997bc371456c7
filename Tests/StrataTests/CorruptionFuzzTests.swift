import Foundation
import Logging
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

/// Feeds the whole decoding path of ``FileStore`` — file read, ``EntryEnvelope`` parse, codec decode,
/// removal and report — arbitrary bytes: 10,000 seeded inputs per codec. Whatever the bytes, retrieve
/// never throws or crashes; a valid entry reads back exactly; anything else is a miss that removes the
/// file with a warning (or, for another key's intact entry, a miss that leaves it alone).
///
/// `STRATA_FUZZ_SEED` replays a run; every failure names the seed and the input's number.
@Suite("Corruption fuzz")
struct CorruptionFuzzTests {
    static let seed: UInt64 = ProcessInfo.processInfo.environment["STRATA_FUZZ_SEED"].flatMap { UInt64($0) } ?? 0xC0FF_EE11
    static let inputs = 10_000

    enum CodecKind: String, CaseIterable, Sendable {
        case json, binary

        var codec: any Codec<[Item]> {
            switch self {
            case .json: JSONCodec<[Item]>()
            case .binary: BinaryCodec<[Item]>()
            }
        }
    }

    /// How one input is made.
    enum Shape: CaseIterable {
        /// Uniformly random bytes, 0–512 of them.
        case randomBytes
        /// "STRA" and a version byte, then random bytes.
        case magicThenRandom
        /// A valid entry, untouched: must read back exactly.
        case validEntry
        /// A valid entry with 1–4 bytes overwritten.
        case flippedBytes
        /// A valid entry cut short or extended.
        case resized
        /// A valid envelope around a damaged or random payload.
        case damagedPayload
        /// A valid entry written under another key.
        case otherKey
    }

    struct Input {
        var bytes: Data
        var shape: Shape
        /// The entry the bytes were made from, when they were made from one.
        var source: CacheEntry<[Item]>?
    }

    static func makeInput(_ generator: inout SplitMix64, codec: any Codec<[Item]>) throws -> Input {
        func randomBytes(_ range: ClosedRange<Int>) -> Data {
            Data((0..<Int.random(in: range, using: &generator)).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
        }
        let items = (0..<Int.random(in: 0...6, using: &generator)).map { index in
            Item(id: Int(truncatingIfNeeded: generator.next()), name: String(repeating: "é✓x", count: index))
        }
        let entry = CacheEntry(
            value: items, storedAt: Date(timeIntervalSinceReferenceDate: Double(Int.random(in: -1_000_000_000...1_000_000_000, using: &generator))),
            validators: CacheValidators(
                etag: Bool.random(using: &generator) ? "\"\(generator.next())\"" : nil,
                lastModified: Bool.random(using: &generator) ? "Thu, 01 Jan 2026 00:00:00 GMT" : nil,
                maxAge: Bool.random(using: &generator) ? .seconds(Int.random(in: 0...86_400, using: &generator)) : nil))
        let valid = try EntryEnvelope.encode(entry, key: "feed", codec: codec, store: "fuzz")
        let shape = Shape.allCases.randomElement(using: &generator)!
        switch shape {
        case .randomBytes:
            return Input(bytes: randomBytes(0...512), shape: shape)
        case .magicThenRandom:
            return Input(bytes: Data("STRA".utf8) + Data([UInt8.random(in: 0...3, using: &generator)]) + randomBytes(0...256), shape: shape)
        case .validEntry:
            return Input(bytes: valid, shape: shape, source: entry)
        case .flippedBytes:
            var bytes = valid
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8(truncatingIfNeeded: generator.next())
            }
            return Input(bytes: bytes, shape: shape, source: entry)
        case .resized:
            let bytes = Bool.random(using: &generator)
                ? valid.prefix(Int.random(in: 0..<valid.count, using: &generator))
                : valid + randomBytes(1...16)
            return Input(bytes: Data(bytes), shape: shape, source: entry)
        case .damagedPayload:
            var payload = try codec.encode(items)
            if payload.isEmpty || Bool.random(using: &generator) {
                payload = randomBytes(0...128)
            } else {
                payload[Int.random(in: 0..<payload.count, using: &generator)] = UInt8(truncatingIfNeeded: generator.next())
                if Bool.random(using: &generator) { payload = payload.prefix(Int.random(in: 0...payload.count, using: &generator)) }
            }
            let bytes = EntryEnvelope.encode(key: "feed", storedAt: entry.storedAt, validators: entry.validators, payload: payload)
            return Input(bytes: bytes, shape: shape)
        case .otherKey:
            return Input(bytes: try EntryEnvelope.encode(entry, key: "feed-other", codec: codec, store: "fuzz"), shape: shape, source: entry)
        }
    }

    @Test(arguments: CodecKind.allCases)
    func arbitraryBytesInAnEntryFileAreAValidEntryOrAReportedMissNeverACrash(_ kind: CodecKind) async throws {
        let directory = try TemporaryDirectory(prefix: "strata-fuzz")
        let logs = LogCapture(level: .warning)
        let codec = kind.codec
        let store = FileStore<[Item]>(directory: directory.url, codec: codec, synchronizesWrites: false, logger: logs.logger)
        let file = store.fileURL(for: "feed")
        var generator = SplitMix64(seed: Self.seed ^ (kind == .json ? 0 : 0xB1_4A27))
        var outcomes: [String: Int] = [:]

        for number in 0..<Self.inputs {
            let input = try Self.makeInput(&generator, codec: codec)
            let context: Comment = "seed \(Self.seed), \(kind) input \(number) (\(input.shape)): \(input.bytes.prefix(48).map { String(format: "%02x", $0) }.joined())"
            // Unflushed, and off the cooperative pool: `Data.write` fsyncs, 20,000 times a run.
            try await BlockingIOPool.shared.run {
                try POSIXFile.writeAtomically(input.bytes, to: file.path, via: file.path + ".fuzz", mode: 0o600, sync: false)
            }
            logs.removeAll()

            let result: CacheEntry<[Item]>?
            do {
                result = try await store.retrieve("feed")
            } catch {
                Issue.record("retrieve threw \(error); \(context)")
                continue
            }

            // What the bytes are, judged independently of the store's code path.
            let parsed = EntryEnvelope.decode(input.bytes)
            let decoded = parsed.flatMap { try? codec.decode($0.payload) }
            let stillThere = FileManager.default.fileExists(atPath: file.path)
            let warned = logs.entries.contains { $0.level == .warning && $0.metadata["key"] == "feed" && $0.metadata["store"] == "\(store.description)" }
            if input.shape == .validEntry {
                #expect(result == input.source, context)
            }
            if let parsed, parsed.header.key != "feed" {
                #expect(result == nil && stillThere && !warned, context)
                outcomes["another key's entry, kept", default: 0] += 1
            } else if let parsed, let decoded {
                #expect(result == CacheEntry(value: decoded, storedAt: parsed.header.storedAt, validators: parsed.header.validators), context)
                #expect(stillThere && !warned, context)
                outcomes["read", default: 0] += 1
            } else {
                #expect(result == nil && !stillThere && warned, context)
                outcomes["miss, removed and reported", default: 0] += 1
            }
        }
        // The run reached every outcome, so none of the branches above is dead.
        #expect(outcomes.count == 3, "\(outcomes)")
    }

    /// The codecs on their own, on arbitrary bytes: they throw, they never crash or hang.
    @Test(arguments: CodecKind.allCases)
    func codecsThrowOnArbitraryBytes(_ kind: CodecKind) throws {
        var generator = SplitMix64(seed: Self.seed &+ 1)
        let codec = kind.codec
        let valid = try codec.encode([Item(id: 1, name: "a"), Item(id: 2, name: "bé")])
        var decodedCount = 0
        for _ in 0..<Self.inputs {
            var bytes = valid
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8(truncatingIfNeeded: generator.next())
            }
            if Bool.random(using: &generator) { bytes = bytes.prefix(Int.random(in: 0...bytes.count, using: &generator)) }
            if (try? codec.decode(bytes)) != nil { decodedCount += 1 }
        }
        // Some damage still decodes (a changed letter in a name); most does not.
        #expect(decodedCount < Self.inputs / 2, "seed \(Self.seed): \(decodedCount) damaged inputs decoded")
    }
}
