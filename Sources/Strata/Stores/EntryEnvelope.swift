import Foundation

/// The byte layout byte-level stores use for one entry: a versioned header, then the codec's payload.
///
/// ```
/// "STRA"            4 bytes  magic
/// version           1 byte   (2; version 1 is still read)
/// storedAt          8 bytes  Date.timeIntervalSinceReferenceDate, IEEE 754 bits, big-endian
/// key               u32 length + UTF-8
/// etag              u32 length + UTF-8, or 0xFFFF_FFFF for none
/// lastModified      u32 length + UTF-8, or 0xFFFF_FFFF for none
/// maxAge            version 2 only: 1 byte 0 (none), or 1 then i64 seconds + i64 attoseconds,
///                   big-endian (a non-negative Duration's components)
/// payload           u64 length + bytes; the entry ends exactly there
/// ```
/// The key is kept so a store can tell its own entry from another key's (hash collisions, copied
/// files); the payload length makes any truncation detectable. Anything that does not parse is
/// corrupt, and so is any version other than 1 and 2. Version 1 entries, which have no `maxAge`
/// field, read with `maxAge == nil`.
enum EntryEnvelope {
    static let magic: [UInt8] = Array("STRA".utf8)
    /// The version written.
    static let version: UInt8 = 2
    /// The versions read.
    static let readableVersions: ClosedRange<UInt8> = 1...2
    private static let none: UInt32 = 0xFFFF_FFFF
    private static let attosecondsPerSecond: Int64 = 1_000_000_000_000_000_000

    struct Header: Sendable, Equatable {
        var key: String
        var storedAt: Date
        var validators: CacheValidators
    }

    /// The bytes of `entry` under `key`, its value encoded by `codec`; a value that does not encode
    /// throws the ``StoreError`` of an insert into `store`.
    static func encode<Value>(_ entry: CacheEntry<Value>, key: String, codec: any Codec<Value>, store: String) throws(StoreError) -> Data {
        let payload: Data
        do {
            payload = try codec.encode(entry.value)
        } catch {
            throw StoreError(store: store, operation: .insert, key: key, reason: "value does not encode: \(error)", underlying: error)
        }
        return encode(key: key, storedAt: entry.storedAt, validators: entry.validators, payload: payload)
    }

    static func encode(key: String, storedAt: Date, validators: CacheValidators, payload: Data) -> Data {
        var out = Data()
        let keyBytes = Array(key.utf8)
        out.reserveCapacity(4 + 1 + 8 + 4 + keyBytes.count + 8 + 8 + payload.count + 64)
        out.append(contentsOf: magic)
        out.append(version)
        appendBigEndian(storedAt.timeIntervalSinceReferenceDate.bitPattern, to: &out)
        appendString(key, to: &out)
        appendOptionalString(validators.etag, to: &out)
        appendOptionalString(validators.lastModified, to: &out)
        if let maxAge = validators.maxAge {
            out.append(1)
            appendBigEndian(maxAge.components.seconds, to: &out)
            appendBigEndian(maxAge.components.attoseconds, to: &out)
        } else {
            out.append(0)
        }
        appendBigEndian(UInt64(payload.count), to: &out)
        out.append(payload)
        return out
    }

    /// Parses `data`; `nil` when it is not a complete, well-formed entry of a readable version.
    static func decode(_ data: Data) -> (header: Header, payload: Data)? {
        var reader = Reader(data: data)
        guard let magicBytes = reader.bytes(4), magicBytes.elementsEqual(magic),
              let entryVersion = reader.byte(), readableVersions.contains(entryVersion),
              let storedBits: UInt64 = reader.integer(),
              let key = reader.string(),
              let etag = reader.optionalString(),
              let lastModified = reader.optionalString(),
              let maxAge = entryVersion >= 2 ? reader.optionalDuration() : Box(value: nil),
              let payloadLength: UInt64 = reader.integer(),
              payloadLength == UInt64(reader.remaining),
              let payload = reader.bytes(Int(payloadLength))
        else { return nil }
        let interval = Double(bitPattern: storedBits)
        guard interval.isFinite else { return nil }
        let header = Header(
            key: key,
            storedAt: Date(timeIntervalSinceReferenceDate: interval),
            validators: CacheValidators(etag: etag.value, lastModified: lastModified.value, maxAge: maxAge.value)
        )
        return (header, Data(payload))
    }

    private static func appendBigEndian<T: FixedWidthInteger>(_ value: T, to data: inout Data) {
        withUnsafeBytes(of: value.bigEndian) { data.append(contentsOf: $0) }
    }

    private static func appendString(_ string: String, to data: inout Data) {
        let bytes = Array(string.utf8)
        appendBigEndian(UInt32(bytes.count), to: &data)
        data.append(contentsOf: bytes)
    }

    private static func appendOptionalString(_ string: String?, to data: inout Data) {
        guard let string else { return appendBigEndian(none, to: &data) }
        appendString(string, to: &data)
    }

    /// A bounds-checked cursor over the entry's bytes.
    private struct Reader {
        let data: Data
        var offset: Data.Index

        init(data: Data) {
            self.data = data
            self.offset = data.startIndex
        }

        var remaining: Int { data.endIndex - offset }

        mutating func bytes(_ count: Int) -> Data.SubSequence? {
            guard count >= 0, remaining >= count else { return nil }
            defer { offset += count }
            return data[offset..<offset + count]
        }

        mutating func byte() -> UInt8? { bytes(1)?.first }

        mutating func integer<T: FixedWidthInteger>() -> T? {
            guard let raw = bytes(MemoryLayout<T>.size) else { return nil }
            return raw.reduce(T.zero) { ($0 << 8) | T($1) }
        }

        mutating func string() -> String? {
            guard let length: UInt32 = integer(), length != EntryEnvelope.none,
                  let raw = bytes(Int(length)) else { return nil }
            return String(validating: raw, as: UTF8.self)
        }

        /// `.some(nil)` for an absent string, `nil` for malformed bytes.
        mutating func optionalString() -> Box<String?>? {
            let start = offset
            guard let length: UInt32 = integer() else { return nil }
            if length == EntryEnvelope.none { return Box(value: nil) }
            offset = start
            guard let text = string() else { return nil }
            return Box(value: text)
        }

        /// `.some(nil)` for an absent duration, `nil` for malformed bytes (a flag other than 0 or 1,
        /// attoseconds out of range, a negative duration).
        mutating func optionalDuration() -> Box<Duration?>? {
            switch byte() {
            case 0:
                return Box(value: nil)
            case 1:
                guard let seconds: Int64 = integer(), let attoseconds: Int64 = integer(),
                      seconds >= 0, (0..<EntryEnvelope.attosecondsPerSecond).contains(attoseconds)
                else { return nil }
                return Box(value: Duration(secondsComponent: seconds, attosecondsComponent: attoseconds))
            default:
                return nil
            }
        }
    }

    private struct Box<T> { var value: T }
}
