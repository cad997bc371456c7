import Foundation
@_spi(StrataInternals) import Strata

/// The entries a storage wrote last, each with the bytes it wrote: reading back bytes it wrote
/// itself (a drain reads its scope back right after claiming it), the storage takes the entry it
/// already has instead of decoding it again.
///
/// It is a cache of `OutboxEntry(storageEncoding:)` and nothing more: an entry is returned only
/// for bytes equal, byte for byte, to the ones `encodedForStorage()` made of it, which decode back
/// to it. So what the storage holds decides what is read, whoever wrote it and whenever: bytes
/// another process wrote, or an older version, differ and are decoded. Decoding was most of a
/// read back (about 160,000 instructions an entry on Linux); a comparison is a `memcmp`.
package final class OutboxEntryMemo: Sendable {
    private struct Remembered: Sendable {
        var bytes: Data
        var entry: OutboxEntry
    }

    private struct State: Sendable {
        var entries: [String: Remembered] = [:]
        /// The bytes it holds, its entries' encodings (each entry's payload is in them too).
        var bytes = 0

        mutating func remove(_ key: String) {
            if let gone = entries.removeValue(forKey: key) { bytes -= gone.bytes.count * 2 }
        }
    }

    private let state = Locked(State())
    /// How many entries it keeps; past that, one it holds is forgotten for each new one.
    package let capacity: Int
    /// How many bytes it keeps at most, counting each entry twice (its encoding and its payload):
    /// an entry larger than an eighth of it is not remembered, so a few large uploads do not stay
    /// in memory twice.
    package let byteLimit: Int

    package init(capacity: Int = 1_024, byteLimit: Int = 8 << 20) {
        self.capacity = max(capacity, 1)
        self.byteLimit = max(byteLimit, 1)
    }

    /// Remembers that `bytes` are `entry` encoded by `encodedForStorage()`.
    package func remember(_ entry: OutboxEntry, as bytes: Data) {
        let key = entry.id.lowercasedString
        let cost = bytes.count * 2
        state.withLock { state in
            state.remove(key)
            guard cost <= byteLimit / 8 else { return }
            while !state.entries.isEmpty, state.entries.count >= capacity || state.bytes + cost > byteLimit {
                state.remove(state.entries[state.entries.startIndex].key)
            }
            state.entries[key] = Remembered(bytes: bytes, entry: entry)
            state.bytes += cost
        }
    }

    /// Forgets the entry with `id` (removed from the storage).
    package func forget(_ id: UUID) {
        let key = id.lowercasedString
        state.withLock { $0.remove(key) }
    }

    /// The entry `bytes` encode, when they are the bytes remembered for the id written `id` (its
    /// lowercase form, as storages name rows and files); `nil` otherwise.
    package func entry(_ id: String, bytes: Data) -> OutboxEntry? {
        state.withLock { state in
            guard let known = state.entries[id], known.bytes == bytes else { return nil }
            return known.entry
        }
    }

    /// The entry `bytes` encode, when they are the bytes remembered for `id`; `nil` otherwise.
    package func entry(_ id: UUID, bytes: Data) -> OutboxEntry? {
        entry(id.lowercasedString, bytes: bytes)
    }

    /// How many entries it holds now.
    package var count: Int { state.withLock { $0.entries.count } }

    /// How many bytes it counts now (each entry's encoding twice).
    package var byteCount: Int { state.withLock { $0.bytes } }
}
