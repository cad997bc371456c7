import Foundation
@_spi(StrataInternals) import Strata

extension OutboxEntry {
    /// The entry as Strata's outbox storages keep it: JSON with sorted keys, dates as `Date`'s own
    /// seconds since 2001 (the shortest decimal that reads back the same value, so a date comes back
    /// to the bit), payloads as Base64. A storage of your own may keep entries this way too.
    public func encodedForStorage() throws -> Data {
        if let written = writtenForStorage() { return written }
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

    /// The common entry (pending, no failure on record: every new write, and every attempt before
    /// the first failure) written directly, as `JSONEncoder` writes it: the same keys, sorted, the
    /// same values, at a fraction of its cost (`JSONEncoder` was about a third of an enqueue's
    /// instructions). `nil` for the other entries, which `JSONEncoder` writes.
    func writtenForStorage() -> Data? {
        guard state == .pending, lastFailure == nil,
              createdAt.timeIntervalSinceReferenceDate.isFinite, queuedAt.timeIntervalSinceReferenceDate.isFinite,
              nextAttemptAt.timeIntervalSinceReferenceDate.isFinite
        else { return nil }
        var out = StorageJSON(capacity: 320 + payload.count * 4 / 3 + scope.utf8.count + kind.utf8.count)
        out.open()
        out.key("attempts", first: true); out.number("\(attempts)")
        if let baseVersion { out.key("baseVersion"); out.string(baseVersion) }
        out.key("createdAt"); out.number(createdAt.timeIntervalSinceReferenceDate.description)
        if let host { out.key("host"); out.string(host) }
        out.key("id"); out.string(id.uppercasedString)
        out.key("inFlightConflicts"); out.number("\(inFlightConflicts)")
        out.key("invalidates"); out.strings(invalidates)
        out.key("keyRevision"); out.number("\(keyRevision)")
        out.key("kind"); out.string(kind)
        out.key("nextAttemptAt"); out.number(nextAttemptAt.timeIntervalSinceReferenceDate.description)
        out.key("payload"); out.string(payload.base64EncodedString())
        out.key("queuedAt"); out.number(queuedAt.timeIntervalSinceReferenceDate.description)
        out.key("scope"); out.string(scope)
        out.key("sequence"); out.number("\(sequence)")
        out.key("state"); out.raw(#"{"pending":{}}"#)
        out.close()
        return Data(out.bytes)
    }
}

/// The few pieces of JSON ``OutboxEntry/writtenForStorage()`` writes.
private struct StorageJSON {
    var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func open() { bytes.append(UInt8(ascii: "{")) }
    mutating func close() { bytes.append(UInt8(ascii: "}")) }
    mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }
    mutating func number(_ text: String) { bytes.append(contentsOf: text.utf8) }

    mutating func key(_ name: String, first: Bool = false) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func strings(_ values: [String]) {
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// `value` as a JSON string: quotes, backslashes and control characters escaped (and `/`, as
    /// `JSONEncoder` does), everything else as its UTF-8, copied a run at a time between escapes.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var run = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "/") || byte < 0x20 else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<index]))
                escape(byte)
                run = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// One byte that JSON (as `JSONEncoder` writes it) escapes.
    private mutating func escape(_ byte: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case 0..<0x20:
            let hex: StaticString = "0123456789abcdef"
            bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            bytes.append(hex.utf8Start[Int(byte >> 4)])
            bytes.append(hex.utf8Start[Int(byte & 0x0f)])
        default: bytes.append(byte)  // the quote, the backslash, the slash
        }
    }
}
