#if DEBUG  // `@testable` needs a build with testing enabled; the fuzz build is a debug build.
import Foundation
import NIOCore
@_spi(StrataInternals) @testable import Strata
@testable import StrataOutbox
@testable import StrataProxy

/// The parsers of bytes read back from disk or a database, which a crash, a full disk, another
/// program or an attacker with the folder may have written: a corrupt entry is a miss, never a crash.
enum StorageTargets {
    static let all: [FuzzTarget] = [
        FuzzTarget(
            name: "file-envelope", seeds: Seeds.fileEnvelope,
            summary: "FileStore's entry envelope: any bytes decode or are refused; an entry encoded from the input decodes to the same header and payload",
            run: fileEnvelope),
        FuzzTarget(name: "file-index", seeds: Seeds.fileIndex, summary: fileIndexSummary, start: startFileIndex),
        FuzzTarget(
            name: "outbox-entry", seeds: Seeds.outboxEntry,
            summary: "the outbox entry file (FileOutboxStorage), its attempt file and its JSON: a decoded entry encodes and decodes to the same entry",
            run: outboxEntry),
        FuzzTarget(
            name: "binary-codec", seeds: Seeds.binaryCodec,
            summary: "BinaryCodec decoding (past the checksum, and through it): a decoded value encodes and decodes to the same bytes",
            run: binaryCodec),
        FuzzTarget(
            name: "stored-response", seeds: Seeds.storedResponse,
            summary: "the proxy's stored responses (BinaryCodec rows of StoredResponse): a decoded row encodes and decodes to the same bytes",
            run: storedResponse),
    ]

    // MARK: FileStore envelope

    static func fileEnvelope(_ bytes: [UInt8]) throws(PropertyViolation) {
        // Any bytes: decoded or refused; what decodes encodes to bytes that decode to the same.
        if let decoded = EntryEnvelope.decode(Data(bytes)) {
            let again = EntryEnvelope.encode(
                key: decoded.header.key, storedAt: decoded.header.storedAt, validators: decoded.header.validators, payload: decoded.payload)
            guard let twice = EntryEnvelope.decode(again) else { throw PropertyViolation("a decoded envelope does not decode once encoded again") }
            try check(twice.header == decoded.header && twice.payload == decoded.payload, "an envelope changed through encode and decode")
        }
        // An entry built from the input: decodes to exactly what was encoded, and any cut is refused.
        var reader = FuzzReader(bytes)
        let key = reader.string(maxCount: 64)
        let storedAt = Date(timeIntervalSinceReferenceDate: Double(Int32(truncatingIfNeeded: reader.uint64())) + Double(reader.byte()) / 256)
        let validators = CacheValidators(
            etag: reader.bool() ? reader.string(maxCount: 32) : nil,
            lastModified: reader.bool() ? reader.string(maxCount: 32) : nil,
            maxAge: reader.bool() ? .seconds(Int64(reader.int(in: 0...65_535))) + .milliseconds(reader.int(in: 0...999)) : nil)
        let payload = Data(reader.rest())
        let encoded = EntryEnvelope.encode(key: key, storedAt: storedAt, validators: validators, payload: payload)
        guard let decoded = EntryEnvelope.decode(encoded) else { throw PropertyViolation("an encoded envelope does not decode") }
        try check(
            decoded.header == EntryEnvelope.Header(key: key, storedAt: storedAt, validators: validators) && decoded.payload == payload,
            "an envelope does not decode to what was encoded")
        let cut = bytes.isEmpty ? 0 : Int(bytes[0]) % encoded.count
        try check(EntryEnvelope.decode(encoded.prefix(cut)) == nil, "an envelope cut at \(cut) of \(encoded.count) bytes decodes")
    }

    // MARK: FileStore index and journal

    static let fileIndexSummary =
        "FileStore's index journal and entry files as a crash or another program leaves them (records with valid checksums, then damage): every read is the value written or a miss, writes work after, the count limit holds"

    static let indexKeys = ["alpha", "beta", "gamma", "delta", "epsilon"]

    static func startFileIndex() async throws -> FuzzRunner {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("strata-fuzz-index-\(UUID().uuidString)")
        return FuzzRunner(
            run: { bytes throws(PropertyViolation) in try fileIndex(bytes, folder: folder) },
            stop: { try? FileManager.default.removeItem(at: folder) })
    }

    static func fileIndex(_ bytes: [UInt8], folder: URL) throws(PropertyViolation) {
        try? FileManager.default.removeItem(at: folder)
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var reader = FuzzReader(bytes)
        let countLimit = reader.int(in: 1...4)

        // Entry files: some valid envelopes (their key's, or another key's), some garbage.
        var written: [String: Data] = [:]
        for key in indexKeys where reader.bool() {
            let path = folder.appendingPathComponent(SHA256.hexDigest(key)).path
            switch reader.int(in: 0...3) {
            case 0, 1:
                let payload = Data(reader.bytes(maxCount: 16))
                written[key] = payload
                let envelope = EntryEnvelope.encode(key: key, storedAt: Date(timeIntervalSinceReferenceDate: 0), validators: .none, payload: payload)
                _ = FileManager.default.createFile(atPath: path, contents: envelope)
            case 2:  // another key's entry under this key's name
                let envelope = EntryEnvelope.encode(key: key + "-other", storedAt: .distantPast, validators: .none, payload: Data([1]))
                _ = FileManager.default.createFile(atPath: path, contents: envelope)
            default:
                _ = FileManager.default.createFile(atPath: path, contents: Data(reader.bytes(maxCount: 40)))
            }
        }

        // The journal: a header (valid or not), records with valid checksums, then damage.
        var journal = reader.bool() ? IndexJournal.header(liveCount: reader.int(in: 0...6)) : reader.bytes(maxCount: 16)
        for _ in 0..<reader.int(in: 0...12) {
            let name = reader.bool() ? EntryName(key: reader.pick(indexKeys)) : EntryName(key: reader.string(maxCount: 8))
            let record: IndexJournal.Record = reader.bool() ? .remove(name) : .access(name, size: Int(reader.uint64() >> UInt64(reader.int(in: 1...63))))
            IndexJournal.append(record, to: &journal)
        }
        switch reader.int(in: 0...3) {
        case 0 where !journal.isEmpty:
            journal[reader.int(in: 0...65_535) % journal.count] ^= reader.byte() | 1
        case 1 where !journal.isEmpty:
            journal.removeLast(reader.int(in: 0...65_535) % journal.count)
        case 2:
            journal += reader.bytes(maxCount: 60)
        default:
            break
        }
        if reader.bool() {
            _ = FileManager.default.createFile(atPath: folder.appendingPathComponent(IndexJournal.fileName).path, contents: Data(journal))
        }

        let store = FileStore<Data>(directory: folder, codec: DataCodec(), countLimit: countLimit, synchronizesWrites: false, logger: .quiet)
        let expected = written
        let newKey = reader.pick(indexKeys)
        let newValue = Data(reader.bytes(maxCount: 8))
        let outcome: Result<Void, PropertyViolation> = blocking {
            do {
                for key in indexKeys {
                    let value = try await store.retrieve(key)?.value
                    if let value, value != expected[key] {
                        return .failure(PropertyViolation("\(key) read as \(Array(value)), written \(expected[key].map { Array($0) } ?? [])"))
                    }
                }
                try await store.insert(newValue, for: newKey, storedAt: Date(timeIntervalSinceReferenceDate: 1))
                guard try await store.retrieve(newKey)?.value == newValue else {
                    return .failure(PropertyViolation("a write after opening the damaged index does not read back"))
                }
                for key in indexKeys where key != newKey {
                    try await store.insert(Data(key.utf8), for: key, storedAt: Date(timeIntervalSinceReferenceDate: 2))
                }
                let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
                let entries = files.filter { EntryName(fileName: $0) != nil }
                if entries.count > countLimit {
                    return .failure(PropertyViolation("\(entries.count) entry files with a count limit of \(countLimit)"))
                }
                return .success(())
            } catch {
                return .failure(PropertyViolation("the store failed on a damaged index instead of repairing it: \(error)"))
            }
        }
        try outcome.get()
    }

    // MARK: Outbox entry file

    static func outboxEntry(_ bytes: [UInt8]) throws(PropertyViolation) {
        let data = Data(bytes)
        for entry in [FileOutboxStorage.decode(data), try? OutboxEntry(storageEncoding: data)].compactMap({ $0 }) {
            let file: Data
            do {
                file = try FileOutboxStorage.encode(entry)
            } catch {
                throw PropertyViolation("a decoded outbox entry does not encode: \(error)")
            }
            guard let again = FileOutboxStorage.decode(file) else { throw PropertyViolation("an encoded outbox entry does not decode") }
            try check(again == entry, "an outbox entry changed through its file")
            let cut = file.count / 2 + Int(bytes.first ?? 0) % (file.count / 2)
            try check(FileOutboxStorage.decode(file.prefix(cut)) == nil, "an outbox file cut at \(cut) of \(file.count) bytes decodes")
            // Its attempt file, based on the entry file: splits back into the two, and cut, holds no entry.
            guard let base = FileOutboxStorage.checksum(inHeaderOf: file) else { throw PropertyViolation("an entry file has no checksum in its header") }
            let attempt = FileOutboxStorage.attemptFile(base: base, entryFile: file)
            guard let split = FileOutboxStorage.splitAttempt(attempt), split.base == base, FileOutboxStorage.decode(split.entryFile) == entry else {
                throw PropertyViolation("an attempt file does not read back as its base and its entry")
            }
            // It counts beside a rotten copy of that file only when based on it (the checksum in the
            // header, or of the body when the header's digits rotted), not on another.
            guard let bases = FileOutboxStorage.acceptedBases(besideUnreadable: file), bases.contains(base) else {
                throw PropertyViolation("an attempt does not count beside the entry file it is based on")
            }
            let digit = 16 + Int(bytes.first ?? 0) % 64
            var other = Array(base.utf8)
            other[digit - 16] = other[digit - 16] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
            try check(!bases.contains(String(decoding: other, as: UTF8.self)), "an attempt based on another entry file counts")
            var rotten = file
            rotten[rotten.startIndex + digit] = other[digit - 16]
            try check(
                FileOutboxStorage.acceptedBases(besideUnreadable: rotten)?.contains(base) == true,
                "an attempt does not count beside its entry file whose header's digit \(digit) rotted")
            let attemptCut = attempt.count - 1 - Int(bytes.first ?? 0) % (file.count / 2)
            try check(
                FileOutboxStorage.splitAttempt(attempt.prefix(attemptCut)).flatMap { FileOutboxStorage.decode($0.entryFile) } == nil,
                "an attempt file cut at \(attemptCut) of \(attempt.count) bytes holds an entry")
        }
        // Any bytes as an attempt file, or as an unreadable entry file beside one: refused or read, never a crash.
        if let split = FileOutboxStorage.splitAttempt(data) { _ = FileOutboxStorage.decode(split.entryFile) }
        _ = FileOutboxStorage.acceptedBases(besideUnreadable: data)
    }

    // MARK: BinaryCodec

    /// A value with every shape the binary format has: keyed, unkeyed, optional, nested, recursive,
    /// and the special cases (Date, URL, UUID, Data, floating point).
    struct Sample: Codable, Equatable {
        var id: Int
        var count: UInt8
        var name: String
        var tags: [String]
        var score: Double?
        var ratio: Float
        var flags: [String: Bool]
        var when: Date
        var link: URL?
        var uuid: UUID
        var blob: Data
        var children: [Sample]
    }

    static func binaryCodec(_ bytes: [UInt8]) throws(PropertyViolation) {
        try roundTrip(Sample.self, bytes)
    }

    static func storedResponse(_ bytes: [UInt8]) throws(PropertyViolation) {
        try roundTrip(StoredResponse.self, bytes)
    }

    /// Decodes `bytes` as a body (past the checksum) and as a whole encoding; a value that decodes
    /// encodes, and decodes back to an equal value. (Compared as values, not bytes: a dictionary's
    /// order differs from one process to the next.)
    /// The top-level properties in which `old` and `new` differ, by name, each value dumped with its
    /// dates as numbers.
    static func difference<Value>(_ old: Value, _ new: Value) -> String {
        let pairs = zip(Mirror(reflecting: old).children, Mirror(reflecting: new).children)
        return pairs.compactMap { first, second in
            let (a, b) = (safeDump(first.value), safeDump(second.value))
            return a == b ? nil : "\(first.label ?? "?"): \(a) became \(b)"
        }.joined(separator: "; ")
    }

    static func safeDump(_ value: Any) -> String {
        if let date = value as? Date { return "Date(\(date.timeIntervalSinceReferenceDate.bitPattern))" }
        if let double = value as? Double { return "Double(\(double.bitPattern))" }
        if let float = value as? Float { return "Float(\(float.bitPattern))" }
        if let data = value as? Data { return "Data(\(data.map { String($0, radix: 16) }.joined(separator: " ")))" }
        // Its bytes, not its storage's address (which a mirror would print).
        if let buffer = value as? ByteBuffer { return "ByteBuffer(\(buffer.readableBytesView.map { String($0, radix: 16) }.joined(separator: " ")))" }
        if let url = value as? URL { return "URL(\(url.relativeString.debugDescription), base: \(url.baseURL?.absoluteString.debugDescription ?? "nil"))" }
        if let string = value as? String { return string.debugDescription + " \(Array(string.unicodeScalars).map { $0.value })" }
        let mirror = Mirror(reflecting: value)
        guard !mirror.children.isEmpty else { return String(describing: value) }
        var children = mirror.children.map { "\($0.label ?? ""): \(safeDump($0.value))" }
        // A dictionary's (or set's) order is its storage's: two equal ones may list differently
        // (a false finding of the first long campaign, on a response whose NaN age made `==` false).
        if mirror.displayStyle == .dictionary || mirror.displayStyle == .set { children.sort() }
        return "(" + children.joined(separator: ", ") + ")"
    }

    static func roundTrip<Value: Codable & Equatable>(_ type: Value.Type, _ bytes: [UInt8]) throws(PropertyViolation) {
        let codec = BinaryCodec<Value>()
        let fromBody = bytes.withUnsafeBytes { try? BinaryCodec<Value>.decodeBody($0) }
        let whole = try? codec.decode(Data(bytes))
        for value in [fromBody, whole].compactMap({ $0 }) {
            let again: Value
            do {
                again = try codec.decode(try codec.encode(value))
            } catch {
                throw PropertyViolation("a decoded \(Value.self) does not encode and decode again: \(error)")
            }
            // Equal as values, or bit for bit where a NaN (a Date's too) is unequal to itself. Not
            // printed with `\(value)`: Foundation's `Date.description` traps on an instant past
            // year 9999, which a decoded value may hold.
            try check(
                again == value || safeDump(again) == safeDump(value),
                "a \(Value.self) changed through encode and decode: \(difference(value, again))")
        }
    }
}
#else
enum StorageTargets {
    static let all: [FuzzTarget] = []
}
#endif
