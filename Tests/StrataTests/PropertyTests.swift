import Foundation
import PropertyBased
import Testing

@_spi(StrataInternals) @testable import Strata
@testable import StrataOutbox
import StrataTesting

/// Properties that are the specification of a codec, an encoding or a parser, checked on generated
/// inputs (shrunk to the smallest failing one, with the seed to replay it). The fuzz targets in
/// Tools/Fuzz check the same parsers against bytes nobody meant to send; these check them against
/// everything that is valid.
@Suite("properties: codecs, encodings, RFC parsers")
struct PropertyTests {
    // MARK: Generators

    /// Any string, ASCII-heavy but with every kind of scalar (combining marks, emoji, NUL).
    static let anyString = Gen.oneOf(
        Gen<Character>.ascii.string(of: 0...24).eraseToAnySequence(),
        Gen<Character>.latin1.string(of: 0...12).eraseToAnySequence(),
        characters(Array("aé\u{301}🙂👩‍👩‍👧\u{0}\"\\,=;:/?#@ \t\r\n")).string(of: 0...12).eraseToAnySequence())
    /// A `token` (RFC 9110 §5.6.2).
    static let token = characters(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~")).string(of: 1...12)
    /// Visible ASCII, space and tab: a field value's characters.
    static let fieldText = characters(Array(" \t!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"))
        .string(of: 0...16)
    static func characters(_ choices: [Character]) -> Generator<Character, Shrink.None<Character?>> {
        Gen<Character?>.element(of: choices).map { $0! }
    }

    static let instant = Gen<Int64>.value(in: -62_135_596_800...253_402_300_799)

    // MARK: Codecs

    struct Sample: Codable, Equatable {
        var id: Int
        var name: String
        var tags: [String]
        var score: Double?
        var flags: [String: Bool]
        var when: Date
        var blob: Data
    }

    static let sample = zip(
        Gen.int(), anyString, anyString.array(of: 0...4), Gen.double(in: -1e9...1e9).optional(), zip(Self.token, Gen<Bool>.bool).dictionary(ofAtMost: 0...3),
        Gen.int64(in: -4_000_000_000...4_000_000_000), Gen<UInt8>.value().array(of: 0...32)
    ).map { id, name, tags, score, flags, seconds, bytes in
        Sample(
            id: id, name: name, tags: tags, score: score, flags: flags,
            when: Date(timeIntervalSinceReferenceDate: Double(seconds) / 8), blob: Data(bytes))
    }

    @Test("BinaryCodec: decode(encode(v)) == v, and a flipped byte is refused, never misread")
    func binaryCodecRoundTrip() async throws {
        await propertyCheck(input: Self.sample, Gen.int(in: 0...10_000), Gen<UInt8>.value(in: 1...255)) { value, position, flip in
            let codec = BinaryCodec<Sample>()
            let encoded = try codec.encode(value)
            #expect(try codec.decode(encoded) == value)
            var damaged = encoded
            damaged[position % damaged.count] ^= flip
            if let misread = try? codec.decode(damaged) {
                #expect(misread == value, "a damaged encoding decoded to another value")
            }
        }
    }

    @Test("JSONCodec and BinaryCodec agree on every value")
    func codecsAgree() async throws {
        await propertyCheck(input: Self.sample) { value in
            let binary = try BinaryCodec<Sample>().decode(BinaryCodec<Sample>().encode(value))
            let json = try JSONCodec<Sample>().decode(JSONCodec<Sample>().encode(value))
            #expect(binary == json)
        }
    }

    @Test("FileStore's envelope: decode(encode(entry)) == entry; every shorter prefix is refused")
    func envelopeRoundTrip() async throws {
        await propertyCheck(
            input: Self.anyString, Self.anyString.optional(), Gen.int64(in: 0...1_000_000_000).optional(), Gen<UInt8>.value().array(of: 0...64),
            Gen.int64(in: -1_000_000_000...1_000_000_000)
        ) { key, etag, maxAgeMilliseconds, payload, stored in
            let validators = CacheValidators(etag: etag, lastModified: etag.map { "L" + $0 }, maxAge: maxAgeMilliseconds.map { .milliseconds($0) })
            let storedAt = Date(timeIntervalSinceReferenceDate: Double(stored) / 1000)
            let encoded = EntryEnvelope.encode(key: key, storedAt: storedAt, validators: validators, payload: Data(payload))
            let decoded = try #require(EntryEnvelope.decode(encoded))
            #expect(decoded.header == .init(key: key, storedAt: storedAt, validators: validators))
            #expect(decoded.payload == Data(payload))
            for cut in stride(from: 0, to: encoded.count, by: max(1, encoded.count / 7)) {
                #expect(EntryEnvelope.decode(encoded.prefix(cut)) == nil)
            }
        }
    }

    @Test("the outbox entry file: decode(encode(entry)) == entry; a damaged file is refused")
    func outboxEntryRoundTrip() async throws {
        await propertyCheck(
            input: Self.anyString, Self.anyString, Gen<UInt8>.value().array(of: 0...48), Gen<UInt64>.value(), Gen.int(in: 0...100),
            Self.anyString.array(of: 0...3), Gen.int(in: 0...10_000)
        ) { scope, kind, payload, sequence, attempts, invalidates, position in
            let entry = OutboxEntry(
                id: UUID(), sequence: sequence, scope: scope, kind: kind, payload: Data(payload), host: scope.isEmpty ? nil : "h",
                createdAt: Date(timeIntervalSinceReferenceDate: Double(sequence % 1_000_000_007) / 3), attempts: attempts, invalidates: invalidates)
            let file = try FileOutboxStorage.encode(entry)
            #expect(FileOutboxStorage.decode(file) == entry)
            var damaged = file
            damaged[position % damaged.count] ^= 0x01
            #expect(FileOutboxStorage.decode(damaged) == nil)
        }
    }

    // MARK: Key encodings

    @Test("FileStore names: one per key, and a file name reads back as the same name")
    func entryNames() async throws {
        await propertyCheck(input: Self.anyString, Self.anyString) { first, second in
            let name = EntryName(key: first)
            #expect(EntryName(fileName: name.description) == name)
            #expect(name.description.count == 64)
            #expect((EntryName(key: second) == name) == (first == second))
        }
    }

    @Test("the index journal: every record decodes to itself, and any flipped bit is refused")
    func journalRecords() async throws {
        await propertyCheck(input: Self.anyString, Gen.int(in: 0...Int(IndexJournal.maxEntrySize)), Gen<Bool>.bool, Gen.int(in: 0...(IndexJournal.recordSize * 8 - 1))) {
            key, size, removal, bit in
            let record: IndexJournal.Record = removal ? .remove(EntryName(key: key)) : .access(EntryName(key: key), size: size)
            var bytes = IndexJournal.encode(record)
            #expect(bytes.count == IndexJournal.recordSize)
            #expect(IndexJournal.decode(bytes[...]) == record)
            bytes[bit / 8] ^= 1 << (bit % 8)
            #expect(IndexJournal.decode(bytes[...]) == nil, "a record with bit \(bit) flipped still decodes")
        }
    }

    // MARK: Store contract

    @Test("MemoryStore and FileStore give back what was stored under any key")
    func storesRoundTrip() async throws {
        let folder = try TemporaryDirectory(prefix: "strata-properties")
        let file = FileStore<Data>(directory: folder.url, codec: DataCodec(), synchronizesWrites: false)
        let memory = MemoryStore<String, Data>()
        await propertyCheck(input: Self.anyString, Gen<UInt8>.value().array(of: 0...64), Self.anyString.optional()) { key, bytes, etag in
            let storedAt = Date(timeIntervalSinceReferenceDate: 1_000)
            try await Self.roundTrip(in: file, key: key, bytes: bytes, etag: etag, storedAt: storedAt)
            try await Self.roundTrip(in: memory, key: key, bytes: bytes, etag: etag, storedAt: storedAt)
        }
    }

    static func roundTrip(in store: some Store<String, Data>, key: String, bytes: [UInt8], etag: String?, storedAt: Date) async throws {
        try await store.insert(Data(bytes), for: key, storedAt: storedAt, validators: CacheValidators(etag: etag))
        let entry = try #require(try await store.retrieve(key))
        #expect(entry.value == Data(bytes))
        #expect(entry.storedAt == storedAt)
        #expect(entry.validators.etag == etag)
        try await store.delete(key)
        #expect(try await store.retrieve(key) == nil)
    }

    // MARK: RFC parsers against their grammar

    @Test("HTTP dates: every instant prints as IMF-fixdate and parses back; the three forms name the same instant")
    func httpDates() async throws {
        await propertyCheck(input: Self.instant) { seconds in
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            let printed = HTTPDate.format(date)
            #expect(printed.wholeMatch(of: /(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT/) != nil)
            #expect(HTTPDate.date(from: printed) == date)
            // asctime: "Sun Nov  6 08:49:37 1994" from the same parts.
            let parts = printed.split(separator: " ")
            let day = Int(parts[1])!
            let asctime = "\(parts[0].dropLast()) \(parts[2]) \(day < 10 ? " \(day)" : "\(day)") \(parts[4]) \(parts[3])"
            #expect(HTTPDate.date(from: asctime) == date, "\(asctime)")
        }
    }

    @Test("Cache-Control: directives printed back as a field value parse to the same directives")
    func cacheControlDirectives() async throws {
        await propertyCheck(input: zip(Self.token, Self.fieldText.optional()).array(of: 0...5)) { directives in
            let lowered = directives.map { (name: $0.0.lowercased(), value: $0.1) }
            let printed = lowered.map { name, value in
                guard let value else { return name }
                return "\(name)=\"\(value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\""))\""
            }.joined(separator: ", ")
            let parsed = CacheControl.directives(in: printed)
            #expect(parsed.map(\.name) == lowered.map(\.name))
            #expect(parsed.map(\.value) == lowered.map(\.value))
        }
    }

    @Test("delta-seconds: 1*DIGIT and nothing else, capped at 2^31")
    func deltaSeconds() async throws {
        await propertyCheck(input: Gen<UInt64>.value(), Self.fieldText) { number, text in
            let expected = min(Int64(clamping: number), CacheControl.maxDeltaSeconds)
            #expect(CacheControl.deltaSeconds(String(number)) == expected)
            let isDigits = !text.isEmpty && text.allSatisfy(\.isASCIIDigit)
            #expect((CacheControl.deltaSeconds(text) != nil) == isDigits, "\(text.debugDescription)")
        }
    }

    @Test("redaction is idempotent, and a query value never survives")
    func redaction() async throws {
        await propertyCheck(input: Self.anyString, Gen.letterOrNumber.string(of: 12...24)) { text, secret in
            let once = Redaction.redactingSecrets(in: text)
            #expect(Redaction.redactingSecrets(in: once) == once)
            let url = "https://api.example.test/feed?page=2&token=Zq9\(secret)"
            #expect(!Redaction.redactingSecrets(in: text + " " + url + " ").contains("Zq9\(secret)"))
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

