import Foundation
import Testing
@testable @_spi(StrataInternals) import Strata
import StrataTesting

@Suite("Entry envelope and key hashing")
struct EntryFormatTests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func sha256_matchesTheNISTVectors(input: String, digest: String) {
        #expect(SHA256.hexDigest(input) == digest)
    }

    @Test func sha256_ofAMillionAs() {
        let digest = SHA256.digest(Array(repeating: UInt8(ascii: "a"), count: 1_000_000))
        let hex = digest.map { String(format: "%02x", $0) }.joined()
        #expect(hex == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test(arguments: [
        CacheValidators.none, CacheValidators(etag: "\"abc\""), CacheValidators(lastModified: "Wed, 21 Oct 2015 07:28:00 GMT"),
        CacheValidators(etag: "", lastModified: ""), CacheValidators(maxAge: .zero),
        CacheValidators(etag: "\"e\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT", maxAge: .seconds(60)),
        CacheValidators(maxAge: .milliseconds(1_500)), CacheValidators(maxAge: .seconds(CacheControl.maxDeltaSeconds)),
    ])
    func envelope_roundTrips(validators: CacheValidators) throws {
        let storedAt = Date(timeIntervalSinceReferenceDate: 123_456_789.000_001)
        let payload = Data("payload ✓".utf8)
        let bytes = EntryEnvelope.encode(key: "clé", storedAt: storedAt, validators: validators, payload: payload)
        let decoded = try #require(EntryEnvelope.decode(bytes))
        #expect(decoded.header == .init(key: "clé", storedAt: storedAt, validators: validators))
        #expect(decoded.payload == payload)
    }

    @Test func envelope_writesVersion2() {
        let bytes = EntryEnvelope.encode(key: "k", storedAt: referenceDate, validators: .none, payload: Data())
        #expect(Array(bytes.prefix(5)) == Array("STRA".utf8) + [2])
    }

    @Test(arguments: [nil, "\"v1-etag\""])
    func envelope_readsVersion1EntriesWithoutMaxAge(etag: String?) throws {
        let bytes = versionOneEntry(key: "feed", storedAt: referenceDate, etag: etag, lastModified: "Wed, 21 Oct 2015 07:28:00 GMT", payload: Data("[1]".utf8))
        let decoded = try #require(EntryEnvelope.decode(bytes))
        #expect(decoded.header == .init(
            key: "feed", storedAt: referenceDate,
            validators: CacheValidators(etag: etag, lastModified: "Wed, 21 Oct 2015 07:28:00 GMT", maxAge: nil)))
        #expect(decoded.payload == Data("[1]".utf8))
    }

    @Test(arguments: [0, 3, 255] as [UInt8])
    func envelope_rejectsVersionsOtherThan1And2(version: UInt8) {
        var bytes = EntryEnvelope.encode(key: "k", storedAt: referenceDate, validators: .none, payload: Data([1]))
        bytes[bytes.startIndex + 4] = version
        #expect(EntryEnvelope.decode(bytes) == nil)
        var versionOne = versionOneEntry(key: "k", storedAt: referenceDate, etag: nil, lastModified: nil, payload: Data([1]))
        versionOne[versionOne.startIndex + 4] = version
        #expect(EntryEnvelope.decode(versionOne) == nil)
    }

    @Test func envelope_rejectsAVersion1EntryLabelledVersion2() {
        var bytes = versionOneEntry(key: "k", storedAt: referenceDate, etag: nil, lastModified: nil, payload: Data([1]))
        bytes[bytes.startIndex + 4] = 2
        #expect(EntryEnvelope.decode(bytes) == nil)
    }

    /// A maxAge field whose flag is not 0/1, whose seconds are negative, or whose attoseconds are
    /// outside one second makes the entry corrupt.
    @Test(arguments: [
        [UInt8(2)],
        [1] + bigEndianBytes(Int64(-1)) + bigEndianBytes(Int64(0)),
        [1] + bigEndianBytes(Int64(5)) + bigEndianBytes(Int64(1_000_000_000_000_000_000)),
        [1] + bigEndianBytes(Int64(5)) + bigEndianBytes(Int64(-1)),
    ])
    func envelope_rejectsMalformedMaxAge(field: [UInt8]) throws {
        let valid = EntryEnvelope.encode(key: "k", storedAt: referenceDate, validators: .init(maxAge: .seconds(5)), payload: Data([7]))
        // magic 4 + version 1 + storedAt 8 + key (4 + 1) + etag 4 + lastModified 4 = 26 bytes before maxAge.
        let fieldStart = valid.startIndex + 26
        #expect(Array(valid[fieldStart..<fieldStart + 17]) == [1] + bigEndianBytes(Int64(5)) + bigEndianBytes(Int64(0)))
        var bytes = Data(valid[..<fieldStart])
        bytes.append(contentsOf: field)
        bytes.append(valid[(fieldStart + 17)...])
        #expect(EntryEnvelope.decode(bytes) == nil)
    }

    @Test func envelope_rejectsTrailingBytesAndNonFiniteDates() {
        let valid = EntryEnvelope.encode(key: "k", storedAt: referenceDate, validators: .none, payload: Data([1]))
        #expect(EntryEnvelope.decode(valid + Data([0])) == nil)
        let infinite = EntryEnvelope.encode(key: "k", storedAt: .distantFuture, validators: .none, payload: Data())
        var patched = infinite
        withUnsafeBytes(of: Double.infinity.bitPattern.bigEndian) { patched.replaceSubrange(5..<13, with: $0) }
        #expect(EntryEnvelope.decode(patched) == nil)
    }

    @Test func envelope_rejectsEveryPrefixAndRandomBytesWithoutCrashing() {
        let valid = EntryEnvelope.encode(key: "feed", storedAt: referenceDate, validators: .init(etag: "e", maxAge: .seconds(60)), payload: Data("[1,2,3]".utf8))
        for length in 0..<valid.count {
            #expect(EntryEnvelope.decode(valid.prefix(length)) == nil)
        }
        var generator = SplitMix64(seed: 42)
        for _ in 0..<2_000 {
            var bytes = valid
            let flips = Int(generator.next() % 4) + 1
            for _ in 0..<flips {
                let index = Int(generator.next() % UInt64(bytes.count))
                bytes[index] = UInt8(truncatingIfNeeded: generator.next())
            }
            _ = EntryEnvelope.decode(bytes)  // must not trap; any result is fine
        }
    }
}

@Suite("JSONCodec")
struct JSONCodecTests {
    @Test func encodesWithSortedKeys_soOneValueAlwaysGivesTheSameBytes() throws {
        let letters = "zyxwvutsrqponmlkjihgfedcba".map(String.init)
        let value = Dictionary(uniqueKeysWithValues: letters.enumerated().map { ($0.element, $0.offset) })
        let expected = "{" + letters.reversed().map { "\"\($0)\":\(value[$0]!)" }.joined(separator: ",") + "}"
        for _ in 0..<5 {
            #expect(String(decoding: try JSONCodec<[String: Int]>().encode(value), as: UTF8.self) == expected)
        }
    }
}

@Suite("Entry format versions in stores")
struct EntryVersionStoreTests {
    @Test func fileStore_readsAVersion1FileWithoutMaxAge_andRewritesItAsVersion2() async throws {
        let directory = try TemporaryDirectory()
        let store = FileStore<Item>(directory: directory.url, logger: quietLogger)
        let payload = try JSONEncoder().encode(itemA)
        let file = store.fileURL(for: "feed")
        try versionOneEntry(key: "feed", storedAt: referenceDate, etag: "\"v1\"", lastModified: nil, payload: payload).write(to: file)

        let entry = try #require(try await store.retrieve("feed"))
        #expect(entry == CacheEntry(value: itemA, storedAt: referenceDate, validators: CacheValidators(etag: "\"v1\"")))

        let restamped = referenceDate.addingTimeInterval(60)
        #expect(try await store.refresh("feed", storedAt: restamped, validators: .init(etag: "\"v1\"", maxAge: .seconds(30))))
        let bytes = try Data(contentsOf: file)
        #expect(bytes[bytes.startIndex + 4] == 2)
        #expect(try await store.retrieve("feed") == CacheEntry(value: itemA, storedAt: restamped, validators: .init(etag: "\"v1\"", maxAge: .seconds(30))))
    }
}

/// A version-1 entry, assembled byte by byte from the documented layout (not by the encoder), as
/// Strata wrote them before `maxAge` existed.
func versionOneEntry(key: String, storedAt: Date, etag: String?, lastModified: String?, payload: Data) -> Data {
    func string(_ text: String?) -> [UInt8] {
        guard let text else { return [0xFF, 0xFF, 0xFF, 0xFF] }
        return bigEndianBytes(UInt32(text.utf8.count)) + Array(text.utf8)
    }
    var bytes = Array("STRA".utf8) + [1]
    bytes += bigEndianBytes(storedAt.timeIntervalSinceReferenceDate.bitPattern)
    bytes += string(key) + string(etag) + string(lastModified)
    bytes += bigEndianBytes(UInt64(payload.count)) + Array(payload)
    return Data(bytes)
}

func bigEndianBytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    withUnsafeBytes(of: value.bigEndian) { Array($0) }
}

