import Foundation
@_spi(StrataInternals) import Strata

extension OutboxEntry {
    /// The entry as Strata's outbox storages keep it: JSON with sorted keys, dates as `Date`'s own
    /// seconds since 2001 (the shortest decimal that reads back the same value, so a date comes back
    /// to the bit), payloads as Base64. A storage of your own may keep entries this way too.
    public func encodedForStorage() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .deferredToDate
        return try encoder.encode(self)
    }

    /// The entry in bytes that `encodedForStorage()` made.
    /// - Throws: `DecodingError` when they are not such an entry.
    public init(storageEncoding data: Data) throws {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .deferredToDate
        self = try decoder.decode(OutboxEntry.self, from: data)
    }
}
