#if Postgres
import Foundation
import Strata

/// An `OutboxEntry` as the bytes of the `entry` column: JSON with sorted keys, dates as
/// `Date`'s own seconds since 2001 (so they come back to the bit), payloads as Base64.
enum OutboxEntryCoding {
    static func encode(_ entry: OutboxEntry) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(entry)
    }

    static func decode(_ data: Data) throws -> OutboxEntry {
        try JSONDecoder().decode(OutboxEntry.self, from: data)
    }
}
#endif
