import Foundation
@testable import StrataOutbox
import StrataTesting
import Testing

/// `OutboxEntry.encodedForStorage()` writes a pending entry with no failure on record directly,
/// without `JSONEncoder`: what it writes must read back as the entry, and be the JSON `JSONEncoder`
/// writes (sorted keys), so storages and older versions read it alike.
@Suite("OutboxEntry storage encoding")
struct OutboxEntryStorageEncodingTests {
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .deferredToDate
        return encoder
    }

    /// Strings with what JSON must escape, and what it must not touch.
    static let awkward = [
        "", "plain", "quote \" and backslash \\", "slash / and tab \t and newline \n and return \r",
        "control \u{0} \u{1} \u{1F} \u{7F}", "unicode é ü 日本 🙂", "\u{2028}\u{2029}", "\"\"\\\\//",
    ]

    static func entry(_ random: inout SplitMix64) -> OutboxEntry {
        func pick() -> String { awkward[Int(random.next() % UInt64(awkward.count))] }
        func date() -> Date {
            switch random.next() % 4 {
            case 0: Date(timeIntervalSinceReferenceDate: 0)
            case 1: Date(timeIntervalSinceReferenceDate: Double(random.next() % 1_000_000_000))
            case 2: Date(timeIntervalSinceReferenceDate: Double(random.next() % 1_000_000_000) + Double(random.next() % 1_000_000) / 1_000_000.0)
            default: Date(timeIntervalSinceReferenceDate: -Double(random.next() % 1_000_000) / 7)
            }
        }
        var entry = OutboxEntry(
            id: UUID(), sequence: random.next() >> UInt64(random.next() % 64), scope: pick(), kind: pick(),
            payload: Data((0..<Int(random.next() % 300)).map { _ in UInt8(truncatingIfNeeded: random.next()) }),
            host: random.next() % 2 == 0 ? nil : pick(), baseVersion: random.next() % 2 == 0 ? nil : pick(),
            createdAt: date(), attempts: Int(random.next() % 50), nextAttemptAt: date(),
            invalidates: (0..<Int(random.next() % 4)).map { _ in pick() })
        entry.queuedAt = date()
        entry.keyRevision = Int(random.next() % 3)
        entry.inFlightConflicts = Int(random.next() % 3)
        return entry
    }

    @Test("2,000 random pending entries: written directly, they read back exactly, and are JSONEncoder's JSON")
    func writtenDirectlyIsJSONEncodersJSON() throws {
        var random = SplitMix64(seed: 43)
        for index in 0..<2_000 {
            let entry = Self.entry(&random)
            let written = try #require(entry.writtenForStorage(), "entry \(index) was not written directly")
            #expect(try OutboxEntry(storageEncoding: written) == entry, "entry \(index) does not read back")
            let reference = try Self.encoder().encode(entry)
            let asWritten = try JSONSerialization.jsonObject(with: written) as? NSDictionary
            let asReference = try JSONSerialization.jsonObject(with: reference) as? NSDictionary
            #expect(asWritten == asReference, "entry \(index): not the JSON JSONEncoder writes")
        }
    }

    @Test("a parked entry, or one with a failure on record, goes through JSONEncoder and reads back")
    func otherEntriesUseJSONEncoder() throws {
        var random = SplitMix64(seed: 7)
        var failed = Self.entry(&random)
        failed.lastFailure = OutboxFailure(class: .transient, message: "502 \"Bad\" Gateway", status: 502, at: Date(timeIntervalSinceReferenceDate: 12.5))
        var parked = Self.entry(&random)
        parked.state = .parked(DeadLetter(reason: .retentionExceeded, detail: "5 attempts", parkedAt: Date(timeIntervalSinceReferenceDate: 99)))
        for entry in [failed, parked] {
            #expect(entry.writtenForStorage() == nil)
            #expect(try OutboxEntry(storageEncoding: try entry.encodedForStorage()) == entry)
        }
    }
}

/// A new write's id: a version 7 UUID with its creation millisecond up front and random bits after.
@Suite("OutboxEntry ids: UUIDv7")
struct OutboxEntryIDTests {
    @Test("version 7, variant 10, the millisecond in the first 48 bits, ids of later milliseconds sort after, none repeated")
    func version7() {
        var ids = Set<UUID>()
        var previous: (id: UUID, milliseconds: UInt64)?
        for step in 0..<10_000 {
            let date = Date(timeIntervalSince1970: 1_767_225_600.123 + Double(step / 10) / 1000)
            let id = UUID.version7(at: date)
            let bytes = withUnsafeBytes(of: id.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 7 && bytes[8] >> 6 == 0b10)
            let milliseconds = bytes[0..<6].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            #expect(milliseconds == UInt64(date.timeIntervalSince1970 * 1000))
            if let previous, milliseconds > previous.milliseconds { #expect(previous.id.uuidString < id.uuidString) }
            previous = (id, milliseconds)
            ids.insert(id)
        }
        #expect(ids.count == 10_000)
    }
}
