import Foundation
@testable @_spi(StrataInternals) import Strata
@testable import StrataOutbox
import Testing

/// The memo a storage keeps of the entries it wrote: it answers only for the very bytes it
/// remembers for an id, forgets on removal, and holds no more than its capacity.
@Suite("OutboxEntryMemo: a decode cache keyed by an entry's id and its exact bytes")
struct OutboxEntryMemoTests {
    /// Entry `n` (the same id for the same `n`), with `attempts`.
    static func entry(_ n: Int, attempts: Int = 0) -> OutboxEntry {
        let id = UUID(uuidString: String(format: "0194F3A2-7B10-7C3D-8E4F-%012X", n))!
        return OutboxEntry(
            id: id, sequence: UInt64(n), scope: "scope", kind: "write", payload: Data("payload \(n)".utf8), host: nil,
            createdAt: Date(timeIntervalSinceReferenceDate: Double(n)), attempts: attempts)
    }

    @Test("the remembered entry for its own bytes; nil for other bytes, another id, or after forget")
    func answersOnlyForTheBytesItRemembers() throws {
        let memo = OutboxEntryMemo()
        let entry = Self.entry(1)
        let bytes = try entry.encodedForStorage()
        memo.remember(entry, as: bytes)
        #expect(memo.entry(entry.id, bytes: bytes) == entry)
        #expect(try OutboxEntry(storageEncoding: bytes) == entry, "what a decode would have given")
        let older = try Self.entry(1, attempts: 3).encodedForStorage()
        #expect(memo.entry(entry.id, bytes: older) == nil, "another version's bytes are decoded, not answered")
        #expect(memo.entry(UUID(), bytes: bytes) == nil)
        var damaged = bytes
        damaged[damaged.startIndex + 3] ^= 1
        #expect(memo.entry(entry.id, bytes: damaged) == nil)
        memo.forget(entry.id)
        #expect(memo.entry(entry.id, bytes: bytes) == nil)
        #expect(memo.count == 0)
    }

    @Test("a newer version replaces the one remembered for its id")
    func aNewerVersionReplacesTheOld() throws {
        let memo = OutboxEntryMemo()
        let first = Self.entry(2), attempted = Self.entry(2, attempts: 1)
        let (firstBytes, attemptedBytes) = (try first.encodedForStorage(), try attempted.encodedForStorage())
        memo.remember(first, as: firstBytes)
        memo.remember(attempted, as: attemptedBytes)
        #expect(memo.entry(first.id, bytes: attemptedBytes) == attempted)
        #expect(memo.entry(first.id, bytes: firstBytes) == nil)
        #expect(memo.count == 1)
    }

    @Test("it holds at most its capacity", arguments: [1, 8])
    func holdsAtMostItsCapacity(capacity: Int) throws {
        let memo = OutboxEntryMemo(capacity: capacity)
        var kept: [(OutboxEntry, Data)] = []
        for n in 0..<(capacity * 3) {
            let entry = Self.entry(100 + n)
            let bytes = try entry.encodedForStorage()
            memo.remember(entry, as: bytes)
            kept.append((entry, bytes))
            #expect(memo.count <= capacity)
        }
        #expect(memo.count == capacity)
        #expect(memo.entry(kept.last!.0.id, bytes: kept.last!.1) == kept.last!.0, "the latest is always kept")
    }

    @Test("it keeps no more bytes than its limit, and does not keep an entry larger than an eighth of it")
    func holdsAtMostItsBytes() throws {
        let memo = OutboxEntryMemo(capacity: 1_000, byteLimit: 16_000)
        for n in 0..<100 {
            let entry = Self.entry(200 + n)
            memo.remember(entry, as: try entry.encodedForStorage())
            #expect(memo.byteCount <= 16_000)
        }
        #expect(memo.count > 1 && memo.count < 100)
        var large = Self.entry(400)
        large.payload = Data(repeating: 7, count: 2_000)
        let bytes = try large.encodedForStorage()
        memo.remember(large, as: bytes)
        #expect(memo.entry(large.id, bytes: bytes) == nil, "\(bytes.count * 2) bytes, over an eighth of 16,000")
        memo.forget(Self.entry(299).id)
        let left = memo.count
        for n in 200..<300 { memo.forget(Self.entry(n).id) }
        #expect(memo.count == 0 && memo.byteCount == 0, "\(left) forgotten, their bytes with them")
    }
}
