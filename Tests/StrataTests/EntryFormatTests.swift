import Foundation
import Testing
@testable import Strata

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
        CacheValidators(etag: "", lastModified: ""),
    ])
    func envelope_roundTrips(validators: CacheValidators) throws {
        let storedAt = Date(timeIntervalSinceReferenceDate: 123_456_789.000_001)
        let payload = Data("payload ✓".utf8)
        let bytes = EntryEnvelope.encode(key: "clé", storedAt: storedAt, validators: validators, payload: payload)
        let decoded = try #require(EntryEnvelope.decode(bytes))
        #expect(decoded.header == .init(key: "clé", storedAt: storedAt, validators: validators))
        #expect(decoded.payload == payload)
    }

    @Test func envelope_rejectsTrailingBytesAnotherVersionAndNonFiniteDates() {
        let valid = EntryEnvelope.encode(key: "k", storedAt: referenceDate, validators: .none, payload: Data([1]))
        #expect(EntryEnvelope.decode(valid + Data([0])) == nil)
        var otherVersion = valid
        otherVersion[otherVersion.startIndex + 4] = 2
        #expect(EntryEnvelope.decode(otherVersion) == nil)
        let infinite = EntryEnvelope.encode(key: "k", storedAt: .distantFuture, validators: .none, payload: Data())
        var patched = infinite
        withUnsafeBytes(of: Double.infinity.bitPattern.bigEndian) { patched.replaceSubrange(5..<13, with: $0) }
        #expect(EntryEnvelope.decode(patched) == nil)
    }

    @Test func envelope_rejectsEveryPrefixAndRandomBytesWithoutCrashing() {
        let valid = EntryEnvelope.encode(key: "feed", storedAt: referenceDate, validators: .init(etag: "e"), payload: Data("[1,2,3]".utf8))
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

/// A small deterministic generator, so the fuzz loop is repeatable.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
