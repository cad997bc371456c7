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

    private let remembered = Locked<[String: Remembered]>([:])
    /// How many entries it keeps; past that, one it holds is forgotten for each new one.
    package let capacity: Int

    package init(capacity: Int = 1_024) {
        self.capacity = max(capacity, 1)
    }

    /// Remembers that `bytes` are `entry` encoded by `encodedForStorage()`.
    package func remember(_ entry: OutboxEntry, as bytes: Data) {
        let key = entry.id.lowercasedString
        remembered.withLock { remembered in
            if remembered.count >= capacity, remembered[key] == nil {
                remembered.remove(at: remembered.startIndex)
            }
            remembered[key] = Remembered(bytes: bytes, entry: entry)
        }
    }

    /// Forgets the entry with `id` (removed from the storage).
    package func forget(_ id: UUID) {
        let key = id.lowercasedString
        _ = remembered.withLock { $0.removeValue(forKey: key) }
    }

    /// The entry `bytes` encode, when they are the bytes remembered for the id written `id` (its
    /// lowercase form, as storages name rows and files); `nil` otherwise.
    package func entry(_ id: String, bytes: Data) -> OutboxEntry? {
        remembered.withLock { remembered in
            guard let known = remembered[id], known.bytes == bytes else { return nil }
            return known.entry
        }
    }

    /// The entry `bytes` encode, when they are the bytes remembered for `id`; `nil` otherwise.
    package func entry(_ id: UUID, bytes: Data) -> OutboxEntry? {
        entry(id.lowercasedString, bytes: bytes)
    }

    /// How many entries it holds now.
    package var count: Int { remembered.withLock { $0.count } }
}
